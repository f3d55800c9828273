// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * What is busy: work_busy, workqueue_congested, show_one_workqueue and
 * show_all_workqueues, set_worker_desc with print_worker_info, and
 * current_is_workqueue_rescuer.
 */
#include <pthread.h>
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/completion.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/sched.h>
#include "check.h"

struct gate {
	struct work_struct work;
	struct completion started, go;
	atomic_t runs;
	bool describe, print;
	bool rescuer;
	pthread_t thread;
	char info[512];
};

static void gate_fn(struct work_struct *w)
{
	struct gate *g = container_of(w, struct gate, work);

	g->rescuer = current_is_workqueue_rescuer();
	g->thread = pthread_self();
	if (g->print) {
		char *out;

		capture_begin();
		if (g->describe)
			set_worker_desc("gate %d of a description longer than 23", 42);
		print_worker_info(KERN_INFO, current);
		out = capture_end();
		snprintf(g->info, sizeof(g->info), "%s", out);
		free(out);
	}
	complete(&g->started);
	wait_for_completion(&g->go);
	atomic_inc(&g->runs);
}

static void gate_init(struct gate *g)
{
	memset(g, 0, sizeof(*g));
	INIT_WORK(&g->work, gate_fn);
	init_completion(&g->started);
	init_completion(&g->go);
}

static void test_busy_and_congested(void)
{
	struct workqueue_struct *wq = alloc_ordered_workqueue("capi_busy", 0);
	struct gate a, b;
	char *out;

	CHECK(wq);
	gate_init(&a);
	gate_init(&b);
	CHECK_EQ(work_busy(&a.work), 0);
	CHECK(!workqueue_congested(WORK_CPU_UNBOUND, wq));
	CHECK(queue_work(wq, &a.work));
	wait_for_completion(&a.started);
	CHECK_EQ(work_busy(&a.work), WORK_BUSY_RUNNING);
	CHECK(!workqueue_congested(WORK_CPU_UNBOUND, wq));
	CHECK(queue_work(wq, &b.work));		/* held back behind a */
	CHECK_EQ(work_busy(&b.work), WORK_BUSY_PENDING);
	CHECK(workqueue_congested(WORK_CPU_UNBOUND, wq));
	reinit_completion(&a.started);
	CHECK(queue_work(wq, &a.work));		/* again, while it runs */
	CHECK_EQ(work_busy(&a.work), WORK_BUSY_PENDING | WORK_BUSY_RUNNING);

	capture_begin();
	show_one_workqueue(wq);
	out = capture_end();
	CHECK(strstr(out, "workqueue capi_busy: flags=0x"));
	CHECK(strstr(out, "in-flight: "));
	CHECK(strstr(out, "gate_fn"));
	CHECK(!strstr(out, "Showing busy workqueues"));
	free(out);
	capture_begin();
	show_all_workqueues();
	out = capture_end();
	CHECK(strstr(out, "Showing busy workqueues and worker pools:\n"));
	CHECK(strstr(out, "workqueue capi_busy: flags=0x"));
	free(out);

	complete_all(&a.go);
	complete_all(&b.go);
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&a.runs), 2);
	CHECK_EQ(atomic_read(&b.runs), 1);
	CHECK_EQ(work_busy(&a.work), 0);
	CHECK_EQ(work_busy(&b.work), 0);
	CHECK(!workqueue_congested(WORK_CPU_UNBOUND, wq));
	capture_begin();
	show_one_workqueue(wq);			/* idle: nothing */
	out = capture_end();
	CHECK_EQ(strlen(out), 0);
	free(out);
	CHECK(!a.rescuer && !b.rescuer && !current_is_workqueue_rescuer());
	destroy_workqueue(wq);
	PASS("work_busy, workqueue_congested, show_one/all_workqueues");
}

/* A bound queue: congestion is per CPU. */
static void test_congested_per_cpu(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_cong", WQ_PERCPU, 1);
	int cpu = cmwq_kc_next_online_cpu(-1), other = cmwq_kc_next_online_cpu(cpu);
	struct gate a, b;

	CHECK(wq);
	gate_init(&a);
	gate_init(&b);
	CHECK(queue_work_on(cpu, wq, &a.work));
	wait_for_completion(&a.started);
	CHECK(queue_work_on(cpu, wq, &b.work));
	CHECK(workqueue_congested(cpu, wq));
	if (other < nr_cpu_ids)
		CHECK(!workqueue_congested(other, wq));
	complete_all(&a.go);
	complete_all(&b.go);
	flush_workqueue(wq);
	CHECK(!workqueue_congested(cpu, wq));
	destroy_workqueue(wq);
	PASS("workqueue_congested: per CPU on a bound queue");
}

static void test_worker_info(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_info", WQ_UNBOUND, 0);
	struct gate g;
	char *out;

	CHECK(wq);
	gate_init(&g);
	g.print = g.describe = true;
	complete_all(&g.go);
	CHECK(queue_work(wq, &g.work));
	flush_work(&g.work);
	/* The description is cut to WORKER_DESC_LEN - 1 bytes. */
	CHECK(strstr(g.info, "Workqueue: capi_info gate_fn (gate 42 of a descriptio)\n"));
	/* It went with the item: a later run on the same worker that sets none
	 * shows none (a bound queue's CPU reuses its last idle worker first). */
	for (int i = 0, same = 0; !same; i++) {
		int cpu = cmwq_kc_next_online_cpu(-1);
		pthread_t first;

		CHECK(i < 100);
		gate_init(&g);
		g.print = g.describe = true;
		complete_all(&g.go);
		CHECK(queue_work_on(cpu, system_wq, &g.work));
		flush_work(&g.work);
		first = g.thread;
		gate_init(&g);
		g.print = true;
		complete_all(&g.go);
		CHECK(queue_work_on(cpu, system_wq, &g.work));
		flush_work(&g.work);
		same = pthread_equal(first, g.thread);
		if (same)
			CHECK(strstr(g.info, "Workqueue: events gate_fn\n"));
	}
	/* Not a worker: nothing. */
	capture_begin();
	set_worker_desc("main");
	print_worker_info(KERN_INFO, current);
	out = capture_end();
	CHECK_EQ(strlen(out), 0);
	free(out);
	destroy_workqueue(wq);
	PASS("set_worker_desc and print_worker_info");
}

int main(void)
{
	test_busy_and_congested();
	test_congested_per_cpu();
	test_worker_info();
	return 0;
}
