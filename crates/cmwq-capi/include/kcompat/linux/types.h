/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: the kernel's fixed-size types, for kernel code built as a program. */
#ifndef CMWQ_KC_TYPES_H
#define CMWQ_KC_TYPES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
/* The UAPI header of the same name (__u32, ...), which system headers may want. */
#if defined(__has_include_next)
#if __has_include_next(<linux/types.h>)
#include_next <linux/types.h>
#endif
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char s8;
typedef short s16;
typedef int s32;
typedef long long s64;
typedef __loff_t loff_t;
typedef unsigned short umode_t;
typedef unsigned int gfp_t;
typedef void *fl_owner_t;
typedef u64 phys_addr_t;
#endif
