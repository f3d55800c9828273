/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * A module in the shape of the kernel's stall-detector sample
 * (samples/workqueue/stall_detector), written for cmwq's C suite: the same
 * kernel APIs and the same behaviour, run by tests/c/run.sh with
 * CMWQ_WATCHDOG_THRESH=3.
 *
 * On load, `holder` is queued on the per-CPU system queue. It queues
 * `behind` on its own CPU (same pool; the worker still counts as running,
 * so no other worker is woken), clears PF_WQ_WORKER (hidden from
 * concurrency management) and sleeps on a wait queue. `behind` would run
 * only if another worker were started: it waits, and the lockup watchdog
 * reports the pool. On unload (SIGTERM), module_exit wakes `holder`; it
 * returns, `behind` runs, both are flushed, and the last line says so.
 */
#include <linux/module.h>
#include <linux/workqueue.h>
#include <linux/wait.h>
#include <linux/atomic.h>
#include <linux/sched.h>

static DECLARE_WAIT_QUEUE_HEAD(unload_wait);
static atomic_t unloading = ATOMIC_INIT(0);
static atomic_t ran = ATOMIC_INIT(0);
static struct work_struct holder;
static struct work_struct behind;

static void behind_fn(struct work_struct *work)
{
	atomic_inc(&ran);
	pr_info("stall_sample: behind_fn ran\n");
}

static void holder_fn(struct work_struct *work)
{
	int cpu = raw_smp_processor_id();

	pr_info("stall_sample: holder_fn runs on cpu %d (PF_WQ_WORKER %s)\n", cpu,
		current->flags & PF_WQ_WORKER ? "set" : "clear");
	/* The system queue is per-CPU: this lands on our own pool. */
	schedule_work(&behind);
	current->flags &= ~PF_WQ_WORKER;
	pr_info("stall_sample: holder_fn sleeps hidden; expect a lockup report\n");
	wait_event_idle(unload_wait, atomic_read(&unloading) != 0);
	current->flags |= PF_WQ_WORKER;
	atomic_inc(&ran);
	pr_info("stall_sample: holder_fn woken\n");
}

static int __init stall_sample_init(void)
{
	pr_info("stall_sample: loading\n");
	INIT_WORK(&holder, holder_fn);
	INIT_WORK(&behind, behind_fn);
	schedule_work(&holder);
	return 0;
}

static void __exit stall_sample_exit(void)
{
	pr_info("stall_sample: unloading\n");
	atomic_set(&unloading, 1);
	wake_up(&unload_wait);
	flush_work(&holder);
	flush_work(&behind);
	pr_info("stall_sample: unloaded, %d items ran\n", atomic_read(&ran));
}

module_init(stall_sample_init);
module_exit(stall_sample_exit);
MODULE_LICENSE("MIT OR Apache-2.0");
MODULE_DESCRIPTION("A workqueue stall: a worker hidden from concurrency management");
