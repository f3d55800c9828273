// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Per-CPU calls: schedule_on_each_cpu, work_on_cpu(_safe), the BH system
 * queues (one item at a time per CPU, in queue order) and
 * system_dfl_long_wq.
 */
#include <pthread.h>
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include "check.h"

static atomic_t each_runs;
static atomic_t each_cpu_seen[CMWQ_NR_CPUS];

static void each_fn(struct work_struct *w)
{
	(void)w;
	atomic_inc(&each_cpu_seen[smp_processor_id()]);
	atomic_inc(&each_runs);
}

static void test_schedule_on_each_cpu(void)
{
	int cpu, distinct = 0;

	CHECK_EQ(schedule_on_each_cpu(each_fn), 0);
	/* Every run finished before it returned, one per online CPU, each on
	 * its own CPU (system_wq's workers are bound). */
	CHECK_EQ(atomic_read(&each_runs), num_online_cpus());
	for_each_online_cpu(cpu) {
		CHECK_EQ(atomic_read(&each_cpu_seen[cpu]), 1);
		distinct++;
	}
	CHECK_EQ(distinct, num_online_cpus());
	PASS("schedule_on_each_cpu");
}

struct woc_arg {
	int value;
	int cpu;
	pthread_t thread;
};

static long woc_fn(void *p)
{
	struct woc_arg *a = p;

	a->cpu = smp_processor_id();
	a->thread = pthread_self();
	return 2L * a->value;
}

static void test_work_on_cpu(void)
{
	int cpu;

	for_each_online_cpu(cpu) {
		struct woc_arg a = { .value = 21 + cpu, .cpu = -1 };

		CHECK_EQ(work_on_cpu(cpu, woc_fn, &a), 2L * (21 + cpu));
		CHECK_EQ(a.cpu, cpu);
		CHECK(!pthread_equal(a.thread, pthread_self()));
		a.cpu = -1;
		CHECK_EQ(work_on_cpu_safe(cpu, woc_fn, &a), 2L * (21 + cpu));
		CHECK_EQ(a.cpu, cpu);
	}
	{
		struct woc_arg a = { .value = 1, .cpu = -1 };

		CHECK_EQ(work_on_cpu_safe(nr_cpu_ids + 3, woc_fn, &a), -ENODEV);
		CHECK_EQ(a.cpu, -1);	/* not run */
	}
	PASS("work_on_cpu, work_on_cpu_safe");
}

#define NR_BH 24
struct bh_item {
	struct work_struct work;
	int index;
};
static atomic_t bh_in, bh_max, bh_next;
static int bh_order[NR_BH];

static void bh_fn(struct work_struct *w)
{
	struct bh_item *it = container_of(w, struct bh_item, work);
	int in = atomic_inc_return(&bh_in), m;

	while ((m = atomic_read(&bh_max)) < in && atomic_cmpxchg(&bh_max, m, in) != m)
		;
	bh_order[atomic_inc_return(&bh_next) - 1] = it->index;
	/* A sleep: a concurrency-managed queue would start the next item on
	 * another worker meanwhile; a BH queue must not. */
	msleep(2);
	atomic_dec(&bh_in);
}

static void bh_check(struct workqueue_struct *wq, const char *name)
{
	static struct bh_item items[NR_BH];
	int cpu = cmwq_kc_next_online_cpu(-1), i;

	atomic_set(&bh_in, 0);
	atomic_set(&bh_max, 0);
	atomic_set(&bh_next, 0);
	for (i = 0; i < NR_BH; i++) {
		INIT_WORK(&items[i].work, bh_fn);
		items[i].index = i;
		CHECK(queue_work_on(cpu, wq, &items[i].work));
	}
	for (i = 0; i < NR_BH; i++)
		flush_work(&items[i].work);
	CHECK_EQ(atomic_read(&bh_next), NR_BH);
	CHECK_EQ(atomic_read(&bh_max), 1);	/* one at a time on the CPU */
	for (i = 0; i < NR_BH; i++)
		CHECK_EQ(bh_order[i], i);	/* in queue order */
	PASS(name);
}

static atomic_t long_runs;
static void long_fn(struct work_struct *w)
{
	(void)w;
	atomic_inc(&long_runs);
}

int main(void)
{
	struct workqueue_struct *bh;
	DECLARE_WORK(lw, long_fn);

	test_schedule_on_each_cpu();
	test_work_on_cpu();
	bh_check(system_bh_wq, "system_bh_wq: in order, one at a time");
	bh_check(system_bh_highpri_wq, "system_bh_highpri_wq: in order, one at a time");
	bh = alloc_workqueue("capi_bh", WQ_BH, 0);
	CHECK(bh);
	bh_check(bh, "alloc_workqueue(WQ_BH): in order, one at a time");
	destroy_workqueue(bh);
	CHECK(system_dfl_long_wq != system_dfl_wq && system_dfl_long_wq != system_long_wq);
	CHECK(queue_work(system_dfl_long_wq, &lw));
	flush_work(&lw);
	CHECK_EQ(atomic_read(&long_runs), 1);
	PASS("system_dfl_long_wq");
	return 0;
}
