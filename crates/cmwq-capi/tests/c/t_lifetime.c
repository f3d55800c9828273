// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The kernel's lifetime idioms: INIT_WORK again on an idle item in a loop
 * (as lib/test_workqueue.c does), freeing the container after
 * cancel_work_sync / flush_work / disable_work_sync, or from the item's own
 * callback. The last part puts each work_struct alone in an mmap'd page and
 * unmaps it at those points: if the library touched a work_struct after its
 * callback returned (or after the sync call), the process would crash.
 * Under ASan (with leak detection) nothing may be left behind.
 */
#include <sys/mman.h>
#include <unistd.h>
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/slab.h>
#include "check.h"

static struct workqueue_struct *wq;

/* ---- re-INIT in a loop, one item in flight per producer ---- */
struct ctx {
	struct completion done;
	struct work_struct work;
	long runs;
};

static void ctx_fn(struct work_struct *w)
{
	struct ctx *c = container_of(w, struct ctx, work);

	c->runs++;
	complete(&c->done);
}

static int reinit_loop(void *arg)
{
	struct ctx *c = arg;
	int i;

	for (i = 0; i < 20000; i++) {
		reinit_completion(&c->done);
		INIT_WORK(&c->work, ctx_fn);
		CHECK(queue_work(wq, &c->work));
		wait_for_completion(&c->done);
	}
	return 0;
}

static void test_reinit(void)
{
	int n = num_online_cpus(), i;
	struct ctx *cs = kcalloc(n, sizeof(*cs), GFP_KERNEL);
	struct task_struct **ts = kcalloc(n, sizeof(*ts), GFP_KERNEL);

	CHECK(cs && ts);
	for (i = 0; i < n; i++) {
		init_completion(&cs[i].done);
		ts[i] = kthread_create(reinit_loop, &cs[i], "reinit/%d", i);
		CHECK(!IS_ERR(ts[i]));
		kthread_bind(ts[i], i % n);
		wake_up_process(ts[i]);
	}
	for (i = 0; i < n; i++)
		CHECK_EQ(kthread_stop(ts[i]), 0);
	flush_workqueue(wq);
	for (i = 0; i < n; i++)
		CHECK_EQ(cs[i].runs, 20000);
	kfree(cs);
	kfree(ts);
	PASS("INIT_WORK again on an idle item, 20000 times per producer");
}

/* ---- freeing the container ---- */
struct obj {
	long pad[3];
	struct work_struct work;
	long more[5];
};
static atomic_t obj_runs;

static void obj_fn(struct work_struct *w)
{
	struct obj *o = container_of(w, struct obj, work);

	o->more[0]++;
	atomic_inc(&obj_runs);
}

static void obj_free_self_fn(struct work_struct *w)
{
	struct obj *o = container_of(w, struct obj, work);

	o->more[0]++;
	kfree(o);
	atomic_inc(&obj_runs);
}

static void test_free(void)
{
	int i;

	for (i = 0; i < 2000; i++) {
		struct obj *o = kzalloc(sizeof(*o), GFP_KERNEL);

		CHECK(o);
		INIT_WORK(&o->work, obj_fn);
		CHECK(queue_work(wq, &o->work));
		switch (i % 3) {
		case 0:
			cancel_work_sync(&o->work);
			break;
		case 1:
			flush_work(&o->work);
			break;
		default:
			disable_work_sync(&o->work);
			break;
		}
		kfree(o);
	}
	PASS("free after cancel_work_sync / flush_work / disable_work_sync");

	atomic_set(&obj_runs, 0);
	for (i = 0; i < 2000; i++) {
		struct obj *o = kzalloc(sizeof(*o), GFP_KERNEL);

		CHECK(o);
		INIT_WORK(&o->work, obj_free_self_fn);
		CHECK(queue_work(wq, &o->work));
	}
	flush_workqueue(wq);
	CHECK_EQ(atomic_read(&obj_runs), 2000);
	PASS("free from the item's own callback");
}

/* ---- unmapped right after: nothing may touch it again ---- */
static long page_size;
static struct completion unmapped;

static void page_fn(struct work_struct *w)
{
	void *page = (void *)((unsigned long)w & ~(page_size - 1));

	CHECK(munmap(page, page_size) == 0);
	complete(&unmapped);
}

static void page_noop_fn(struct work_struct *w)
{
	(void)w;
}

static struct work_struct *map_work(work_func_t fn)
{
	void *p = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct work_struct *w = (struct work_struct *)((char *)p + page_size - sizeof(*w));

	CHECK(p != MAP_FAILED);
	INIT_WORK(w, fn);
	return w;
}

static void unmap_work(struct work_struct *w)
{
	CHECK(munmap((void *)((unsigned long)w & ~(page_size - 1)), page_size) == 0);
}

static void test_unmapped(void)
{
	struct work_struct other;
	int i;

	page_size = sysconf(_SC_PAGESIZE);
	init_completion(&unmapped);
	INIT_WORK(&other, page_noop_fn);
	for (i = 0; i < 500; i++) {
		struct work_struct *w = map_work(page_fn);

		CHECK(queue_work(wq, w));
		wait_for_completion(&unmapped);
		/* Keep the engine busy while the worker finishes the old cycle. */
		queue_work(wq, &other);
		flush_work(&other);
	}
	flush_workqueue(wq);
	for (i = 0; i < 600; i++) {
		struct work_struct *w = map_work(page_noop_fn);

		CHECK(queue_work(wq, w));
		if (i % 3 == 0)
			cancel_work_sync(w);
		else if (i % 3 == 1)
			flush_work(w);
		else
			disable_work_sync(w);
		unmap_work(w);
		queue_work(wq, &other);
	}
	flush_workqueue(wq);
	PASS("the library never touches a work_struct after its callback or sync call");
}

/* ---- on the stack ---- */
static void stack_round(void)
{
	struct obj o;

	memset(&o, 0, sizeof(o));

	INIT_WORK_ONSTACK(&o.work, obj_fn);
	CHECK(queue_work(wq, &o.work));
	flush_work(&o.work);
	CHECK_EQ(o.more[0], 1);
	destroy_work_on_stack(&o.work);
}

int main(void)
{
	int i;

	wq = alloc_workqueue("capi_lifetime", WQ_UNBOUND, 0);
	CHECK(wq);
	test_reinit();
	test_free();
	test_unmapped();
	for (i = 0; i < 1000; i++)
		stack_round();
	PASS("INIT_WORK_ONSTACK, flush_work, reuse of the stack");
	destroy_workqueue(wq);
	return 0;
}
