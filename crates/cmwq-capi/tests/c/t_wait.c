// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * kcompat linux/wait.h and current->flags: wait_event* woken by wake_up*,
 * their timeouts, and PF_WQ_WORKER on workqueue workers (not on other
 * threads). A worker that sleeps in wait_event with PF_WQ_WORKER set counts
 * as blocked, so an item queued behind it on the same CPU runs and wakes it.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/workqueue.h>
#include <linux/wait.h>
#include <linux/atomic.h>
#include <linux/kthread.h>
#include "check.h"

static DECLARE_WAIT_QUEUE_HEAD(wq_head);
static atomic_t cond = ATOMIC_INIT(0);
static atomic_t woken = ATOMIC_INIT(0);

static int sleeper(void *arg)
{
	wait_event(wq_head, atomic_read(&cond) >= 1);
	atomic_inc(&woken);
	wait_event_interruptible(wq_head, atomic_read(&cond) >= 2);
	atomic_inc(&woken);
	return 0;
}

static void threads(void)
{
	struct task_struct *t[3];
	int i;

	for (i = 0; i < 3; i++)
		t[i] = kthread_run(sleeper, NULL, "sleeper/%d", i);
	/* Nobody is woken before the condition holds. */
	wake_up(&wq_head);
	msleep(20);
	CHECK_EQ(atomic_read(&woken), 0);
	atomic_set(&cond, 1);
	wake_up_all(&wq_head);
	while (atomic_read(&woken) < 3)
		msleep(1);
	atomic_set(&cond, 2);
	wake_up_interruptible(&wq_head);
	for (i = 0; i < 3; i++)
		CHECK_EQ(kthread_stop(t[i]), 0);
	CHECK_EQ(atomic_read(&woken), 6);
	PASS("wait_event, wait_event_interruptible woken by wake_up*");
}

static void timeouts(void)
{
	struct wait_queue_head h;
	atomic_t c = ATOMIC_INIT(0);

	init_waitqueue_head(&h);
	CHECK_EQ(wait_event_timeout(h, atomic_read(&c) != 0, 30), 0);
	atomic_set(&c, 1);
	CHECK(wait_event_timeout(h, atomic_read(&c) != 0, 5000) >= 1);
	CHECK(wait_event_interruptible_timeout(h, atomic_read(&c) != 0, 0) == 1);
	CHECK_EQ(wait_event_idle_timeout(h, atomic_read(&c) == 2, 1), 0);
	PASS("wait_event_timeout: 0 on timeout, the jiffies left (>= 1) once true");
}

static struct work_struct waiter, waker;
static atomic_t step = ATOMIC_INIT(0);
static unsigned int waiter_flags, main_flags;
static char waiter_comm[16];

static void waker_fn(struct work_struct *w)
{
	atomic_set(&step, 1);
	wake_up(&wq_head);
}

static void waiter_fn(struct work_struct *w)
{
	waiter_flags = current->flags;
	memcpy(waiter_comm, current->comm, sizeof(waiter_comm));
	/* Same CPU: the waker can only run if this worker counts as blocked. */
	CHECK(schedule_work_on(raw_smp_processor_id(), &waker));
	wait_event(wq_head, atomic_read(&step) == 1);
}

static void workers(void)
{
	INIT_WORK(&waiter, waiter_fn);
	INIT_WORK(&waker, waker_fn);
	CHECK(schedule_work(&waiter));
	flush_work(&waiter);
	flush_work(&waker);
	CHECK(waiter_flags & PF_WQ_WORKER);
	CHECK(strncmp(waiter_comm, "cmwq/", 5) == 0);
	main_flags = current->flags;
	CHECK(!(main_flags & PF_WQ_WORKER));
	PASS("current->flags has PF_WQ_WORKER on workers only; a worker asleep in wait_event lets its pool run");
}

static int __init t_wait_init(void)
{
	threads();
	timeouts();
	workers();
	return -EAGAIN;
}

module_init(t_wait_init);
