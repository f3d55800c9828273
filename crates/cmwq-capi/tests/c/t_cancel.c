// SPDX-License-Identifier: MIT OR Apache-2.0
/* cancel_work, cancel_work_sync, disable_work(_sync), enable_work. */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/atomic.h>
#include <linux/delay.h>
#include "check.h"

struct item {
	struct work_struct work;
	struct completion go;
	bool wait_go;
	atomic_t started, finished;
};

static void item_fn(struct work_struct *w)
{
	struct item *it = container_of(w, struct item, work);

	atomic_inc(&it->started);
	if (it->wait_go)
		wait_for_completion(&it->go);
	atomic_inc(&it->finished);
}

static void init_item(struct item *it, bool wait_go)
{
	memset(it, 0, sizeof(*it));
	init_completion(&it->go);
	it->wait_go = wait_go;
	INIT_WORK(&it->work, item_fn);
}

/* Blocks `wq` (ordered) until complete(&b->go). */
static void block(struct workqueue_struct *wq, struct item *b)
{
	init_item(b, true);
	CHECK(queue_work(wq, &b->work));
	while (!atomic_read(&b->started))
		msleep(1);
}

static int release_later(void *arg)
{
	struct item *it = arg;

	msleep(30);
	complete_all(&it->go);
	return 0;
}

int main(void)
{
	struct workqueue_struct *wq = alloc_ordered_workqueue("capi_cancel", 0);
	struct item b, it;
	struct task_struct *t;

	CHECK(wq);
	/* cancel_work of a pending item: it never runs. */
	block(wq, &b);
	init_item(&it, false);
	CHECK(!cancel_work(&it.work));		/* idle */
	CHECK(queue_work(wq, &it.work));
	CHECK(cancel_work(&it.work));
	CHECK(!work_pending(&it.work));
	CHECK(!cancel_work(&it.work));
	/* cancel_work_sync of a pending item. */
	CHECK(queue_work(wq, &it.work));
	CHECK(cancel_work_sync(&it.work));
	complete(&b.go);
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&it.started), 0);
	PASS("cancel_work / cancel_work_sync of a pending item");

	/* cancel_work_sync waits for a running callback. */
	init_item(&it, true);
	CHECK(queue_work(wq, &it.work));
	while (!atomic_read(&it.started))
		msleep(1);
	t = kthread_run(release_later, &it, "release");
	CHECK(!cancel_work_sync(&it.work));	/* it was running, not pending */
	CHECK_EQ(atomic_read(&it.finished), 1);
	CHECK(!work_pending(&it.work));
	kthread_stop(t);
	PASS("cancel_work_sync waits for the running callback");

	/* disable_work nests; queueing fails while disabled. */
	init_item(&it, false);
	CHECK(!disable_work(&it.work));
	CHECK(!queue_work(wq, &it.work));
	CHECK(!disable_work(&it.work));
	CHECK(!enable_work(&it.work));		/* still disabled once */
	CHECK(!queue_work(wq, &it.work));
	CHECK(enable_work(&it.work));
	CHECK(queue_work(wq, &it.work));
	flush_work(&it.work);
	CHECK_EQ(atomic_read(&it.finished), 1);
	/* disable_work of a pending item cancels it. */
	block(wq, &b);
	CHECK(queue_work(wq, &it.work));
	CHECK(disable_work(&it.work));
	complete(&b.go);
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&it.finished), 1);
	CHECK(enable_work(&it.work));
	PASS("disable_work / enable_work nest, cancel, and refuse queueing");

	/* disable_work_sync waits for the running callback. */
	init_item(&it, true);
	CHECK(queue_work(wq, &it.work));
	while (!atomic_read(&it.started))
		msleep(1);
	t = kthread_run(release_later, &it, "release");
	CHECK(!disable_work_sync(&it.work));
	CHECK_EQ(atomic_read(&it.finished), 1);
	CHECK(!queue_work(wq, &it.work));
	CHECK(enable_work(&it.work));
	it.wait_go = false;
	CHECK(queue_work(wq, &it.work));
	flush_work(&it.work);
	CHECK_EQ(atomic_read(&it.finished), 2);
	kthread_stop(t);
	PASS("disable_work_sync waits, then refuses until enable_work");

	/* INIT_WORK resets the disable depth, also while the last run is still
	 * on its worker: queueing right after works. */
	init_item(&it, true);
	CHECK(queue_work(wq, &it.work));
	while (!atomic_read(&it.started))
		msleep(1);
	CHECK(!disable_work(&it.work));
	CHECK(!queue_work(wq, &it.work));
	INIT_WORK(&it.work, item_fn);
	CHECK(queue_work(wq, &it.work));
	complete_all(&it.go);
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&it.finished), 2);
	PASS("INIT_WORK clears disable_work, even while the item still runs");

	destroy_workqueue(wq);
	return 0;
}
