// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The basics: container_of from the callback, the pending bit, work_pending,
 * flush_work, current_work, DECLARE_WORK, queue_work_on, the system queues.
 */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/completion.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include "check.h"

struct item {
	int before;
	struct work_struct work;
	int after;
	atomic_t runs;
	atomic_t started;
	struct work_struct *seen_current;
	int seen_cpu;
	struct completion go;	/* the callback waits on it */
	bool wait_go;
};

static void item_fn(struct work_struct *w)
{
	struct item *it = container_of(w, struct item, work);

	CHECK_EQ(it->before, 0x1234);
	CHECK_EQ(it->after, 0x5678);
	it->seen_current = current_work();
	it->seen_cpu = smp_processor_id();
	atomic_inc(&it->started);
	if (it->wait_go)
		wait_for_completion(&it->go);
	atomic_inc(&it->runs);
}

static atomic_t declared_runs;
static void declared_fn(struct work_struct *w)
{
	(void)w;
	atomic_inc(&declared_runs);
}
static DECLARE_WORK(declared, declared_fn);

static void test_pending_and_flush(void)
{
	struct workqueue_struct *wq = alloc_ordered_workqueue("capi_basic", 0);
	struct item blocker = { .before = 0x1234, .after = 0x5678, .wait_go = true };
	struct item it = { .before = 0x1234, .after = 0x5678, .wait_go = true };

	CHECK(wq);
	init_completion(&blocker.go);
	init_completion(&it.go);
	INIT_WORK(&blocker.work, item_fn);
	INIT_WORK(&it.work, item_fn);
	CHECK(!work_pending(&it.work));
	CHECK(!flush_work(&it.work));		/* idle: nothing to wait for */
	CHECK(current_work() == NULL);

	/* Ordered: `it` stays pending behind the blocker. */
	CHECK(queue_work(wq, &blocker.work));
	CHECK(queue_work(wq, &it.work));
	CHECK(work_pending(&it.work));
	CHECK(!queue_work(wq, &it.work));	/* already pending */
	complete(&blocker.go);
	/* Wait until `it` runs (it blocks on go): PENDING is cleared before the
	 * callback, so it can be queued again, and runs again after. */
	while (!atomic_read(&it.started))
		msleep(1);
	CHECK(!work_pending(&it.work));
	CHECK(queue_work(wq, &it.work));
	CHECK(work_pending(&it.work));
	CHECK(!queue_work(wq, &it.work));
	complete_all(&it.go);
	flush_work(&it.work);	/* true unless both runs ended already */
	CHECK(!work_pending(&it.work));
	CHECK_EQ(atomic_read(&it.runs), 2);
	CHECK(it.seen_current == &it.work);
	CHECK(blocker.seen_current == &blocker.work);
	CHECK(current_work() == NULL);
	destroy_workqueue(wq);
	PASS("pending bit, work_pending, flush_work, current_work, container_of");
}

static void test_queue_on(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_bound_%d", 0, 0, 7);
	int cpu;

	CHECK(wq);
	for_each_online_cpu(cpu) {
		struct item it = { .before = 0x1234, .after = 0x5678, .seen_cpu = -1 };

		INIT_WORK(&it.work, item_fn);
		CHECK(queue_work_on(cpu, wq, &it.work));
		CHECK(flush_work(&it.work) || atomic_read(&it.runs) == 1);
		CHECK_EQ(atomic_read(&it.runs), 1);
		CHECK_EQ(it.seen_cpu, cpu);	/* bound pools run on their CPU */
	}
	destroy_workqueue(wq);
	PASS("queue_work_on runs on the CPU asked for (bound queue)");
}

static void test_system_queues(void)
{
	struct workqueue_struct *qs[] = { system_wq, system_highpri_wq, system_long_wq,
					  system_unbound_wq, system_power_efficient_wq,
					  system_freezable_wq, system_freezable_power_efficient_wq };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(qs); i++) {
		struct item it = { .before = 0x1234, .after = 0x5678 };

		CHECK(qs[i]);
		INIT_WORK(&it.work, item_fn);
		CHECK(queue_work(qs[i], &it.work));
		flush_work(&it.work);
		CHECK_EQ(atomic_read(&it.runs), 1);
	}
	{
		struct item it = { .before = 0x1234, .after = 0x5678 };

		INIT_WORK(&it.work, item_fn);
		CHECK(queue_work_node(0, system_unbound_wq, &it.work));
		flush_work(&it.work);
		CHECK_EQ(atomic_read(&it.runs), 1);
	}
	CHECK(schedule_work(&declared));
	flush_scheduled_work();
	CHECK_EQ(atomic_read(&declared_runs), 1);
	destroy_workqueue(system_wq);	/* ignored, with a message */
	CHECK(schedule_work(&declared));
	flush_work(&declared);
	CHECK_EQ(atomic_read(&declared_runs), 2);
	PASS("system queues, schedule_work, queue_work_node, DECLARE_WORK");
}

int main(void)
{
	test_pending_and_flush();
	test_queue_on();
	test_system_queues();
	return 0;
}
