/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: compiler helpers with the kernel's names. */
#ifndef CMWQ_KC_COMPILER_H
#define CMWQ_KC_COMPILER_H
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define __maybe_unused __attribute__((unused))
#define __always_unused __attribute__((unused))
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define noinline __attribute__((noinline))
#define __must_check __attribute__((warn_unused_result))
#define __printf(a, b) __attribute__((format(printf, a, b)))
#define __aligned(x) __attribute__((aligned(x)))
#define __packed __attribute__((packed))
#define __read_mostly
#define ____cacheline_aligned __attribute__((aligned(64)))
#define ____cacheline_aligned_in_smp ____cacheline_aligned
#define __user
#define __iomem
#define __rcu
#define __percpu
#ifndef fallthrough
#define fallthrough __attribute__((fallthrough))
#endif
#define barrier() __asm__ __volatile__("" ::: "memory")
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, val) do { *(volatile __typeof__(x) *)&(x) = (val); } while (0)
#define BUILD_BUG_ON(c) _Static_assert(!(c), "BUILD_BUG_ON(" #c ")")
#endif
