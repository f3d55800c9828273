/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: wait queues. A wait_queue_head is one 32-bit word, also the
 * futex: a count of wakeups. wait_event() reads the count, then tests its
 * condition, and sleeps only while the count is still what it read; wake_up()
 * bumps the count and wakes every sleeper, who test their condition again.
 * A waker that sets the condition before wake_up() is never missed: either
 * the sleeper's test sees the condition, or its futex wait sees the new
 * count and returns at once. Every waiter is woken by any wake_up*() (the
 * kernel's non-exclusive waits), and nothing interrupts a wait: the
 * _interruptible and _killable forms return 0 (or what their _timeout forms
 * return). Jiffies are milliseconds.
 *
 * While it sleeps, a workqueue worker counts as blocked (another worker may
 * run its pool's items, as when the kernel's scheduler calls
 * wq_worker_sleeping), unless its callback cleared PF_WQ_WORKER from
 * current->flags (see linux/sched.h).
 */
#ifndef CMWQ_KC_WAIT_H
#define CMWQ_KC_WAIT_H
#include <limits.h>
#include <stdbool.h>
#include <time.h>
#include <linux/completion.h>
#include <linux/sched.h>
#include <linux/spinlock.h>

void cmwq_kc_block_begin(void);
void cmwq_kc_block_end(void);

struct wait_queue_head {
	unsigned int seq;	/* wakeups so far; the futex word */
};
typedef struct wait_queue_head wait_queue_head_t;

#define __WAIT_QUEUE_HEAD_INITIALIZER(name) { 0 }
#define DECLARE_WAIT_QUEUE_HEAD(name) struct wait_queue_head name = __WAIT_QUEUE_HEAD_INITIALIZER(name)
#define DECLARE_WAIT_QUEUE_HEAD_ONSTACK(name) DECLARE_WAIT_QUEUE_HEAD(name)

static inline void init_waitqueue_head(struct wait_queue_head *wq_head)
{
	__atomic_store_n(&wq_head->seq, 0, __ATOMIC_RELAXED);
}

static inline void cmwq_kc_wake_up(struct wait_queue_head *wq_head)
{
	cmwq_kc_tsan_release(wq_head);
	__atomic_add_fetch(&wq_head->seq, 1, __ATOMIC_SEQ_CST);
	cmwq_kc_futex(&wq_head->seq, FUTEX_WAKE, INT_MAX, NULL);
}

#define wake_up(wq_head) cmwq_kc_wake_up(wq_head)
#define wake_up_all(wq_head) cmwq_kc_wake_up(wq_head)
#define wake_up_nr(wq_head, nr) cmwq_kc_wake_up(wq_head)
#define wake_up_interruptible(wq_head) cmwq_kc_wake_up(wq_head)
#define wake_up_interruptible_all(wq_head) cmwq_kc_wake_up(wq_head)
#define wake_up_interruptible_nr(wq_head, nr) cmwq_kc_wake_up(wq_head)
#define wake_up_locked(wq_head) cmwq_kc_wake_up(wq_head)

/* The count now, read before a waiter tests its condition. */
static inline unsigned int cmwq_kc_wait_seq(struct wait_queue_head *wq_head)
{
	return __atomic_load_n(&wq_head->seq, __ATOMIC_SEQ_CST);
}

/* Sleeps while the count is `seq`, at most `ms` milliseconds (< 0: no
 * limit); may return early (a wakeup for another waiter, a signal). */
static inline void cmwq_kc_wait_sleep(struct wait_queue_head *wq_head, unsigned int seq, long ms)
{
	struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	cmwq_kc_block_begin();
	cmwq_kc_futex(&wq_head->seq, FUTEX_WAIT, seq, ms < 0 ? NULL : &t);
	cmwq_kc_block_end();
}

/* Milliseconds from now to `end` (CLOCK_MONOTONIC), 0 if it passed. */
static inline long cmwq_kc_ms_until(const struct timespec *end)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (end->tv_sec - now.tv_sec) * 1000LL + (end->tv_nsec - now.tv_nsec + 999999L) / 1000000L;
	return ms > 0 ? (long)(ms > LONG_MAX / 2 ? LONG_MAX / 2 : ms) : 0;
}

static inline void cmwq_kc_deadline(struct timespec *end, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, end);
	end->tv_sec += ms / 1000;
	end->tv_nsec += (ms % 1000) * 1000000L;
	if (end->tv_nsec >= 1000000000L) {
		end->tv_sec++;
		end->tv_nsec -= 1000000000L;
	}
}

#define wait_event(wq_head, condition)						\
	do {									\
		for (;;) {							\
			unsigned int __kc_seq = cmwq_kc_wait_seq(&(wq_head));	\
			if (condition)						\
				break;						\
			cmwq_kc_wait_sleep(&(wq_head), __kc_seq, -1);		\
		}								\
		cmwq_kc_tsan_acquire(&(wq_head));				\
	} while (0)

/* The jiffies left (at least 1) once the condition holds, or 0 if the
 * timeout passed with it false. MAX_SCHEDULE_TIMEOUT waits for ever. */
#define wait_event_timeout(wq_head, condition, timeout)				\
	({									\
		long __kc_to = (long)(timeout), __kc_ret;			\
		bool __kc_forever = __kc_to >= MAX_SCHEDULE_TIMEOUT;		\
		struct timespec __kc_end;					\
		if (!__kc_forever)						\
			cmwq_kc_deadline(&__kc_end, __kc_to);			\
		for (;;) {							\
			unsigned int __kc_seq = cmwq_kc_wait_seq(&(wq_head));	\
			long __kc_left = __kc_forever ? MAX_SCHEDULE_TIMEOUT	\
						      : cmwq_kc_ms_until(&__kc_end); \
			if (condition) {					\
				__kc_ret = __kc_left > 1 ? __kc_left : 1;	\
				break;						\
			}							\
			if (__kc_left == 0) {					\
				__kc_ret = 0;					\
				break;						\
			}							\
			cmwq_kc_wait_sleep(&(wq_head), __kc_seq,		\
					   __kc_forever ? -1 : __kc_left);	\
		}								\
		cmwq_kc_tsan_acquire(&(wq_head));				\
		__kc_ret;							\
	})

#define wait_event_idle(wq_head, condition) wait_event(wq_head, condition)
#define wait_event_freezable(wq_head, condition) ({ wait_event(wq_head, condition); 0; })
#define wait_event_interruptible(wq_head, condition) ({ wait_event(wq_head, condition); 0; })
#define wait_event_killable(wq_head, condition) ({ wait_event(wq_head, condition); 0; })
#define wait_event_idle_timeout(wq_head, condition, timeout) \
	wait_event_timeout(wq_head, condition, timeout)
#define wait_event_interruptible_timeout(wq_head, condition, timeout) \
	wait_event_timeout(wq_head, condition, timeout)
#define wait_event_killable_timeout(wq_head, condition, timeout) \
	wait_event_timeout(wq_head, condition, timeout)
#endif
