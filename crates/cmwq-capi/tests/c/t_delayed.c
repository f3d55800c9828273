// SPDX-License-Identifier: MIT OR Apache-2.0
/* Delayed work: queue/mod/flush/cancel, delayed_work_pending, _on a CPU. */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include "check.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

struct ditem {
	int tag;
	struct delayed_work dw;
	atomic_t runs;
	int cpu;
};

static void ditem_fn(struct work_struct *w)
{
	struct ditem *d = container_of(to_delayed_work(w), struct ditem, dw);

	CHECK_EQ(d->tag, 77);
	d->cpu = smp_processor_id();
	atomic_inc(&d->runs);
}

/* A thread that keeps arming a delayed work an hour out. */
struct racer {
	struct workqueue_struct *wq;
	struct delayed_work *dw;
	atomic_int started, stop;
};

static void *rearm_far(void *p)
{
	struct racer *r = p;

	while (!atomic_load(&r->stop)) {
		queue_delayed_work(r->wq, r->dw, 3600 * HZ);
		atomic_store(&r->started, 1);
	}
	return NULL;
}

static atomic_t static_runs;
static void static_fn(struct work_struct *w)
{
	(void)w;
	atomic_inc(&static_runs);
}
static DECLARE_DELAYED_WORK(static_dw, static_fn);

int main(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_delayed", WQ_UNBOUND, 0);
	struct workqueue_struct *bound = alloc_workqueue("capi_delayed_bound", 0, 0);
	struct ditem d = { .tag = 77 };
	int cpu;

	CHECK(wq && bound);
	INIT_DELAYED_WORK(&d.dw, ditem_fn);
	CHECK(!delayed_work_pending(&d.dw));
	CHECK(queue_delayed_work(wq, &d.dw, 3600 * HZ));
	CHECK(delayed_work_pending(&d.dw));
	CHECK(!queue_delayed_work(wq, &d.dw, 1));
	CHECK(cancel_delayed_work(&d.dw));
	CHECK(!delayed_work_pending(&d.dw));
	CHECK(!cancel_delayed_work(&d.dw));
	CHECK(queue_delayed_work(wq, &d.dw, 3600 * HZ));
	CHECK(cancel_delayed_work_sync(&d.dw));
	CHECK_EQ(atomic_read(&d.runs), 0);
	PASS("queue_delayed_work, delayed_work_pending, cancel_delayed_work(_sync)");

	CHECK(queue_delayed_work(wq, &d.dw, 3600 * HZ));
	flush_delayed_work(&d.dw);	/* fires the timer now, waits */
	CHECK_EQ(atomic_read(&d.runs), 1);
	CHECK(queue_delayed_work(wq, &d.dw, 5));
	flush_delayed_work(&d.dw);
	CHECK_EQ(atomic_read(&d.runs), 2);
	PASS("flush_delayed_work fires an armed timer and waits");

	CHECK(!mod_delayed_work(wq, &d.dw, 3600 * HZ));	/* idle: queued */
	CHECK(delayed_work_pending(&d.dw));
	CHECK(mod_delayed_work(wq, &d.dw, 3600 * HZ));	/* pending: re-armed */
	CHECK(mod_delayed_work(wq, &d.dw, 0));		/* now */
	flush_delayed_work(&d.dw);
	CHECK_EQ(atomic_read(&d.runs), 3);
	PASS("mod_delayed_work returns whether it was pending");

	/*
	 * mod_delayed_work(0) against a thread re-arming the item an hour out:
	 * the modification wins (the kernel grabs whatever cycle is pending
	 * until its own is queued), so the item runs without a flush. Were the
	 * racer's cycle left in place, the wait below would end at its bound
	 * with the item still armed for an hour.
	 */
	for (int i = 0; i < 200; i++) {
		struct racer r = { .wq = wq, .dw = &d.dw };
		pthread_t t;
		int before = atomic_read(&d.runs);

		CHECK_EQ(pthread_create(&t, NULL, rearm_far, &r), 0);
		while (!atomic_load(&r.started))
			;
		mod_delayed_work(wq, &d.dw, 0);
		atomic_store(&r.stop, 1);
		CHECK_EQ(pthread_join(t, NULL), 0);
		for (int ms = 0; atomic_read(&d.runs) == before && ms < 60000; ms++)
			usleep(1000);
		CHECK(atomic_read(&d.runs) > before);
		cancel_delayed_work_sync(&d.dw);
	}
	atomic_set(&d.runs, 3);
	PASS("mod_delayed_work wins against a racing queue_delayed_work");

	CHECK(disable_delayed_work(&d.dw) == false);
	CHECK(!queue_delayed_work(wq, &d.dw, 1));
	CHECK(!mod_delayed_work(wq, &d.dw, 1));
	CHECK(enable_delayed_work(&d.dw));
	CHECK(queue_delayed_work(wq, &d.dw, 3600 * HZ));
	CHECK(disable_delayed_work_sync(&d.dw));
	CHECK(enable_delayed_work(&d.dw));
	CHECK_EQ(atomic_read(&d.runs), 3);
	PASS("disable_delayed_work(_sync) / enable_delayed_work");

	for_each_online_cpu(cpu) {
		d.cpu = -1;
		CHECK(queue_delayed_work_on(cpu, bound, &d.dw, 2));
		flush_delayed_work(&d.dw);
		CHECK_EQ(d.cpu, cpu);
	}
	PASS("queue_delayed_work_on runs on the CPU asked for (bound queue)");

	CHECK(schedule_delayed_work(&static_dw, 1));
	flush_delayed_work(&static_dw);
	CHECK_EQ(atomic_read(&static_runs), 1);
	PASS("DECLARE_DELAYED_WORK, schedule_delayed_work");

	destroy_workqueue(bound);
	destroy_workqueue(wq);
	return 0;
}
