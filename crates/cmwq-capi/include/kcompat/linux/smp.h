/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: the calling CPU. */
#ifndef CMWQ_KC_SMP_H
#define CMWQ_KC_SMP_H
int cmwq_kc_this_cpu(void);
#define smp_processor_id() cmwq_kc_this_cpu()
#define raw_smp_processor_id() cmwq_kc_this_cpu()
#define get_cpu() cmwq_kc_this_cpu()
#define put_cpu() do { } while (0)
#endif
