/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: kthreads are pthreads. kthread_create() makes a task that does not
 * run yet; kthread_bind() picks its CPU (it is pinned there when it starts);
 * wake_up_process() starts it; kthread_stop() asks it to stop, waits for its
 * function to return, frees the task and returns what the function returned
 * (-EINTR if it never ran).
 */
#ifndef CMWQ_KC_KTHREAD_H
#define CMWQ_KC_KTHREAD_H
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/err.h>
#include <linux/sched.h>

static inline void *cmwq_kc_kthread_main(void *arg)
{
	struct task_struct *t = (struct task_struct *)arg;

	cmwq_kc_set_current(t);
	if (cmwq_kc_thread_setup(t->comm, t->cpu))
		fprintf(stderr, "kcompat: %s: cannot bind to CPU %d\n", t->comm, t->cpu);
	t->result = t->threadfn(t->data);
	return NULL;
}

__attribute__((format(printf, 3, 4)))
static inline struct task_struct *kthread_create(int (*threadfn)(void *data), void *data,
						 const char *namefmt, ...)
{
	struct task_struct *t = (struct task_struct *)calloc(1, sizeof(*t));
	va_list ap;

	if (!t)
		return (struct task_struct *)ERR_PTR(-ENOMEM);
	t->threadfn = threadfn;
	t->data = data;
	t->flags = PF_KTHREAD;
	t->cpu = -1;
	va_start(ap, namefmt);
	vsnprintf(t->comm, sizeof(t->comm), namefmt, ap);
	va_end(ap);
	return t;
}

static inline void kthread_bind(struct task_struct *t, unsigned int cpu)
{
	t->cpu = (int)cpu;
}

static inline int wake_up_process(struct task_struct *t)
{
	if (t->started)
		return 0;
	t->started = 1;
	if (pthread_create(&t->thread, NULL, cmwq_kc_kthread_main, t)) {
		t->started = 0;
		fprintf(stderr, "kcompat: cannot start kthread %s\n", t->comm);
		return 0;
	}
	return 1;
}

#define kthread_run(threadfn, data, namefmt, ...)				\
	({									\
		struct task_struct *_kc_t = kthread_create(threadfn, data, namefmt, ##__VA_ARGS__); \
		if (!IS_ERR(_kc_t))						\
			wake_up_process(_kc_t);					\
		_kc_t;								\
	})

static inline bool kthread_should_stop(void)
{
	struct task_struct *t = current;

	return t && __atomic_load_n(&t->should_stop, __ATOMIC_ACQUIRE);
}

static inline int kthread_stop(struct task_struct *t)
{
	int ret = -EINTR;

	__atomic_store_n(&t->should_stop, 1, __ATOMIC_RELEASE);
	if (t->started) {
		pthread_join(t->thread, NULL);
		ret = t->result;
	}
	free(t);
	return ret;
}
#endif
