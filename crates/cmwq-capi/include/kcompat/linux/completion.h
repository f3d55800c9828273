/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: completions. One 32-bit word, also the futex: the count of
 * completions not yet consumed (UINT_MAX/2 after complete_all) in the low
 * 31 bits, and a WAITERS bit that a waiter sets before it sleeps. complete()
 * is one compare-and-swap, which also clears WAITERS, plus a futex wake only
 * if the bit was set; a waiter woken by it runs at once (no mutex to take
 * back, unlike a condition variable). Under TSan the hand-off is annotated,
 * since TSan does not see futexes.
 *
 * complete() reads nothing of the completion after its swap: the common
 * pattern (a request with a completion inside, complete() from a work item,
 * the waiter frees the request as soon as it wakes) must not have the
 * completer touch freed memory. The futex wake may still name the freed
 * address; that is at worst a spurious wakeup for whoever uses the address
 * next, which futex waiters allow for (the kernel's own completion holds a
 * lock across both sides instead).
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

void cmwq_kc_worker_sync(void);

struct completion {
	/* The count and the WAITERS bit (see above). */
	unsigned int done;
};

#define COMPLETION_INITIALIZER(x) { 0 }
#define DECLARE_COMPLETION(x) struct completion x = COMPLETION_INITIALIZER(x)
#define DECLARE_COMPLETION_ONSTACK(x) struct completion x = COMPLETION_INITIALIZER(x)
#define CMWQ_KC_COMPLETE_ALL (UINT_MAX / 2)
#define CMWQ_KC_WAITERS (~CMWQ_KC_COMPLETE_ALL)
#define cmwq_kc_count(v) ((v) & CMWQ_KC_COMPLETE_ALL)

static inline long cmwq_kc_futex(unsigned int *addr, int op, unsigned int val,
				 const struct timespec *timeout)
{
	return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, timeout, NULL, 0);
}

static inline void init_completion(struct completion *x)
{
	__atomic_store_n(&x->done, 0, __ATOMIC_RELAXED);
}

static inline void reinit_completion(struct completion *x)
{
	__atomic_store_n(&x->done, 0, __ATOMIC_RELAXED);
}

static inline void cmwq_kc_complete_n(struct completion *x, bool all)
{
	unsigned int old = __atomic_load_n(&x->done, __ATOMIC_RELAXED), new;

	cmwq_kc_tsan_release(x);
	do {
		if (cmwq_kc_count(old) == CMWQ_KC_COMPLETE_ALL)
			return; /* nobody can be asleep on a completed-for-all word */
		/* The new word has WAITERS clear: every sleeper is woken and
		 * sets it again if it finds nothing to consume. */
		new = all ? CMWQ_KC_COMPLETE_ALL : cmwq_kc_count(old) + 1;
	} while (!__atomic_compare_exchange_n(&x->done, &old, new, false, __ATOMIC_SEQ_CST,
					      __ATOMIC_RELAXED));
	/* Nothing of *x is read from here on (see the top of the file). */
	if (old & CMWQ_KC_WAITERS)
		cmwq_kc_futex(&x->done, FUTEX_WAKE, INT_MAX, NULL);
}

static inline void complete(struct completion *x) { cmwq_kc_complete_n(x, false); }
static inline void complete_all(struct completion *x) { cmwq_kc_complete_n(x, true); }

/* Consumes one completion if there is one. */
static inline bool try_wait_for_completion(struct completion *x)
{
	unsigned int d = __atomic_load_n(&x->done, __ATOMIC_ACQUIRE);

	while (cmwq_kc_count(d)) {
		/* d - 1 keeps a WAITERS bit as it is. */
		if (cmwq_kc_count(d) == CMWQ_KC_COMPLETE_ALL ||
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
		/* Announce a sleeper (only on an empty count), then sleep while
		 * the word is exactly that: a complete() in between changes it,
		 * and the wait returns at once. */
		unsigned int d = __atomic_load_n(&x->done, __ATOMIC_RELAXED);

		if (cmwq_kc_count(d))
			continue;
		if (!(d & CMWQ_KC_WAITERS) &&
		    !__atomic_compare_exchange_n(&x->done, &d, d | CMWQ_KC_WAITERS, false,
						 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			continue;
		cmwq_kc_worker_sync(); /* a worker that cleared PF_WQ_WORKER sleeps hidden */
		cmwq_kc_futex(&x->done, FUTEX_WAIT, CMWQ_KC_WAITERS, t);
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
	return cmwq_kc_count(__atomic_load_n(&x->done, __ATOMIC_ACQUIRE)) != 0;
}
#endif
