// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * struct rcu_work on liburcu (linux/rcupdate.h, -lurcu-bp): the item runs
 * only after a grace period that started after queue_rcu_work(), so a
 * reader inside rcu_read_lock() at that moment holds it off until it
 * unlocks; flush_rcu_work; a cancel in the grace period; the kernel's
 * synchronize_rcu and call_rcu names.
 */
#include <pthread.h>
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/rcupdate.h>
#include <linux/atomic.h>
#include <linux/delay.h>
#include "check.h"

static atomic_t reader_in, queued, reader_out, ran;

static void *reader(void *arg)
{
	int hold_ms = *(int *)arg;

	rcu_read_lock();
	atomic_set_release(&reader_in, 1);
	while (!atomic_read_acquire(&queued))
		msleep(1);
	msleep(hold_ms);
	/* Still inside the read-side section: the item must not have run. */
	CHECK_EQ(atomic_read(&ran), 0);
	atomic_set_release(&reader_out, 1);
	rcu_read_unlock();
	return NULL;
}

static void rcu_fn(struct work_struct *w)
{
	struct rcu_work *rw = to_rcu_work(w);

	(void)rw;
	/* Runs after the reader's section ended. */
	CHECK_EQ(atomic_read_acquire(&reader_out), 1);
	atomic_inc(&ran);
}

static pthread_t start_reader(int *hold_ms)
{
	pthread_t t;

	atomic_set(&reader_in, 0);
	atomic_set(&queued, 0);
	atomic_set(&reader_out, 0);
	atomic_set(&ran, 0);
	CHECK_EQ(pthread_create(&t, NULL, reader, hold_ms), 0);
	while (!atomic_read_acquire(&reader_in))
		msleep(1);
	return t;
}

static bool wait_ran(int n)
{
	for (int i = 0; i < 30000 && atomic_read(&ran) < n; i++)
		msleep(1);
	return atomic_read(&ran) == n;
}

static void test_grace_period(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_rcu", WQ_UNBOUND, 0);
	struct rcu_work rw;
	int hold = 300;
	pthread_t t;

	CHECK(wq);
	INIT_RCU_WORK(&rw, rcu_fn);
	t = start_reader(&hold);
	CHECK(queue_rcu_work(wq, &rw));
	atomic_set_release(&queued, 1);
	/* Pending through the grace period, as in the kernel. */
	CHECK(work_pending(&rw.work));
	CHECK(work_busy(&rw.work) & WORK_BUSY_PENDING);
	CHECK(!queue_rcu_work(wq, &rw));
	CHECK(wait_ran(1));
	pthread_join(t, NULL);
	/* Without a reader it still runs (after a grace period). */
	atomic_set(&reader_out, 1);
	CHECK(queue_rcu_work(wq, &rw));
	CHECK(flush_rcu_work(&rw));
	CHECK_EQ(atomic_read(&ran), 2);
	destroy_workqueue(wq);
	PASS("queue_rcu_work: after a grace period begun after the call");
}

static void test_flush_waits(void)
{
	struct rcu_work rw;
	int hold = 200;
	pthread_t t;

	INIT_RCU_WORK(&rw, rcu_fn);
	t = start_reader(&hold);
	CHECK(queue_rcu_work(system_wq, &rw));
	atomic_set_release(&queued, 1);
	CHECK(flush_rcu_work(&rw));	/* the grace period, then the run */
	CHECK_EQ(atomic_read(&ran), 1);
	CHECK_EQ(atomic_read(&reader_out), 1);
	pthread_join(t, NULL);
	/* flush_work() of it waits the same way (never fires it early). */
	atomic_set(&ran, 0);
	atomic_set(&reader_out, 0);
	t = start_reader(&hold);
	CHECK(queue_rcu_work(system_wq, &rw));
	atomic_set_release(&queued, 1);
	CHECK(flush_work(&rw.work));
	CHECK_EQ(atomic_read(&ran), 1);
	pthread_join(t, NULL);
	PASS("flush_rcu_work and flush_work wait for the grace period");
}

/* A reader that holds rcu_read_lock() until told to leave. */
struct held {
	pthread_t t;
	atomic_t in, leave, out;
};

static void *held_reader(void *arg)
{
	struct held *h = arg;

	rcu_read_lock();
	atomic_set_release(&h->in, 1);
	while (!atomic_read_acquire(&h->leave))
		msleep(1);
	atomic_set_release(&h->out, 1);
	rcu_read_unlock();
	return NULL;
}

static void held_start(struct held *h)
{
	memset(h, 0, sizeof(*h));
	CHECK_EQ(pthread_create(&h->t, NULL, held_reader, h), 0);
	while (!atomic_read_acquire(&h->in))
		msleep(1);
}

static void held_end(struct held *h)
{
	atomic_set_release(&h->leave, 1);
	pthread_join(h->t, NULL);
}

static struct held second;

static void second_fn(struct work_struct *w)
{
	(void)w;
	/* Queued while the second reader held the lock: after it left. */
	CHECK_EQ(atomic_read_acquire(&second.out), 1);
	atomic_inc(&ran);
}

static void test_cancel_in_grace_period(void)
{
	struct rcu_work rw;
	struct held first;

	atomic_set(&ran, 0);
	INIT_RCU_WORK(&rw, second_fn);
	held_start(&first);
	CHECK(queue_rcu_work(system_wq, &rw));
	/* Let the first grace period begin (liburcu's call_rcu thread then
	 * waits for the first reader only), so the second reader below is
	 * one it does not wait for. */
	msleep(100);
	CHECK(cancel_work_sync(&rw.work));
	CHECK(!work_pending(&rw.work));
	/* Queued again while the first grace period is still open, with a
	 * second reader in: it needs a grace period of its own, which the end
	 * of the first one (once the first reader leaves) is not. */
	held_start(&second);
	CHECK(queue_rcu_work(system_wq, &rw));
	held_end(&first);
	msleep(200);
	CHECK_EQ(atomic_read(&ran), 0);		/* the second reader is still in */
	held_end(&second);
	CHECK(wait_ran(1));
	rcu_barrier();
	flush_workqueue(system_wq);
	CHECK_EQ(atomic_read(&ran), 1);		/* the cancelled cycle never ran */
	CHECK(!work_pending(&rw.work));
	PASS("cancel_work_sync in the grace period, queued again");
}

/* An atomic: TSan cannot see liburcu's barrier order the callback first. */
struct cb {
	struct rcu_head head;
	atomic_t done;
};

static void cb_fn(struct rcu_head *h)
{
	atomic_set_release(&container_of(h, struct cb, head)->done, 1);
}

int main(void)
{
	struct cb c = { .done = ATOMIC_INIT(0) };

	test_grace_period();
	test_flush_waits();
	test_cancel_in_grace_period();
	synchronize_rcu();
	call_rcu(&c.head, cb_fn);
	rcu_barrier();
	CHECK_EQ(atomic_read_acquire(&c.done), 1);
	PASS("synchronize_rcu, call_rcu, rcu_barrier");
	return 0;
}
