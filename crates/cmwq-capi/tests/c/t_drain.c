// SPDX-License-Identifier: MIT OR Apache-2.0
/* flush_workqueue, drain_workqueue (chained queueing), destroy_workqueue, and
 * waiting for an item from its own callback (refused, not a deadlock). */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/slab.h>
#include "check.h"

static struct workqueue_struct *wq;
static atomic_t count;

static void slow_fn(struct work_struct *w)
{
	(void)w;
	msleep(1);
	atomic_inc(&count);
}

static void chain_fn(struct work_struct *w)
{
	if (atomic_inc_return(&count) < 50)
		CHECK(queue_work(wq, w));	/* chained: allowed while draining */
}

static bool self_flush_result = true, self_cancel_result = true;
static void self_wait_fn(struct work_struct *w)
{
	self_flush_result = flush_work(w);
	self_cancel_result = cancel_work_sync(w);
	flush_workqueue(wq);
	atomic_inc(&count);
}

int main(void)
{
	struct work_struct *ws = kcalloc(100, sizeof(*ws), GFP_KERNEL);
	struct work_struct chain, self;
	int i;

	CHECK(ws);
	wq = alloc_workqueue("capi_drain", WQ_UNBOUND, 0);
	CHECK(wq);
	for (i = 0; i < 100; i++) {
		INIT_WORK(&ws[i], slow_fn);
		CHECK(queue_work(wq, &ws[i]));
	}
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&count), 100);
	PASS("flush_workqueue waits for everything queued before it");

	atomic_set(&count, 0);
	INIT_WORK(&chain, chain_fn);
	CHECK(queue_work(wq, &chain));
	drain_workqueue(wq);
	CHECK_EQ(atomic_read(&count), 50);
	PASS("drain_workqueue waits for chained work");

	atomic_set(&count, 0);
	INIT_WORK(&self, self_wait_fn);
	CHECK(queue_work(wq, &self));
	flush_work(&self);
	CHECK_EQ(atomic_read(&count), 1);
	CHECK(!self_flush_result && !self_cancel_result);
	PASS("waiting for an item from its own callback returns (with a message)");

	atomic_set(&count, 0);
	for (i = 0; i < 20; i++) {
		INIT_WORK(&ws[i], slow_fn);
		CHECK(queue_work(wq, &ws[i]));
	}
	destroy_workqueue(wq);
	CHECK_EQ(atomic_read(&count), 20);
	PASS("destroy_workqueue runs everything queued");
	kfree(ws);
	return 0;
}
