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
struct file *filp_open(const char *path, int flags, umode_t mode);
int filp_close(struct file *file, fl_owner_t id);
ssize_t kernel_write(struct file *file, const void *buf, size_t count, loff_t *pos);
ssize_t kernel_read(struct file *file, void *buf, size_t count, loff_t *pos);
#endif
