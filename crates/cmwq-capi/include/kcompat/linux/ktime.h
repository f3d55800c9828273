/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: ktime_t is nanoseconds of CLOCK_MONOTONIC. */
#ifndef CMWQ_KC_KTIME_H
#define CMWQ_KC_KTIME_H
#include <time.h>
#include <linux/types.h>
#include <linux/jiffies.h>

typedef s64 ktime_t;
#define KTIME_MAX ((s64)~((u64)1 << 63))

static inline ktime_t ktime_get(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (s64)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static inline u64 ktime_get_ns(void) { return (u64)ktime_get(); }
static inline ktime_t ktime_get_boottime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (s64)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static inline ktime_t ktime_get_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (s64)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static inline ktime_t ktime_set(s64 secs, unsigned long nsecs) { return secs * 1000000000LL + (s64)nsecs; }
static inline ktime_t ktime_sub(ktime_t a, ktime_t b) { return a - b; }
static inline ktime_t ktime_add(ktime_t a, ktime_t b) { return a + b; }
static inline ktime_t ktime_add_ns(ktime_t a, u64 ns) { return a + (s64)ns; }
static inline ktime_t ktime_add_us(ktime_t a, u64 us) { return a + (s64)us * 1000; }
static inline s64 ktime_to_ns(ktime_t k) { return k; }
static inline s64 ktime_to_us(ktime_t k) { return k / 1000; }
static inline s64 ktime_to_ms(ktime_t k) { return k / 1000000; }
static inline ktime_t ns_to_ktime(u64 ns) { return (ktime_t)ns; }
static inline ktime_t us_to_ktime(u64 us) { return (ktime_t)us * 1000; }
static inline ktime_t ms_to_ktime(u64 ms) { return (ktime_t)ms * 1000000; }
static inline s64 ktime_us_delta(ktime_t later, ktime_t earlier) { return ktime_to_us(later - earlier); }
static inline s64 ktime_ms_delta(ktime_t later, ktime_t earlier) { return ktime_to_ms(later - earlier); }
static inline int ktime_compare(ktime_t a, ktime_t b) { return a < b ? -1 : a > b; }
static inline bool ktime_after(ktime_t a, ktime_t b) { return a > b; }
static inline bool ktime_before(ktime_t a, ktime_t b) { return a < b; }
#endif
