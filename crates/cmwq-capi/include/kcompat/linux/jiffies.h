/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: jiffies; HZ is 1000, so one jiffy is one millisecond. */
#ifndef CMWQ_KC_JIFFIES_H
#define CMWQ_KC_JIFFIES_H
#include <time.h>
#ifndef HZ
#define HZ 1000
#endif
static inline unsigned long cmwq_kc_jiffies(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_sec * 1000UL + (unsigned long)ts.tv_nsec / 1000000UL;
}
#define jiffies (cmwq_kc_jiffies())
static inline unsigned long msecs_to_jiffies(unsigned int m) { return m; }
static inline unsigned long usecs_to_jiffies(unsigned int u) { return (u + 999) / 1000; }
static inline unsigned int jiffies_to_msecs(unsigned long j) { return (unsigned int)j; }
#define time_after(a, b) ((long)((b) - (a)) < 0)
#define time_before(a, b) time_after(b, a)
#endif
