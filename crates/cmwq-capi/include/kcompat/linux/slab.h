/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: kmalloc and friends are malloc; the GFP flags are ignored. */
#ifndef CMWQ_KC_SLAB_H
#define CMWQ_KC_SLAB_H
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>

#define GFP_KERNEL 0x1u
#define GFP_ATOMIC 0x2u
#define GFP_NOWAIT 0x4u
#define GFP_NOIO 0x8u
#define GFP_NOFS 0x10u
#define __GFP_ZERO 0x100u
#define __GFP_NOWARN 0x200u

static inline void *kmalloc(size_t size, gfp_t flags)
{
	return (flags & __GFP_ZERO) ? calloc(1, size ? size : 1) : malloc(size ? size : 1);
}
static inline void *kzalloc(size_t size, gfp_t flags) { return kmalloc(size, flags | __GFP_ZERO); }
static inline void *kmalloc_array(size_t n, size_t size, gfp_t flags)
{
	if (size && n > (size_t)-1 / size)
		return NULL;
	return kmalloc(n * size, flags);
}
static inline void *kcalloc(size_t n, size_t size, gfp_t flags)
{
	return kmalloc_array(n, size, flags | __GFP_ZERO);
}
static inline void *krealloc(void *p, size_t size, gfp_t flags) { (void)flags; return realloc(p, size); }
static inline void kfree(const void *p) { free((void *)p); }
static inline void kfree_sensitive(const void *p) { free((void *)p); }
#define kvmalloc kmalloc
#define kvzalloc kzalloc
#define kvmalloc_array kmalloc_array
#define kvcalloc kcalloc
#define kvfree kfree
static inline char *kstrdup(const char *s, gfp_t flags) { (void)flags; return s ? strdup(s) : NULL; }
static inline void *kmemdup(const void *src, size_t len, gfp_t flags)
{
	void *p = kmalloc(len, flags);

	if (p)
		memcpy(p, src, len);
	return p;
}
#endif
