/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: the kernel's grab bag, built from the C library. */
#ifndef CMWQ_KC_KERNEL_H
#define CMWQ_KC_KERNEL_H
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include <linux/compiler.h>
#include <linux/container_of.h>
#include <linux/err.h>
#include <linux/minmax.h>
#include <linux/printk.h>
#include <linux/bug.h>
#include <linux/jiffies.h>

#ifndef ERESTARTSYS
#define ERESTARTSYS 512
#endif
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
#define DIV_ROUND_CLOSEST(x, d) (((x) + ((d) / 2)) / (d))
#define roundup(x, y) ((((x) + ((y) - 1)) / (y)) * (y))
#define rounddown(x, y) ((x) - ((x) % (y)))
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define U8_MAX ((u8)~0U)
#define U16_MAX ((u16)~0U)
#define U32_MAX ((u32)~0U)
#define U64_MAX ((u64)~0ULL)
#define S64_MAX ((s64)(U64_MAX >> 1))
#define NSEC_PER_USEC 1000L
#define NSEC_PER_MSEC 1000000L
#define USEC_PER_SEC 1000000L
#define MSEC_PER_SEC 1000L
#define NSEC_PER_SEC 1000000000L
#define might_sleep() do { } while (0)
#define cpu_relax() cmwq_kc_cpu_relax()
static inline void cmwq_kc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}
#endif
