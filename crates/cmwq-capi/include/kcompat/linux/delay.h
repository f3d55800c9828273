/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: sleeping and busy delays. */
#ifndef CMWQ_KC_DELAY_H
#define CMWQ_KC_DELAY_H
#include <time.h>
#include <errno.h>
void cmwq_kc_worker_sync(void);
static inline void cmwq_kc_sleep_ns(long long ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL };

	cmwq_kc_worker_sync(); /* a worker that cleared PF_WQ_WORKER sleeps hidden */
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}
static inline void msleep(unsigned int ms) { cmwq_kc_sleep_ns((long long)ms * 1000000LL); }
static inline void usleep_range(unsigned long lo, unsigned long hi) { (void)hi; cmwq_kc_sleep_ns((long long)lo * 1000LL); }
/* No signal interrupts it here: it sleeps it all and returns 0 (the
 * milliseconds left). */
static inline unsigned long msleep_interruptible(unsigned int ms)
{
	msleep(ms);
	return 0;
}
static inline void ssleep(unsigned int s) { cmwq_kc_sleep_ns((long long)s * 1000000000LL); }
static inline void cmwq_kc_spin_ns(long long ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) < ns);
}
static inline void udelay(unsigned long us) { cmwq_kc_spin_ns((long long)us * 1000LL); }
static inline void ndelay(unsigned long ns) { cmwq_kc_spin_ns((long long)ns); }
static inline void mdelay(unsigned long ms) { cmwq_kc_spin_ns((long long)ms * 1000000LL); }
#endif
