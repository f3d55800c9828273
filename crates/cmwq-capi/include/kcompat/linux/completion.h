/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: completions over a pthread mutex and condition variable. */
#ifndef CMWQ_KC_COMPLETION_H
#define CMWQ_KC_COMPLETION_H
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

struct completion {
	unsigned int done;
	pthread_mutex_t lock;
	pthread_cond_t wait;
};

#define COMPLETION_INITIALIZER(x) { 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER }
#define DECLARE_COMPLETION(x) struct completion x = COMPLETION_INITIALIZER(x)
#define DECLARE_COMPLETION_ONSTACK(x) struct completion x; init_completion(&x)
#define CMWQ_KC_COMPLETE_ALL (UINT_MAX / 2)

static inline void init_completion(struct completion *x)
{
	x->done = 0;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->wait, NULL);
}

static inline void reinit_completion(struct completion *x)
{
	pthread_mutex_lock(&x->lock);
	x->done = 0;
	pthread_mutex_unlock(&x->lock);
}

static inline void complete(struct completion *x)
{
	pthread_mutex_lock(&x->lock);
	if (x->done != CMWQ_KC_COMPLETE_ALL)
		x->done++;
	pthread_cond_signal(&x->wait);
	pthread_mutex_unlock(&x->lock);
}

static inline void complete_all(struct completion *x)
{
	pthread_mutex_lock(&x->lock);
	x->done = CMWQ_KC_COMPLETE_ALL;
	pthread_cond_broadcast(&x->wait);
	pthread_mutex_unlock(&x->lock);
}

static inline void wait_for_completion(struct completion *x)
{
	pthread_mutex_lock(&x->lock);
	while (!x->done)
		pthread_cond_wait(&x->wait, &x->lock);
	if (x->done != CMWQ_KC_COMPLETE_ALL)
		x->done--;
	pthread_mutex_unlock(&x->lock);
}

/* Jiffies are milliseconds. Returns the jiffies left (at least 1), or 0 on timeout. */
static inline unsigned long wait_for_completion_timeout(struct completion *x, unsigned long timeout)
{
	struct timespec now, end;
	long long left_ns;
	unsigned long left = 0;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += timeout / 1000;
	end.tv_nsec += (long)(timeout % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&x->lock);
	while (!x->done)
		if (pthread_cond_timedwait(&x->wait, &x->lock, &end))
			break;
	if (x->done) {
		if (x->done != CMWQ_KC_COMPLETE_ALL)
			x->done--;
		clock_gettime(CLOCK_REALTIME, &now);
		left_ns = (end.tv_sec - now.tv_sec) * 1000000000LL + (end.tv_nsec - now.tv_nsec);
		left = left_ns > 1000000LL ? (unsigned long)(left_ns / 1000000LL) : 1;
	}
	pthread_mutex_unlock(&x->lock);
	return left;
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

static inline bool try_wait_for_completion(struct completion *x)
{
	bool ret;

	pthread_mutex_lock(&x->lock);
	ret = x->done != 0;
	if (ret && x->done != CMWQ_KC_COMPLETE_ALL)
		x->done--;
	pthread_mutex_unlock(&x->lock);
	return ret;
}

static inline bool completion_done(struct completion *x)
{
	bool ret;

	pthread_mutex_lock(&x->lock);
	ret = x->done != 0;
	pthread_mutex_unlock(&x->lock);
	return ret;
}
#endif
