/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: sort() is qsort(); a custom swap function is not needed by it. */
#ifndef CMWQ_KC_SORT_H
#define CMWQ_KC_SORT_H
#include <stdlib.h>
typedef int (*cmp_func_t)(const void *a, const void *b);
typedef void (*swap_func_t)(void *a, void *b, int size);
static inline void sort(void *base, size_t num, size_t size, cmp_func_t cmp, swap_func_t swap_fn)
{
	(void)swap_fn;
	qsort(base, num, size, cmp);
}
#endif
