// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The small ones: enable_and_queue_work, from_work, deferrable work,
 * execute_in_process_context, work_static, INIT_WORK_ONSTACK_KEY,
 * to_rcu_work.
 */
#include <pthread.h>
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/atomic.h>
#include "check.h"

struct item {
	int tag;
	struct work_struct work;
	atomic_t runs;
	pthread_t thread;
};

static void item_fn(struct work_struct *w)
{
	struct item *it = from_work(it, w, work);

	CHECK_EQ(it->tag, 0x5eed);
	it->thread = pthread_self();
	atomic_inc(&it->runs);
}

static void test_enable_and_queue(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_eq", WQ_UNBOUND, 0);
	struct item it = { .tag = 0x5eed };

	CHECK(wq);
	INIT_WORK(&it.work, item_fn);
	disable_work(&it.work);
	disable_work(&it.work);
	CHECK(!queue_work(wq, &it.work));
	CHECK(!enable_and_queue_work(wq, &it.work));	/* still disabled once */
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&it.runs), 0);
	CHECK(enable_and_queue_work(wq, &it.work));	/* enabled: queued */
	flush_work(&it.work);
	CHECK_EQ(atomic_read(&it.runs), 1);
	destroy_workqueue(wq);
	PASS("enable_and_queue_work, from_work");
}

static atomic_t deferred_runs;
static void deferred_fn(struct work_struct *w)
{
	(void)w;
	atomic_inc(&deferred_runs);
}
static DECLARE_DEFERRABLE_WORK(deferred, deferred_fn);

static void test_deferrable(void)
{
	struct delayed_work onstack;

	CHECK(schedule_delayed_work(&deferred, 1));
	CHECK(delayed_work_pending(&deferred));
	flush_delayed_work(&deferred);
	CHECK_EQ(atomic_read(&deferred_runs), 1);
	INIT_DEFERRABLE_WORK_ONSTACK(&onstack, deferred_fn);
	CHECK(queue_delayed_work(system_wq, &onstack, 1));
	flush_delayed_work(&onstack);
	destroy_delayed_work_on_stack(&onstack);
	CHECK_EQ(atomic_read(&deferred_runs), 2);
	PASS("DECLARE_DEFERRABLE_WORK, INIT_DEFERRABLE_WORK_ONSTACK");
}

struct exec_item {
	struct execute_work ew;
	int runs;
	pthread_t thread;
};

static void exec_fn(struct work_struct *w)
{
	struct exec_item *x = container_of(w, struct exec_item, ew.work);

	x->runs++;
	x->thread = pthread_self();
}

static void test_execute_and_small(void)
{
	struct exec_item x = { .runs = 0 };
	struct item it = { .tag = 0x5eed };
	struct rcu_work rw;
	struct lock_class_key *key = NULL;

	/* Process context: it runs now, on this thread, and 0 says so. */
	CHECK_EQ(execute_in_process_context(exec_fn, &x.ew), 0);
	CHECK_EQ(x.runs, 1);
	CHECK(pthread_equal(x.thread, pthread_self()));
	INIT_WORK_ONSTACK_KEY(&it.work, item_fn, key);
	CHECK_EQ(work_static(&it.work), 0);
	CHECK(queue_work(system_wq, &it.work));
	flush_work(&it.work);
	CHECK_EQ(atomic_read(&it.runs), 1);
	CHECK(!pthread_equal(it.thread, pthread_self()));
	INIT_RCU_WORK(&rw, item_fn);
	CHECK(to_rcu_work(&rw.work) == &rw);
	PASS("execute_in_process_context, work_static, INIT_WORK_ONSTACK_KEY, to_rcu_work");
}

int main(void)
{
	test_enable_and_queue();
	test_deferrable();
	test_execute_and_small();
	return 0;
}
