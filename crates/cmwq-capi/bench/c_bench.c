// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The C API's cost, measured in the shape of the kernel's lib/test_workqueue
 * (written for cmwq, not copied): one producer kthread per online CPU, bound
 * to it, with one item in flight: re-init its completion and its work item,
 * time queue_work() alone, wait for the callback's complete(). The queue is
 * unbound with WQ_SYSFS, and before each run its affinity_scope is written
 * through /sys/bus/workqueue/devices/<name>/affinity_scope, as the module does.
 *
 * Parameters (name=value arguments or environment variables):
 *   nr_threads  producers (0: every online CPU; at most that many)
 *   wq_items    items per producer (default 50000)
 *   scopes      comma-separated scopes (default: cpu,smt,cache_shard,cache,numa,system)
 * Output: the module's lines, one per scope:
 *   test_workqueue: running %d threads, %d items/thread
 *   test_workqueue:   %-16s %llu items/sec\tp50=%llu\tp90=%llu\tp95=%llu ns
 */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/workqueue.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/atomic.h>
#include <linux/slab.h>
#include <linux/ktime.h>
#include <linux/cpumask.h>
#include <linux/sched.h>
#include <linux/sort.h>
#include <linux/fs.h>

#define BENCH_WQ "c_bench_wq"

static int nr_threads;
module_param(nr_threads, int, 0444);
static int wq_items = 50000;
module_param(wq_items, int, 0444);
static char *scopes = "cpu,smt,cache_shard,cache,numa,system";
module_param(scopes, charp, 0444);

struct producer {
	struct work_struct work;	/* re-initialised for every item */
	struct completion item_done;
	struct completion *go;
	struct workqueue_struct *wq;
	atomic_t *left;
	struct completion *all_done;
	u64 *ns;			/* queue_work() time per item */
	int items;
};

static void item_fn(struct work_struct *work)
{
	complete(&container_of(work, struct producer, work)->item_done);
}

static int producer_fn(void *arg)
{
	struct producer *p = arg;
	int i;

	wait_for_completion(p->go);
	for (i = 0; i < p->items && !kthread_should_stop(); i++) {
		ktime_t t0, t1;

		reinit_completion(&p->item_done);
		INIT_WORK(&p->work, item_fn);
		t0 = ktime_get();
		queue_work(p->wq, &p->work);
		t1 = ktime_get();
		p->ns[i] = (u64)ktime_to_ns(ktime_sub(t1, t0));
		wait_for_completion(&p->item_done);
	}
	if (atomic_dec_and_test(p->left))
		complete(p->all_done);
	while (!kthread_should_stop())
		schedule();
	return 0;
}

static int by_value(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static int set_scope(const char *scope)
{
	struct file *f = filp_open("/sys/bus/workqueue/devices/" BENCH_WQ "/affinity_scope",
				   O_WRONLY, 0);
	loff_t pos = 0;
	ssize_t n;

	if (IS_ERR(f))
		return (int)PTR_ERR(f);
	n = kernel_write(f, scope, strlen(scope), &pos);
	filp_close(f, NULL);
	return n < 0 ? (int)n : 0;
}

static int run_scope(struct workqueue_struct *wq, int n, const char *scope)
{
	struct producer *ps = kcalloc(n, sizeof(*ps), GFP_KERNEL);
	struct task_struct **ts = kcalloc(n, sizeof(*ts), GFP_KERNEL);
	u64 total = (u64)n * wq_items, *all = kvmalloc_array(total, sizeof(u64), GFP_KERNEL);
	struct completion go, all_done;
	atomic_t left;
	ktime_t start;
	s64 us;
	int cpu, i = 0, ret = -ENOMEM;

	if (!ps || !ts || !all)
		goto out;
	ret = set_scope(scope);
	if (ret) {
		pr_err("c_bench: affinity_scope=%s refused: %d\n", scope, ret);
		goto out;
	}
	init_completion(&go);
	init_completion(&all_done);
	atomic_set(&left, n);
	for_each_online_cpu(cpu) {
		struct producer *p = &ps[i];

		if (i == n)
			break;
		p->ns = all + (size_t)i * wq_items;
		p->items = wq_items;
		p->wq = wq;
		p->go = &go;
		p->left = &left;
		p->all_done = &all_done;
		init_completion(&p->item_done);
		ts[i] = kthread_create(producer_fn, p, "c_bench/%d", cpu);
		if (IS_ERR(ts[i])) {
			ret = (int)PTR_ERR(ts[i]);
			complete_all(&go);
			while (i--)
				kthread_stop(ts[i]);
			goto out;
		}
		kthread_bind(ts[i], cpu);
		wake_up_process(ts[i]);
		i++;
	}
	start = ktime_get();
	complete_all(&go);
	wait_for_completion(&all_done);
	flush_workqueue(wq);
	for (i = 0; i < n; i++)
		kthread_stop(ts[i]);
	us = ktime_us_delta(ktime_get(), start);
	sort(all, total, sizeof(u64), by_value, NULL);
	pr_info("test_workqueue:   %-16s %llu items/sec\tp50=%llu\tp90=%llu\tp95=%llu ns\n", scope,
		us > 0 ? total * 1000000ULL / (u64)us : 0ULL, all[total / 2],
		all[total * 9 / 10], all[total * 95 / 100]);
	ret = 0;
out:
	kvfree(all);
	kfree(ts);
	kfree(ps);
	return ret;
}

static int __init c_bench_init(void)
{
	int online = num_online_cpus();
	int n = nr_threads > 0 ? min(nr_threads, online) : online;
	struct workqueue_struct *wq;
	char *list, *scope, *rest;
	int ret = 0;

	if (wq_items <= 0) {
		pr_err("c_bench: wq_items must be > 0\n");
		return -EINVAL;
	}
	wq = alloc_workqueue(BENCH_WQ, WQ_UNBOUND | WQ_SYSFS, 0);
	if (!wq)
		return -ENOMEM;
	pr_info("test_workqueue: running %d threads, %d items/thread\n", n, wq_items);
	list = kstrdup(scopes, GFP_KERNEL);
	for (rest = list; !ret && (scope = strsep(&rest, ",")) != NULL;)
		if (*scope)
			ret = run_scope(wq, n, scope);
	kfree(list);
	destroy_workqueue(wq);
	return ret ? ret : -EAGAIN;
}

module_init(c_bench_init);
MODULE_LICENSE("MIT OR Apache-2.0");
