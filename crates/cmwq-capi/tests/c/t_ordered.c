// SPDX-License-Identifier: MIT OR Apache-2.0
/* Ordered queues run one item at a time in queueing order; max_active caps
 * how many items of a queue run at once, and workqueue_set_max_active
 * changes it live. */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/slab.h>
#include "check.h"

#define N 200
struct seq_item {
	struct work_struct work;
	int n;
};
static int next_seq;
static atomic_t running, peak, done;

static void track_peak(void)
{
	int r = atomic_inc_return(&running), p;

	while ((p = atomic_read(&peak)) < r && atomic_cmpxchg(&peak, p, r) != p)
		;
}

static void seq_fn(struct work_struct *w)
{
	struct seq_item *s = container_of(w, struct seq_item, work);

	track_peak();
	CHECK_EQ(s->n, next_seq);	/* in order (and so one at a time) */
	next_seq++;
	atomic_dec(&running);
}

static void slow_fn(struct work_struct *w)
{
	(void)w;
	track_peak();
	msleep(2);
	atomic_dec(&running);
	atomic_inc(&done);
}

static int run_slow(struct workqueue_struct *wq, int n)
{
	struct work_struct *ws = kcalloc(n, sizeof(*ws), GFP_KERNEL);
	int i;

	CHECK(ws);
	atomic_set(&peak, 0);
	atomic_set(&done, 0);
	for (i = 0; i < n; i++) {
		INIT_WORK(&ws[i], slow_fn);
		CHECK(queue_work(wq, &ws[i]));
	}
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&done), n);
	kfree(ws);
	return atomic_read(&peak);
}

int main(void)
{
	struct workqueue_struct *wq = alloc_ordered_workqueue("capi_ordered_%s", 0, "x");
	struct seq_item *items = kcalloc(N, sizeof(*items), GFP_KERNEL);
	int i, p;

	CHECK(wq && items);
	for (i = 0; i < N; i++) {
		items[i].n = i;
		INIT_WORK(&items[i].work, seq_fn);
		CHECK(queue_work(wq, &items[i].work));
	}
	flush_workqueue(wq);
	CHECK_EQ(next_seq, N);
	CHECK_EQ(atomic_read(&peak), 1);
	CHECK_EQ(cmwq_workqueue_max_active(wq), 1);
	kfree(items);
	destroy_workqueue(wq);
	PASS("ordered: in order, one at a time");

	wq = alloc_workqueue("capi_max_active", WQ_UNBOUND, 2);
	CHECK(wq);
	CHECK_EQ(cmwq_workqueue_max_active(wq), 2);
	p = run_slow(wq, 40);
	CHECK(p >= 1 && p <= 2);
	workqueue_set_max_active(wq, 1);
	CHECK_EQ(cmwq_workqueue_max_active(wq), 1);
	CHECK_EQ(run_slow(wq, 20), 1);
	workqueue_set_max_active(wq, 100000);	/* clamped, as the kernel does */
	CHECK_EQ(cmwq_workqueue_max_active(wq), WQ_MAX_ACTIVE);
	destroy_workqueue(wq);
	PASS("max_active caps running items; workqueue_set_max_active changes it");
	return 0;
}
