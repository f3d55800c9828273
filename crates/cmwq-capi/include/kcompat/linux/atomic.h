/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: atomic_t, atomic64_t and atomic_long_t over the compiler's
 * atomics, with the kernel's orderings: plain reads, sets and void
 * operations are relaxed; operations that return a value are fully ordered.
 */
#ifndef CMWQ_KC_ATOMIC_H
#define CMWQ_KC_ATOMIC_H
#include <stdbool.h>

typedef struct { int counter; } atomic_t;
typedef struct { long long counter; } atomic64_t;
typedef struct { long counter; } atomic_long_t;
#define ATOMIC_INIT(i) { (i) }
#define ATOMIC64_INIT(i) { (i) }
#define ATOMIC_LONG_INIT(i) { (i) }

#define smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#define smp_mb__before_atomic() smp_mb()
#define smp_mb__after_atomic() smp_mb()
#define smp_store_release(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)
#define smp_load_acquire(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)

#define CMWQ_KC_ATOMIC_OPS(pfx, T, V)							\
static inline V pfx##_read(const T *v) { return __atomic_load_n(&v->counter, __ATOMIC_RELAXED); } \
static inline void pfx##_set(T *v, V i) { __atomic_store_n(&v->counter, i, __ATOMIC_RELAXED); } \
static inline V pfx##_read_acquire(const T *v) { return __atomic_load_n(&v->counter, __ATOMIC_ACQUIRE); } \
static inline void pfx##_set_release(T *v, V i) { __atomic_store_n(&v->counter, i, __ATOMIC_RELEASE); } \
static inline void pfx##_add(V i, T *v) { __atomic_fetch_add(&v->counter, i, __ATOMIC_RELAXED); } \
static inline void pfx##_sub(V i, T *v) { __atomic_fetch_sub(&v->counter, i, __ATOMIC_RELAXED); } \
static inline void pfx##_inc(T *v) { pfx##_add(1, v); }						\
static inline void pfx##_dec(T *v) { pfx##_sub(1, v); }						\
static inline V pfx##_add_return(V i, T *v) { return __atomic_add_fetch(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline V pfx##_sub_return(V i, T *v) { return __atomic_sub_fetch(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline V pfx##_inc_return(T *v) { return pfx##_add_return(1, v); }			\
static inline V pfx##_dec_return(T *v) { return pfx##_sub_return(1, v); }			\
static inline V pfx##_fetch_add(V i, T *v) { return __atomic_fetch_add(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline V pfx##_fetch_sub(V i, T *v) { return __atomic_fetch_sub(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline V pfx##_fetch_inc(T *v) { return pfx##_fetch_add(1, v); }				\
static inline V pfx##_fetch_dec(T *v) { return pfx##_fetch_sub(1, v); }				\
static inline bool pfx##_dec_and_test(T *v) { return pfx##_dec_return(v) == 0; }		\
static inline bool pfx##_inc_and_test(T *v) { return pfx##_inc_return(v) == 0; }		\
static inline bool pfx##_sub_and_test(V i, T *v) { return pfx##_sub_return(i, v) == 0; }	\
static inline V pfx##_xchg(T *v, V n) { return __atomic_exchange_n(&v->counter, n, __ATOMIC_SEQ_CST); } \
static inline V pfx##_cmpxchg(T *v, V o, V n)							\
{												\
	__atomic_compare_exchange_n(&v->counter, &o, n, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
	return o;										\
}												\
static inline bool pfx##_try_cmpxchg(T *v, V *o, V n)						\
{												\
	return __atomic_compare_exchange_n(&v->counter, o, n, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
}												\
static inline bool pfx##_add_unless(T *v, V a, V u)						\
{												\
	V c = pfx##_read(v);									\
	do {											\
		if (c == u)									\
			return false;								\
	} while (!pfx##_try_cmpxchg(v, &c, c + a));						\
	return true;										\
}												\
static inline bool pfx##_inc_not_zero(T *v) { return pfx##_add_unless(v, 1, 0); }

CMWQ_KC_ATOMIC_OPS(atomic, atomic_t, int)
CMWQ_KC_ATOMIC_OPS(atomic64, atomic64_t, long long)
CMWQ_KC_ATOMIC_OPS(atomic_long, atomic_long_t, long)
#endif
