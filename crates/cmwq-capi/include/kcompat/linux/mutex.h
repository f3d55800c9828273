/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: struct mutex over a pthread mutex. */
#ifndef CMWQ_KC_MUTEX_H
#define CMWQ_KC_MUTEX_H
#include <pthread.h>
struct mutex { pthread_mutex_t m; };
#define DEFINE_MUTEX(n) struct mutex n = { PTHREAD_MUTEX_INITIALIZER }
static inline void mutex_init(struct mutex *l) { pthread_mutex_init(&l->m, NULL); }
static inline void mutex_lock(struct mutex *l) { pthread_mutex_lock(&l->m); }
static inline void mutex_unlock(struct mutex *l) { pthread_mutex_unlock(&l->m); }
static inline int mutex_trylock(struct mutex *l) { return pthread_mutex_trylock(&l->m) == 0; }
static inline void mutex_destroy(struct mutex *l) { pthread_mutex_destroy(&l->m); }
#endif
