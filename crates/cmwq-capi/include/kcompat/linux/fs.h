/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: kernel file I/O. Paths under /sys/bus/workqueue/devices/<wq>/
 * (and /sys/devices/virtual/workqueue/<wq>/) reach the live attributes of
 * the WQ_SYSFS workqueue <wq>: affinity_scope, affinity_strict, cpumask,
 * nice, max_active, per_cpu (read only). Any other path is a real file.
 */
#ifndef CMWQ_KC_FS_H
#define CMWQ_KC_FS_H
#include <fcntl.h>
#include <sys/types.h>
#include <linux/types.h>

struct file;
/* The library's names are prefixed, so a program with functions of these
 * names of its own still links. */
struct file *cmwq_kc_filp_open(const char *path, int flags, umode_t mode);
int cmwq_kc_filp_close(struct file *file, fl_owner_t id);
ssize_t cmwq_kc_kernel_write(struct file *file, const void *buf, size_t count, loff_t *pos);
ssize_t cmwq_kc_kernel_read(struct file *file, void *buf, size_t count, loff_t *pos);

static inline struct file *filp_open(const char *path, int flags, umode_t mode)
{
	return cmwq_kc_filp_open(path, flags, mode);
}
static inline int filp_close(struct file *file, fl_owner_t id)
{
	return cmwq_kc_filp_close(file, id);
}
static inline ssize_t kernel_write(struct file *file, const void *buf, size_t count, loff_t *pos)
{
	return cmwq_kc_kernel_write(file, buf, count, pos);
}
static inline ssize_t kernel_read(struct file *file, void *buf, size_t count, loff_t *pos)
{
	return cmwq_kc_kernel_read(file, buf, count, pos);
}
#endif
