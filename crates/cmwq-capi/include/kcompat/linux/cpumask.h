/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: the online CPUs are those the process may run on at start. */
#ifndef CMWQ_KC_CPUMASK_H
#define CMWQ_KC_CPUMASK_H
#include <stdbool.h>
#include <string.h>
#include <linux/cpumask_types.h>
#include <linux/smp.h>

int cmwq_kc_next_online_cpu(int cpu);
int cmwq_kc_num_online_cpus(void);
int cmwq_kc_nr_cpu_ids(void);
bool cmwq_kc_cpu_online(int cpu);

#define nr_cpu_ids (cmwq_kc_nr_cpu_ids())
#define num_online_cpus() cmwq_kc_num_online_cpus()
#define num_possible_cpus() cmwq_kc_num_online_cpus()
#define num_present_cpus() cmwq_kc_num_online_cpus()
#define cpu_online(cpu) cmwq_kc_cpu_online(cpu)
#define cpu_possible(cpu) cmwq_kc_cpu_online(cpu)
#define for_each_online_cpu(cpu) \
	for ((cpu) = cmwq_kc_next_online_cpu(-1); (cpu) < nr_cpu_ids; (cpu) = cmwq_kc_next_online_cpu(cpu))
#define for_each_possible_cpu(cpu) for_each_online_cpu(cpu)

/* struct cpumask (linux/cpumask_types.h), as workqueue_attrs holds it. */
#define CMWQ_KC_MASK_BITS (8 * sizeof(unsigned long))
static inline void cpumask_set_cpu(unsigned int cpu, struct cpumask *m)
{
	if (cpu < CMWQ_NR_CPUS)
		m->bits[cpu / CMWQ_KC_MASK_BITS] |= 1UL << (cpu % CMWQ_KC_MASK_BITS);
}
static inline void cpumask_clear_cpu(int cpu, struct cpumask *m)
{
	if (cpu >= 0 && cpu < CMWQ_NR_CPUS)
		m->bits[cpu / CMWQ_KC_MASK_BITS] &= ~(1UL << (cpu % CMWQ_KC_MASK_BITS));
}
static inline bool cpumask_test_cpu(int cpu, const struct cpumask *m)
{
	return cpu >= 0 && cpu < CMWQ_NR_CPUS &&
	       (m->bits[cpu / CMWQ_KC_MASK_BITS] >> (cpu % CMWQ_KC_MASK_BITS)) & 1;
}
static inline void cpumask_clear(struct cpumask *m)
{
	memset(m, 0, sizeof(*m));
}
static inline void cpumask_copy(struct cpumask *dst, const struct cpumask *src)
{
	memcpy(dst, src, sizeof(*dst));
}
static inline unsigned int cpumask_weight(const struct cpumask *m)
{
	unsigned int n = 0;
	size_t i;

	for (i = 0; i < sizeof(m->bits) / sizeof(m->bits[0]); i++)
		n += (unsigned int)__builtin_popcountl(m->bits[i]);
	return n;
}
#define for_each_present_cpu(cpu) for_each_online_cpu(cpu)
#endif
