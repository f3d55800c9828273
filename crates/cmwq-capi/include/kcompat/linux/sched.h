/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: tasks are pthreads (see kthread.h); schedule() yields. */
#ifndef CMWQ_KC_SCHED_H
#define CMWQ_KC_SCHED_H
#include <pthread.h>
#include <sched.h>
#include <linux/delay.h>
#include <linux/smp.h>

struct task_struct {
	pthread_t thread;
	int (*threadfn)(void *data);
	void *data;
	char comm[16];
	int cpu;		/* kthread_bind()'s CPU, -1: none */
	int started;
	int should_stop;	/* atomic */
	int result;
};

void *cmwq_kc_current(void);
void cmwq_kc_set_current(void *task);
int cmwq_kc_thread_setup(const char *name, int cpu);

/* The calling kthread's task (NULL on threads not made by kthread_create). */
#define current ((struct task_struct *)cmwq_kc_current())

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
