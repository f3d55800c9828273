/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: tasks are pthreads (see kthread.h); schedule() yields.
 *
 * `current` is the calling thread's task: the program's main thread, a
 * kthread, or a workqueue worker running a callback (made on first use,
 * with PF_WQ_WORKER in its flags), NULL on other threads. A callback that
 * clears PF_WQ_WORKER hides its worker from concurrency management, as in
 * the kernel: when it next sleeps in a kcompat call (wait_event, msleep,
 * wait_for_completion, ...), the worker keeps counting as running, and items
 * queued behind it on its pool wait. Sleeping outside kcompat (a raw
 * syscall) is not seen. The flag is set again when the callback returns.
 */
#ifndef CMWQ_KC_SCHED_H
#define CMWQ_KC_SCHED_H
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <linux/delay.h>
#include <linux/smp.h>

struct task_struct {
	unsigned int flags;	/* PF_*; first: the library reads it there */
	pthread_t thread;
	int (*threadfn)(void *data);
	void *data;
	char comm[16];
	int cpu;		/* kthread_bind()'s CPU, -1: none */
	int started;
	int should_stop;	/* atomic */
	int result;
};

#define PF_WQ_WORKER 0x00000020	/* a workqueue worker */
#define PF_KTHREAD 0x00200000		/* a kthread */

void *cmwq_kc_current(void);
void cmwq_kc_set_current(void *task);
int cmwq_kc_thread_setup(const char *name, int cpu);
void *cmwq_kc_worker_task(size_t size);
void cmwq_kc_worker_sync(void);

static inline struct task_struct *cmwq_kc_get_current(void)
{
	struct task_struct *t = (struct task_struct *)cmwq_kc_current();

	if (!t) {
		t = (struct task_struct *)cmwq_kc_worker_task(sizeof(*t));
		if (t && !t->started) {
			t->thread = pthread_self();
			t->cpu = -1;
			t->started = 1;
			prctl(PR_GET_NAME, t->comm);
		}
	}
	return t;
}

/* The calling thread's task (see above). */
#define current (cmwq_kc_get_current())

#define TASK_RUNNING 0
#define TASK_INTERRUPTIBLE 1
#define TASK_UNINTERRUPTIBLE 2
#define TASK_IDLE 0x402
#define MAX_SCHEDULE_TIMEOUT ((long)(~0UL >> 1))
#define set_current_state(s) do { (void)(s); } while (0)
#define __set_current_state(s) do { (void)(s); } while (0)

static inline void schedule(void) { sched_yield(); }
static inline void cond_resched(void) { }
static inline long schedule_timeout(long timeout)
{
	if (timeout != MAX_SCHEDULE_TIMEOUT)
		msleep((unsigned int)timeout);
	return 0;
}
static inline void yield(void) { sched_yield(); }
#endif
