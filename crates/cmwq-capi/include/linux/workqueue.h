/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmwq: the Linux kernel's workqueue API in user space, over cmwq's engine.
 * Link with -lcmwq (see the crate's README). Only standard C headers are
 * needed; the kernel-compat layer (include/kcompat) is optional.
 *
 * LIFETIME RULES
 *
 * - A struct work_struct / struct delayed_work lives inside your own
 *   struct, by value. Initialise it with INIT_WORK / INIT_DELAYED_WORK (or
 *   DECLARE_WORK / DECLARE_DELAYED_WORK) before the first queue call.
 * - While the item is busy (pending, running, or being flushed or
 *   cancelled by some caller), the library lends it a "carrier", an engine
 *   work item that calls your function. The carrier goes back to a free
 *   list by itself once the item is idle: there is no destructor to call.
 * - You may free (or reuse) the memory holding the item once it is idle:
 *     after cancel_work_sync(), disable_work_sync(), flush_work() (if
 *     nobody queues it again), cancel_delayed_work_sync(), or
 *     flush_delayed_work(); or from inside its own callback, when the
 *     callback does not queue it again: the worker never touches the
 *     work_struct after the callback returns.
 * - INIT_WORK may be called again on an idle item, also while the previous
 *   run's worker is still finishing (e.g. right after the callback signalled
 *   a completion): it only forgets the old carrier, which returns itself.
 *   Never call INIT_WORK on a pending item.
 * - The library never allocates per queue_work in steady state: carriers
 *   are reused. A process holds as many carriers as it ever had busy items
 *   at once.
 * - Non-reentrancy: an item never runs on two workers at once, as in the
 *   kernel, unless it is re-initialised (INIT_WORK) or queued to another
 *   workqueue while running (the kernel does not promise it then either).
 *
 * WHAT DIFFERS FROM THE KERNEL
 *
 * - One jiffy is one millisecond (HZ is 1000).
 * - flush_work() on a delayed_work's work with an armed timer fires the
 *   timer now and waits for the run, as flush_delayed_work() does.
 * - WQ_BH queues run their items on threads (no softirq context);
 *   WQ_POWER_EFFICIENT is ignored (as with the kernel's default
 *   workqueue.power_efficient=0); WQ_HIGHPRI falls back to the best
 *   priority allowed without CAP_SYS_NICE.
 * - Waiting for an item from its own callback (flush_work, cancel_work_sync,
 *   flush_workqueue or drain_workqueue on its own queue) prints an error (a
 *   Rust panic report on stderr) and returns instead of deadlocking;
 *   destroy_workqueue() of its own queue from a callback prints the same
 *   error for its drain, and the queue is destroyed on another thread once
 *   the callback has returned.
 * - destroy_workqueue() waits for everything queued to run, and fires armed
 *   delayed works at once (also those armed while it runs) rather than
 *   waiting out their timers.
 * - mod_delayed_work() wins against a racing queue_delayed_work(): it takes
 *   whatever cycle is pending until its own is queued, as the kernel does.
 * - cancel_work_sync() / cancel_delayed_work_sync() / disable_work_sync()
 *   of an item from its own callback is refused whole (the kernel would
 *   wait for itself for ever): it prints the error above, returns false and
 *   cancels nothing, so a cycle the callback queued or armed before the call
 *   still runs after the callback returns. To drop such a cycle from the
 *   callback, use cancel_work() / cancel_delayed_work(), which do not wait
 *   (or do not re-arm it).
 *
 * AS IN THE KERNEL, SAID ONCE
 *
 * - alloc_workqueue(): a name longer than WQ_NAME_LEN - 1 (31) bytes is cut
 *   to 31 ("workqueue: name exceeds WQ_NAME_LEN. Truncating to: ..." on
 *   stderr, once per process); max_active outside 1..WQ_MAX_ACTIVE (0 is the
 *   default, WQ_DFL_ACTIVE) is clamped into it, with a line on stderr each
 *   time ("workqueue: max_active N requested for NAME is out of range,
 *   clamping between 1 and 2048"), by workqueue_set_max_active() too.
 *   cmwq_alloc_workqueue(NULL, ...) makes a queue with an empty name, as
 *   alloc_workqueue(NULL, ...) does (a NULL format prints nothing).
 * - destroy_workqueue() frees the queue: any later call with it
 *   (queue_work(), flush_workqueue(), a second destroy_workqueue(), ...) is
 *   a use after free, with undefined behaviour, as in the kernel. Run
 *   AddressSanitizer (-fsanitize=address) to find one.
 *
 * WHAT USER SPACE CANNOT DO HERE
 *
 * - No call is async-signal-safe: queue_work() from a signal handler (the
 *   nearest thing to an interrupt) may deadlock on a lock the interrupted
 *   thread holds. Hand the event to a thread instead (a self-pipe, an
 *   eventfd, or a thread in sigwait()).
 * - fork(): the child inherits the queues but not the worker threads, so
 *   work queued in the child does not run (flush_work() would wait
 *   forever). Queue work only in the parent, or exec() in the child.
 */
#ifndef CMWQ_LINUX_WORKQUEUE_H
#define CMWQ_LINUX_WORKQUEUE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct work_struct;
typedef void (*work_func_t)(struct work_struct *work);

/* Fields starting with __cmwq are private to the library. */
struct work_struct {
	unsigned long __cmwq_data;	/* lock bit, disable depth */
	void *__cmwq_carrier;		/* the carrier while busy (may be stale) */
	work_func_t func;
};

struct delayed_work {
	struct work_struct work;
};

/* Opaque: a cmwq workqueue. */
struct workqueue_struct;

#ifndef HZ
#define HZ 1000
#endif

#ifndef NR_CPUS
#define NR_CPUS 8192
#endif
#define WORK_CPU_UNBOUND NR_CPUS

enum wq_flags {
	WQ_BH			= 1 << 0,
	WQ_UNBOUND		= 1 << 1,
	WQ_FREEZABLE		= 1 << 2,
	WQ_MEM_RECLAIM		= 1 << 3,
	WQ_HIGHPRI		= 1 << 4,
	WQ_CPU_INTENSIVE	= 1 << 5,
	WQ_SYSFS		= 1 << 6,
	WQ_POWER_EFFICIENT	= 1 << 7,
	WQ_PERCPU		= 1 << 8,
	__WQ_DESTROYING		= 1 << 15,
	__WQ_DRAINING		= 1 << 16,
	__WQ_ORDERED		= 1 << 17,
	__WQ_LEGACY		= 1 << 18,
	WQ_BH_ALLOWS		= WQ_BH | WQ_HIGHPRI | WQ_PERCPU,
};

enum wq_consts {
	WQ_MAX_ACTIVE		= 2048,
	WQ_UNBOUND_MAX_ACTIVE	= WQ_MAX_ACTIVE,
	WQ_DFL_ACTIVE		= WQ_MAX_ACTIVE / 2,
	WQ_DFL_MIN_ACTIVE	= 8,
};

/* Affinity scopes of unbound queues (the sysfs file affinity_scope takes
 * the names: cpu, smt, cache, cache_shard, numa, system, default). */
enum wq_affn_scope {
	WQ_AFFN_DFL,		/* the process default: cache_shard */
	WQ_AFFN_CPU,
	WQ_AFFN_SMT,
	WQ_AFFN_CACHE,
	WQ_AFFN_CACHE_SHARD,
	WQ_AFFN_NUMA,
	WQ_AFFN_SYSTEM,
	WQ_AFFN_NR_TYPES,
};

#define __WORK_INITIALIZER(n, f) { .__cmwq_data = 0, .__cmwq_carrier = NULL, .func = (f) }
#define __DELAYED_WORK_INITIALIZER(n, f, tflags) { .work = __WORK_INITIALIZER((n).work, (f)) }

#define DECLARE_WORK(n, f) struct work_struct n = __WORK_INITIALIZER(n, f)
#define DECLARE_DELAYED_WORK(n, f) struct delayed_work n = __DELAYED_WORK_INITIALIZER(n, f, 0)

#define INIT_WORK(_work, _func)						\
	do {								\
		struct work_struct *__cmwq_w = (_work);			\
		__cmwq_w->__cmwq_data = 0;				\
		__cmwq_w->__cmwq_carrier = NULL;			\
		__cmwq_w->func = (_func);				\
	} while (0)
#define INIT_WORK_ONSTACK(_work, _func) INIT_WORK(_work, _func)
#define INIT_DELAYED_WORK(_dwork, _func) INIT_WORK(&(_dwork)->work, (_func))
#define INIT_DELAYED_WORK_ONSTACK(_dwork, _func) INIT_DELAYED_WORK(_dwork, _func)
#define INIT_DEFERRABLE_WORK(_dwork, _func) INIT_DELAYED_WORK(_dwork, _func)
static inline void destroy_work_on_stack(struct work_struct *work) { (void)work; }
static inline void destroy_delayed_work_on_stack(struct delayed_work *work) { (void)work; }

static inline struct delayed_work *to_delayed_work(struct work_struct *work)
{
	return (struct delayed_work *)((char *)work - offsetof(struct delayed_work, work));
}

/* ---- the library ---- */

struct workqueue_struct *cmwq_alloc_workqueue(const char *name, unsigned int flags, int max_active);
void destroy_workqueue(struct workqueue_struct *wq);
bool queue_work_on(int cpu, struct workqueue_struct *wq, struct work_struct *work);
bool queue_delayed_work_on(int cpu, struct workqueue_struct *wq, struct delayed_work *dwork,
			   unsigned long delay);
bool mod_delayed_work_on(int cpu, struct workqueue_struct *wq, struct delayed_work *dwork,
			 unsigned long delay);
bool flush_work(struct work_struct *work);
bool flush_delayed_work(struct delayed_work *dwork);
bool cancel_work(struct work_struct *work);
bool cancel_work_sync(struct work_struct *work);
bool cancel_delayed_work(struct delayed_work *dwork);
bool cancel_delayed_work_sync(struct delayed_work *dwork);
bool disable_work(struct work_struct *work);
bool disable_work_sync(struct work_struct *work);
bool enable_work(struct work_struct *work);
bool disable_delayed_work(struct delayed_work *dwork);
bool disable_delayed_work_sync(struct delayed_work *dwork);
bool enable_delayed_work(struct delayed_work *dwork);
void flush_workqueue(struct workqueue_struct *wq);
void drain_workqueue(struct workqueue_struct *wq);
void workqueue_set_max_active(struct workqueue_struct *wq, int max_active);
struct work_struct *current_work(void);
bool cmwq_work_pending(const struct work_struct *work);
struct workqueue_struct *cmwq_system_wq(int kind);
/* cmwq additions */
int cmwq_workqueue_max_active(struct workqueue_struct *wq);
int cmwq_workqueue_set_affinity_scope(struct workqueue_struct *wq, int scope);
void cmwq_capi_set_tsan_hooks(void (*acquire)(void *), void (*release)(void *));

/* ---- system queues ---- */

#define system_wq		(cmwq_system_wq(0))
#define system_percpu_wq	(cmwq_system_wq(0))
#define system_highpri_wq	(cmwq_system_wq(1))
#define system_long_wq		(cmwq_system_wq(2))
#define system_unbound_wq	(cmwq_system_wq(3))
#define system_dfl_wq		(cmwq_system_wq(3))
/* WQ_POWER_EFFICIENT is ignored (see above), so the power-efficient queues
 * are the per-CPU ones, as in a kernel booted with the default
 * workqueue.power_efficient=0; and user space has no system suspend, so a
 * freezable queue is never frozen: it behaves as the queue without the
 * flag. */
#define system_power_efficient_wq		(cmwq_system_wq(0))
#define system_freezable_wq			(cmwq_system_wq(0))
#define system_freezable_power_efficient_wq	(cmwq_system_wq(0))

/* ---- the kernel's inline API ---- */

#define WQ_NAME_LEN 32

#if defined(__GNUC__)
__attribute__((format(printf, 1, 4)))
#endif
static inline struct workqueue_struct *alloc_workqueue(const char *fmt, unsigned int flags,
							int max_active, ...)
{
	/* One byte more than a name keeps: the library sees that it was cut. */
	char name[WQ_NAME_LEN + 1];
	va_list ap;

	va_start(ap, max_active);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	return cmwq_alloc_workqueue(name, flags, max_active);
}

#define alloc_ordered_workqueue(fmt, flags, ...) \
	alloc_workqueue(fmt, WQ_UNBOUND | __WQ_ORDERED | (flags), 1, ##__VA_ARGS__)

#define create_workqueue(name) alloc_workqueue("%s", __WQ_LEGACY | WQ_MEM_RECLAIM | WQ_PERCPU, 1, (name))
#define create_singlethread_workqueue(name) alloc_ordered_workqueue("%s", __WQ_LEGACY | WQ_MEM_RECLAIM, (name))

#define work_pending(work) cmwq_work_pending(work)
#define delayed_work_pending(w) work_pending(&(w)->work)

static inline bool queue_work(struct workqueue_struct *wq, struct work_struct *work)
{
	return queue_work_on(WORK_CPU_UNBOUND, wq, work);
}

/* The node is a hint: an unbound queue runs the item in the pod of the
 * calling CPU, a bound queue on the calling CPU. */
static inline bool queue_work_node(int node, struct workqueue_struct *wq,
				   struct work_struct *work)
{
	(void)node;
	return queue_work(wq, work);
}

static inline bool queue_delayed_work(struct workqueue_struct *wq, struct delayed_work *dwork,
				      unsigned long delay)
{
	return queue_delayed_work_on(WORK_CPU_UNBOUND, wq, dwork, delay);
}

static inline bool mod_delayed_work(struct workqueue_struct *wq, struct delayed_work *dwork,
				    unsigned long delay)
{
	return mod_delayed_work_on(WORK_CPU_UNBOUND, wq, dwork, delay);
}

static inline bool schedule_work_on(int cpu, struct work_struct *work)
{
	return queue_work_on(cpu, system_wq, work);
}

static inline bool schedule_work(struct work_struct *work)
{
	return queue_work(system_wq, work);
}

static inline bool schedule_delayed_work_on(int cpu, struct delayed_work *dwork,
					    unsigned long delay)
{
	return queue_delayed_work_on(cpu, system_wq, dwork, delay);
}

static inline bool schedule_delayed_work(struct delayed_work *dwork, unsigned long delay)
{
	return queue_delayed_work(system_wq, dwork, delay);
}

static inline void flush_scheduled_work(void)
{
	flush_workqueue(system_wq);
}

/* ---- ThreadSanitizer: the library is not instrumented, so tell TSan where
 * it synchronises (queue -> callback -> flush/cancel_sync). ---- */
#if defined(__SANITIZE_THREAD__)
#define CMWQ_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CMWQ_TSAN 1
#endif
#endif
#ifdef CMWQ_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
__attribute__((constructor, used)) static void cmwq_register_tsan_hooks(void)
{
	cmwq_capi_set_tsan_hooks(__tsan_acquire, __tsan_release);
}
/*
 * The library's own memory is synchronised by code TSan does not see (Rust
 * atomics and futexes), yet its memcpy/free calls go through TSan's
 * interceptors: ignore the interceptors it calls (link it as libcmwq.so).
 * Weak, so a program with its own suppressions wins (add this line to them).
 */
__attribute__((weak)) const char *__tsan_default_suppressions(void)
{
	return "called_from_lib:libcmwq.so\n";
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* CMWQ_LINUX_WORKQUEUE_H */
