// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The kernel-compat layer as a module: module_param from the command line
 * (count=5 name=hello) and the environment (kc_env=7), module_init's
 * return, kthreads (bind, should_stop, stop's return value), completions,
 * atomics, ktime, sort, online CPUs, ERR_PTR, kmalloc and friends.
 */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/atomic.h>
#include <linux/slab.h>
#include <linux/ktime.h>
#include <linux/cpumask.h>
#include <linux/sched.h>
#include <linux/sort.h>
#include <linux/workqueue.h>
#include "check.h"
#include <pthread.h>

static int count = 1;
module_param(count, int, 0444);
MODULE_PARM_DESC(count, "set to 5 by the runner");
static char *name = "unset";
module_param(name, charp, 0444);
static unsigned long kc_env;
module_param(kc_env, ulong, 0444);
static bool flag = true;
module_param(flag, bool, 0444);

static DECLARE_COMPLETION(start);
static atomic_t started;

static int worker(void *arg)
{
	long id = (long)arg;

	CHECK(current && strncmp(current->comm, "kc/", 3) == 0);
	atomic_inc(&started);
	wait_for_completion(&start);	/* complete_all releases everyone */
	if (current->cpu >= 0)
		CHECK_EQ(smp_processor_id(), current->cpu);
	while (!kthread_should_stop())
		schedule();
	return (int)id * 10;
}

/* A request a caller waits for and frees as soon as it is done. */
struct req {
	struct work_struct work;
	struct completion done;
};

static void req_fn(struct work_struct *w)
{
	complete(&container_of(w, struct req, work)->done);
}

static struct completion shared_c;

static void *shared_waiter(void *arg)
{
	(void)arg;
	wait_for_completion(&shared_c);
	return NULL;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static int __init kc_init(void)
{
	struct task_struct *t[8];
	struct completion c;
	int cpu, n = 0, i, v[] = { 5, 3, 9, 1 };
	atomic_t a = ATOMIC_INIT(2);
	ktime_t t0, t1;

	CHECK_EQ(count, 5);
	CHECK(strcmp(name, "hello") == 0);
	CHECK_EQ(kc_env, 7);
	CHECK(flag);
	PASS("module_param from the command line and the environment");

	for_each_online_cpu(cpu)
		n++;
	CHECK_EQ(n, num_online_cpus());
	CHECK(cpu_online(0) || num_online_cpus() > 0);
	n = min(n, 8);
	i = 0;
	for_each_online_cpu(cpu) {
		if (i >= n)
			break;
		t[i] = kthread_create(worker, (void *)(long)i, "kc/%d", cpu);
		CHECK(!IS_ERR(t[i]));
		kthread_bind(t[i], cpu);
		CHECK_EQ(wake_up_process(t[i]), 1);
		CHECK_EQ(wake_up_process(t[i]), 0);
		i++;
	}
	while (atomic_read(&started) < n)
		schedule();
	complete_all(&start);
	for (i = 0; i < n; i++)
		CHECK_EQ(kthread_stop(t[i]), i * 10);
	t[0] = kthread_create(worker, NULL, "kc/never");
	CHECK_EQ(kthread_stop(t[0]), -EINTR);	/* never woken: never ran */
	PASS("kthreads: create, bind, wake, should_stop, stop");

	init_completion(&c);
	CHECK(!try_wait_for_completion(&c));
	CHECK_EQ(wait_for_completion_timeout(&c, 5), 0);
	complete(&c);
	complete(&c);
	CHECK(completion_done(&c));
	wait_for_completion(&c);
	CHECK(wait_for_completion_timeout(&c, 1000) > 0);
	CHECK(!completion_done(&c));
	complete_all(&c);
	wait_for_completion(&c);
	wait_for_completion(&c);
	reinit_completion(&c);
	CHECK(!completion_done(&c));
	PASS("completions");

	/*
	 * The waiter frees the request as soon as it wakes, while complete()
	 * may still be returning on the worker: complete() must not read the
	 * completion after handing it over (the asan mode would see it).
	 */
	{
		struct workqueue_struct *rq = alloc_workqueue("kc_req", WQ_UNBOUND, 0);

		for (i = 0; i < 20000; i++) {
			struct req *r = kmalloc(sizeof(*r), GFP_KERNEL);

			CHECK(r);
			INIT_WORK(&r->work, req_fn);
			init_completion(&r->done);
			CHECK(queue_work(rq, &r->work));
			wait_for_completion(&r->done);
			kfree(r);
		}
		destroy_workqueue(rq);
	}
	PASS("a request freed by its waiter right after complete()");

	/* Four sleepers on one completion: four complete() calls wake all four
	 * (each wake clears the waiters bit; the rest set it again). */
	{
		pthread_t w[4];

		init_completion(&shared_c);
		for (i = 0; i < 4; i++)
			CHECK_EQ(pthread_create(&w[i], NULL, shared_waiter, NULL), 0);
		for (i = 0; i < 4; i++)
			complete(&shared_c);
		for (i = 0; i < 4; i++)
			CHECK_EQ(pthread_join(w[i], NULL), 0);
		CHECK(!completion_done(&shared_c));
	}
	PASS("one completion, several sleepers");

	CHECK(!atomic_dec_and_test(&a));
	CHECK(atomic_dec_and_test(&a));
	CHECK_EQ(atomic_inc_return(&a), 1);
	CHECK_EQ(atomic_cmpxchg(&a, 1, 7), 1);
	CHECK_EQ(atomic_read(&a), 7);
	CHECK_EQ(atomic_fetch_add(3, &a), 7);
	CHECK_EQ(atomic_xchg(&a, 0), 10);
	PASS("atomic_t");

	t0 = ktime_get();
	msleep(2);
	CHECK_EQ(msleep_interruptible(1), 0);	/* nothing interrupts it */
	t1 = ktime_get();
	CHECK(ktime_after(t1, t0));
	CHECK(ktime_to_ns(ktime_sub(t1, t0)) > 0);
	CHECK(ktime_us_delta(t1, t0) == ktime_to_ns(ktime_sub(t1, t0)) / 1000);
	sort(v, ARRAY_SIZE(v), sizeof(v[0]), cmp_int, NULL);
	CHECK(v[0] == 1 && v[1] == 3 && v[2] == 5 && v[3] == 9);
	CHECK_EQ(max(3, 4), 4);
	CHECK_EQ(min_t(long, -1, 2), -1);
	CHECK(IS_ERR(ERR_PTR(-ENOMEM)) && PTR_ERR(ERR_PTR(-ENOMEM)) == -ENOMEM);
	CHECK(!IS_ERR(&a) && IS_ERR_OR_NULL(NULL));
	CHECK(kvmalloc_array((size_t)-1, 16, GFP_KERNEL) == NULL);
	{
		int *z = kcalloc(4, sizeof(int), GFP_KERNEL);

		CHECK(z && z[3] == 0);
		kvfree(z);
	}
	PASS("ktime, sort, min/max, ERR_PTR, kmalloc");
	return -EAGAIN;	/* as the kernel's test modules: a normal end */
}

module_init(kc_init);
MODULE_LICENSE("MIT");
