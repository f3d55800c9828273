/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmwq: struct cpumask, as struct workqueue_attrs holds it: one bit per CPU
 * id below CMWQ_NR_CPUS (8192, the library's NR_CPUS, fixed: the size is
 * ABI). The kcompat layer's linux/cpumask.h has the cpumask_* helpers.
 */
#ifndef CMWQ_LINUX_CPUMASK_TYPES_H
#define CMWQ_LINUX_CPUMASK_TYPES_H

#define CMWQ_NR_CPUS 8192

struct cpumask {
	unsigned long bits[CMWQ_NR_CPUS / (8 * sizeof(unsigned long))];
};
typedef struct cpumask cpumask_t;
/* As the kernel without CONFIG_CPUMASK_OFFSTACK: an array of one, so
 * attrs->cpumask is a struct cpumask * wherever it is passed. */
typedef struct cpumask cpumask_var_t[1];

#endif
