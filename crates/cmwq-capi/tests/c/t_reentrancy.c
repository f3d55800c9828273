// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Non-reentrancy and the pending bit under contention: producers on every
 * CPU queue one item (to their own CPU and to others) as fast as they can;
 * the item never runs on two workers at once, and it runs exactly once per
 * successful queue. A callback that re-queues itself runs again after.
 */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/kthread.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include "check.h"

static struct work_struct shared;
static atomic_t running, runs, overlaps, queued, stop_at;
static struct workqueue_struct *wq;
static bool per_cpu;

static void shared_fn(struct work_struct *w)
{
	CHECK(w == &shared);
	if (atomic_inc_return(&running) != 1)
		atomic_inc(&overlaps);
	udelay(5);
	atomic_dec(&running);
	atomic_inc(&runs);
}

static int producer(void *arg)
{
	long id = (long)arg;
	int i, n = 0, ncpu = num_online_cpus();

	for (i = 0; i < 5000; i++) {
		bool ok = per_cpu ? queue_work_on((int)(id + i) % ncpu, wq, &shared)
				  : queue_work(wq, &shared);
		n += ok;
		udelay(i % 7 + 1);
	}
	atomic_add(n, &queued);
	while (!kthread_should_stop())
		msleep(1);
	return n;
}

static void contend(const char *what)
{
	struct task_struct *t[64];
	int n = min(num_online_cpus() * 2, 64), i;

	atomic_set(&running, 0);
	atomic_set(&runs, 0);
	atomic_set(&overlaps, 0);
	atomic_set(&queued, 0);
	INIT_WORK(&shared, shared_fn);
	for (i = 0; i < n; i++) {
		t[i] = kthread_run(producer, (void *)(long)i, "prod/%d", i);
		CHECK(!IS_ERR(t[i]));
	}
	while (atomic_read(&queued) == 0)
		msleep(1);
	for (i = 0; i < n; i++)
		CHECK(kthread_stop(t[i]) >= 0);
	flush_work(&shared);
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&overlaps), 0);
	CHECK_EQ(atomic_read(&runs), atomic_read(&queued));
	CHECK(atomic_read(&runs) > 0);
	printf("ok non-reentrancy (%s): %d runs, one at a time\n", what, atomic_read(&runs));
}

static struct work_struct self;
static void self_fn(struct work_struct *w)
{
	if (atomic_inc_return(&runs) < atomic_read(&stop_at))
		CHECK(queue_work(wq, w));	/* PENDING is clear while we run */
}

int main(void)
{
	wq = alloc_workqueue("capi_reent", WQ_UNBOUND, 0);
	CHECK(wq);
	contend("unbound, queue_work");
	per_cpu = true;
	contend("unbound, queue_work_on every CPU");
	destroy_workqueue(wq);

	wq = alloc_workqueue("capi_reent_bound", WQ_PERCPU, 0);
	CHECK(wq);
	contend("bound, queue_work_on every CPU");
	per_cpu = false;
	contend("bound, queue_work");

	atomic_set(&runs, 0);
	atomic_set(&stop_at, 100);
	INIT_WORK(&self, self_fn);
	CHECK(queue_work(wq, &self));
	while (atomic_read(&runs) < 100)
		flush_work(&self);
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&runs), 100);
	PASS("a callback re-queues its own item");
	destroy_workqueue(wq);
	return 0;
}
