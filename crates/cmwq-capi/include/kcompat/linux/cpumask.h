/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: the online CPUs are those the process may run on at start. */
#ifndef CMWQ_KC_CPUMASK_H
#define CMWQ_KC_CPUMASK_H
#include <stdbool.h>
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
#define for_each_present_cpu(cpu) for_each_online_cpu(cpu)
#endif
