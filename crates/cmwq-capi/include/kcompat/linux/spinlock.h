/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: spinlock_t over a pthread mutex (interrupts do not exist here). */
#ifndef CMWQ_KC_SPINLOCK_H
#define CMWQ_KC_SPINLOCK_H
#include <pthread.h>
typedef struct { pthread_mutex_t m; } spinlock_t;
#define DEFINE_SPINLOCK(n) spinlock_t n = { PTHREAD_MUTEX_INITIALIZER }
static inline void spin_lock_init(spinlock_t *l) { pthread_mutex_init(&l->m, NULL); }
static inline void spin_lock(spinlock_t *l) { pthread_mutex_lock(&l->m); }
static inline void spin_unlock(spinlock_t *l) { pthread_mutex_unlock(&l->m); }
#define spin_lock_irq spin_lock
#define spin_unlock_irq spin_unlock
#define spin_lock_bh spin_lock
#define spin_unlock_bh spin_unlock
#define spin_lock_irqsave(l, f) do { (void)(f); spin_lock(l); } while (0)
#define spin_unlock_irqrestore(l, f) do { (void)(f); spin_unlock(l); } while (0)
#endif
