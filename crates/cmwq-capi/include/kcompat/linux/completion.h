/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: completions. A count of completions not yet consumed (UINT_MAX/2
 * after complete_all) and a count of sleepers, over a futex: complete() is
 * one atomic add when nobody sleeps, and a waiter woken by it runs at once
 * (no mutex to take back, unlike a condition variable). Under TSan the
 * hand-off is annotated, since TSan does not see futexes.
 */
#ifndef CMWQ_KC_COMPLETION_H
#define CMWQ_KC_COMPLETION_H
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#if defined(__SANITIZE_THREAD__)
#define CMWQ_KC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CMWQ_KC_TSAN 1
#endif
#endif
#ifdef CMWQ_KC_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define cmwq_kc_tsan_acquire(p) __tsan_acquire((void *)(p))
#define cmwq_kc_tsan_release(p) __tsan_release((void *)(p))
#else
#define cmwq_kc_tsan_acquire(p) ((void)(p))
#define cmwq_kc_tsan_release(p) ((void)(p))
#endif

struct completion {
	unsigned int done;
	unsigned int sleepers;
};

#define COMPLETION_INITIALIZER(x) { 0, 0 }
#define DECLARE_COMPLETION(x) struct completion x = COMPLETION_INITIALIZER(x)
#define DECLARE_COMPLETION_ONSTACK(x) struct completion x = COMPLETION_INITIALIZER(x)
#define CMWQ_KC_COMPLETE_ALL (UINT_MAX / 2)

static inline long cmwq_kc_futex(unsigned int *addr, int op, unsigned int val,
				 const struct timespec *timeout)
{
	return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, timeout, NULL, 0);
}

static inline void init_completion(struct completion *x)
{
	__atomic_store_n(&x->done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&x->sleepers, 0, __ATOMIC_RELAXED);
}

static inline void reinit_completion(struct completion *x)
{
	__atomic_store_n(&x->done, 0, __ATOMIC_RELAXED);
}

static inline void cmwq_kc_complete_n(struct completion *x, bool all)
{
	unsigned int d = __atomic_load_n(&x->done, __ATOMIC_RELAXED);

	cmwq_kc_tsan_release(x);
	do {
		if (d == CMWQ_KC_COMPLETE_ALL)
			break;
	} while (!__atomic_compare_exchange_n(&x->done, &d, all ? CMWQ_KC_COMPLETE_ALL : d + 1,
					      false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	if (__atomic_load_n(&x->sleepers, __ATOMIC_SEQ_CST))
		cmwq_kc_futex(&x->done, FUTEX_WAKE, all ? INT_MAX : 1, NULL);
}

static inline void complete(struct completion *x) { cmwq_kc_complete_n(x, false); }
static inline void complete_all(struct completion *x) { cmwq_kc_complete_n(x, true); }

/* Consumes one completion if there is one. */
static inline bool try_wait_for_completion(struct completion *x)
{
	unsigned int d = __atomic_load_n(&x->done, __ATOMIC_ACQUIRE);

	while (d) {
		if (d == CMWQ_KC_COMPLETE_ALL ||
		    __atomic_compare_exchange_n(&x->done, &d, d - 1, false, __ATOMIC_ACQUIRE,
						__ATOMIC_ACQUIRE)) {
			cmwq_kc_tsan_acquire(x);
			return true;
		}
	}
	return false;
}

/* Waits until a completion can be consumed or the absolute CLOCK_MONOTONIC
 * deadline passes (NULL: no deadline). True if one was consumed. */
static inline bool cmwq_kc_wait_until(struct completion *x, const struct timespec *deadline)
{
	for (;;) {
		struct timespec left, now, *t = NULL;

		if (try_wait_for_completion(x))
			return true;
		if (deadline) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			left.tv_sec = deadline->tv_sec - now.tv_sec;
			left.tv_nsec = deadline->tv_nsec - now.tv_nsec;
			if (left.tv_nsec < 0) {
				left.tv_sec--;
				left.tv_nsec += 1000000000L;
			}
			if (left.tv_sec < 0)
				return false;
			t = &left;
		}
		__atomic_fetch_add(&x->sleepers, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&x->done, __ATOMIC_SEQ_CST) == 0)
			cmwq_kc_futex(&x->done, FUTEX_WAIT, 0, t);
		__atomic_fetch_sub(&x->sleepers, 1, __ATOMIC_RELAXED);
	}
}

static inline void wait_for_completion(struct completion *x)
{
	cmwq_kc_wait_until(x, NULL);
}

/* Jiffies are milliseconds. Returns the jiffies left (at least 1), or 0 on timeout. */
static inline unsigned long wait_for_completion_timeout(struct completion *x, unsigned long timeout)
{
	struct timespec end, now;
	long long left;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += timeout / 1000;
	end.tv_nsec += (long)(timeout % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	if (!cmwq_kc_wait_until(x, &end))
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	left = (end.tv_sec - now.tv_sec) * 1000LL + (end.tv_nsec - now.tv_nsec) / 1000000LL;
	return left > 1 ? (unsigned long)left : 1;
}

static inline int wait_for_completion_interruptible(struct completion *x)
{
	wait_for_completion(x);
	return 0;
}

static inline int wait_for_completion_killable(struct completion *x)
{
	wait_for_completion(x);
	return 0;
}

static inline bool completion_done(struct completion *x)
{
	return __atomic_load_n(&x->done, __ATOMIC_ACQUIRE) != 0;
}
#endif
