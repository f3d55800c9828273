/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmwq: the Linux kernel's workqueue API in user space, over cmwq's engine.
 * Installed: cc prog.c $(pkg-config --cflags --libs cmwq); from a checkout,
 * see the README. Only standard C headers are needed; the kernel-compat
 * layer (include/kcompat) is optional, and its linux/rcupdate.h (which
 * needs liburcu, -lurcu-bp) is what gives queue_rcu_work a real RCU.
 *
 * VERSION AND ABI
 *
 * - CMWQ_VERSION_MAJOR/MINOR/PATCH below are the library's version. The
 *   shared library's SONAME is libcmwq.so.<MAJOR>; the major number changes
 *   with any ABI change (the layout of a struct below, a function's
 *   signature), so a program built against one major never loads another.
 *   cmwq_abi_layout() gives the library's size and alignment of each
 *   public struct (the C suite's t_abi.c compares them with the compiler's).
 * - The library exports only cmwq_* names and the kernel's own workqueue
 *   names; the kcompat helpers are cmwq_kc_* in the library, mapped to the
 *   kernel's names by the kcompat headers.
 *
 * OUT OF SCOPE (the kernel has these; this header does not)
 *
 * - The freezer (freeze_workqueues_begin, freeze_workqueues_busy,
 *   thaw_workqueues, show_freezable_workqueues): user space has no system
 *   suspend; WQ_FREEZABLE queues are never frozen.
 * - Boot and CPU hotplug steps (workqueue_init_early, workqueue_init,
 *   workqueue_init_topology, workqueue_prepare_cpu, workqueue_online_cpu,
 *   workqueue_offline_cpu, workqueue_unbound_exclude_cpumask): the library
 *   starts on first use and follows the process's CPUs by itself.
 * - delayed_work_timer_fn: there is no struct timer_list; delayed items use
 *   the library's timer.
 * - wq_watchdog_touch: the lockup watchdog counts items starting; it has no
 *   per-CPU touch stamp to reset.
 * - wq_worker_comm: it reads another task's worker state for ps; user
 *   space has no such hook (print_worker_info covers the calling thread).
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
 * - WQ_BH queues run their items on threads (no softirq context): a
 *   per-CPU WQ_BH queue is high priority with max_active 1, so each CPU
 *   runs its BH items one at a time in queue order (see system_bh_wq);
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
 * - queue_rcu_work(): the item is pending (work_pending, work_busy) while
 *   it waits for its grace period; flush_work() of it waits for the grace
 *   period and the run, as flush_rcu_work() does, instead of returning. A
 *   cancel in the grace period takes it (it does not run), where the
 *   kernel waits until the grace period has queued it and then takes it.
 *   destroy_workqueue() queues it at once, as it fires delayed timers.
 *   Without linux/rcupdate.h in the program there is no RCU reader to
 *   wait for: the item is queued at once.
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

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <linux/cpumask_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version (Cargo.toml's; a test keeps them equal). */
#define CMWQ_VERSION_MAJOR 0
#define CMWQ_VERSION_MINOR 1
#define CMWQ_VERSION_PATCH 0

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

/* A work item queued once an RCU grace period has ended (queue_rcu_work). */
struct rcu_work {
	struct work_struct work;
};

/* execute_in_process_context()'s item. */
struct execute_work {
	struct work_struct work;
};

struct task_struct;
struct lock_class_key;
struct lockdep_map;

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

/* work_busy()'s bits, and set_worker_desc()'s length with its NUL. */
enum {
	WORK_BUSY_PENDING	= 1 << 0,
	WORK_BUSY_RUNNING	= 1 << 1,
	WORKER_DESC_LEN		= 24,
};

/* The attributes of an unbound queue (apply_workqueue_attrs); get one from
 * alloc_workqueue_attrs(), which fills in every CPU and the defaults. */
struct workqueue_attrs {
	int nice;			/* -20..19 */
	cpumask_var_t cpumask;		/* the CPUs its workers may use */
	bool affn_strict;		/* keep workers inside their pod */
	enum wq_affn_scope affn_scope;
	bool ordered;			/* the library's own (ignored when applied) */
};

#define __WORK_INITIALIZER(n, f) { .__cmwq_data = 0, .__cmwq_carrier = NULL, .func = (f) }
#define __DELAYED_WORK_INITIALIZER(n, f, tflags) { .work = __WORK_INITIALIZER((n).work, (f)) }

#define DECLARE_WORK(n, f) struct work_struct n = __WORK_INITIALIZER(n, f)
#define DECLARE_DELAYED_WORK(n, f) struct delayed_work n = __DELAYED_WORK_INITIALIZER(n, f, 0)
/* A deferrable timer may wait for an idle CPU to wake in the kernel; here
 * every timer fires on time, so deferrable work is delayed work. */
#define DECLARE_DEFERRABLE_WORK(n, f) struct delayed_work n = __DELAYED_WORK_INITIALIZER(n, f, 0)

#define INIT_WORK(_work, _func)						\
	do {								\
		struct work_struct *__cmwq_w = (_work);			\
		__cmwq_w->__cmwq_data = 0;				\
		__cmwq_w->__cmwq_carrier = NULL;			\
		__cmwq_w->func = (_func);				\
	} while (0)
#define INIT_WORK_ONSTACK(_work, _func) INIT_WORK(_work, _func)
/* No lockdep here: the key is not used. */
#define INIT_WORK_ONSTACK_KEY(_work, _func, _key)			\
	do {								\
		(void)(_key);						\
		INIT_WORK(_work, _func);				\
	} while (0)
#define INIT_DELAYED_WORK(_dwork, _func) INIT_WORK(&(_dwork)->work, (_func))
#define INIT_DELAYED_WORK_ONSTACK(_dwork, _func) INIT_DELAYED_WORK(_dwork, _func)
#define INIT_DEFERRABLE_WORK(_dwork, _func) INIT_DELAYED_WORK(_dwork, _func)
#define INIT_DEFERRABLE_WORK_ONSTACK(_dwork, _func) INIT_DELAYED_WORK(_dwork, _func)
#define INIT_RCU_WORK(_rwork, _func) INIT_WORK(&(_rwork)->work, (_func))
#define INIT_RCU_WORK_ONSTACK(_rwork, _func) INIT_WORK(&(_rwork)->work, (_func))
static inline void destroy_work_on_stack(struct work_struct *work) { (void)work; }
static inline void destroy_delayed_work_on_stack(struct delayed_work *work) { (void)work; }
/* As the kernel without debug objects: no item is marked static. */
static inline unsigned int work_static(struct work_struct *work) { (void)work; return 0; }

static inline struct delayed_work *to_delayed_work(struct work_struct *work)
{
	return (struct delayed_work *)((char *)work - offsetof(struct delayed_work, work));
}

static inline struct rcu_work *to_rcu_work(struct work_struct *work)
{
	return (struct rcu_work *)((char *)work - offsetof(struct rcu_work, work));
}

/* The struct of type *var whose member work_fieldname is callback_work. */
#define from_work(var, callback_work, work_fieldname)			\
	((__typeof__(var))((char *)(callback_work) -			\
			   offsetof(__typeof__(*(var)), work_fieldname)))

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
unsigned int work_busy(struct work_struct *work);
bool queue_rcu_work(struct workqueue_struct *wq, struct rcu_work *rwork);
bool flush_rcu_work(struct rcu_work *rwork);
int schedule_on_each_cpu(work_func_t func);
struct workqueue_attrs *alloc_workqueue_attrs(void);
void free_workqueue_attrs(struct workqueue_attrs *attrs);
int apply_workqueue_attrs(struct workqueue_struct *wq, const struct workqueue_attrs *attrs);
void workqueue_set_min_active(struct workqueue_struct *wq, int min_active);
bool workqueue_congested(int cpu, struct workqueue_struct *wq);
int workqueue_sysfs_register(struct workqueue_struct *wq);
bool current_is_workqueue_rescuer(void);
void print_worker_info(const char *log_lvl, struct task_struct *task);
void show_all_workqueues(void);
void show_one_workqueue(struct workqueue_struct *wq);
void cmwq_set_worker_desc(const char *desc);
bool cmwq_kc_cpu_online(int cpu);
int cmwq_abi_layout(const char *name, size_t *size, size_t *align);
int cmwq_abi_nr_structs(void);
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
/* Unbound, for items that run long (a queue apart, so flushing
 * system_dfl_wq does not wait for them). */
#define system_dfl_long_wq	(cmwq_system_wq(6))
/* User space has no softirq: the BH queues are per-CPU, high-priority
 * queues with max_active 1, so a CPU's BH items run one at a time, in the
 * order they were queued, ahead of normal work, as a CPU's softirq runs
 * them; but on threads, so a BH item is never in atomic context (its
 * no-sleep rule is never broken, only not enforced). The two differ only
 * in name here. */
#define system_bh_wq		(cmwq_system_wq(4))
#define system_bh_highpri_wq	(cmwq_system_wq(5))
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
/* Never frozen (user space has no system suspend). */
#define create_freezable_workqueue(name) \
	alloc_workqueue("%s", __WQ_LEGACY | WQ_FREEZABLE | WQ_UNBOUND | WQ_MEM_RECLAIM, 1, (name))
/* No lockdep here: the map is not used. */
#define alloc_workqueue_lockdep_map(fmt, flags, max_active, lockdep_map, ...) \
	alloc_workqueue(fmt, flags, max_active, ##__VA_ARGS__)
#define alloc_ordered_workqueue_lockdep_map(fmt, flags, lockdep_map, ...) \
	alloc_ordered_workqueue(fmt, flags, ##__VA_ARGS__)

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

/* Enables work and, if that made it enabled, queues it (true: both). */
static inline bool enable_and_queue_work(struct workqueue_struct *wq, struct work_struct *work)
{
	if (enable_work(work)) {
		queue_work(wq, work);
		return true;
	}
	return false;
}

/* User space is always process context: fn runs now, on the calling
 * thread, and 0 says so (1 would mean it was scheduled). */
static inline int execute_in_process_context(work_func_t fn, struct execute_work *ew)
{
	fn(&ew->work);
	return 0;
}

/* Describes the running item's worker (see print_worker_info). */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static inline void set_worker_desc(const char *fmt, ...)
{
	char desc[WORKER_DESC_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(desc, sizeof(desc), fmt, ap);
	va_end(ap);
	cmwq_set_worker_desc(desc);
}

/* work_on_cpu(): runs fn(arg) on cpu's system_wq worker and returns its
 * value; the calling thread waits for it. */
struct cmwq_woc {
	struct work_struct work;
	long (*fn)(void *);
	void *arg;
	long ret;
};

static inline void cmwq_woc_run(struct work_struct *work)
{
	struct cmwq_woc *w = (struct cmwq_woc *)((char *)work - offsetof(struct cmwq_woc, work));

	w->ret = w->fn(w->arg);
}

static inline long work_on_cpu_key(int cpu, long (*fn)(void *), void *arg,
				   struct lock_class_key *key)
{
	struct cmwq_woc w;

	(void)key;
	INIT_WORK_ONSTACK(&w.work, cmwq_woc_run);
	w.fn = fn;
	w.arg = arg;
	w.ret = 0;
	schedule_work_on(cpu, &w.work);
	flush_work(&w.work);
	destroy_work_on_stack(&w.work);
	return w.ret;
}

/* As work_on_cpu(), or -ENODEV when cpu is not online (the kernel holds
 * CPU hotplug off meanwhile; here the online CPUs do not change). */
static inline long work_on_cpu_safe_key(int cpu, long (*fn)(void *), void *arg,
					struct lock_class_key *key)
{
	if (!cmwq_kc_cpu_online(cpu))
		return -ENODEV;
	return work_on_cpu_key(cpu, fn, arg, key);
}

#define work_on_cpu(_cpu, _fn, _arg) work_on_cpu_key(_cpu, _fn, _arg, NULL)
#define work_on_cpu_safe(_cpu, _fn, _arg) work_on_cpu_safe_key(_cpu, _fn, _arg, NULL)

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
 * The same holds for liburcu (linux/rcupdate.h), whose grace periods TSan
 * cannot see either. Weak, so a program with its own suppressions wins
 * (add these lines to them).
 */
__attribute__((weak)) const char *__tsan_default_suppressions(void)
{
	return "called_from_lib:libcmwq.so\ncalled_from_lib:liburcu\n";
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* CMWQ_LINUX_WORKQUEUE_H */
