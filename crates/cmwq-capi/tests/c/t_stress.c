// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Every call at once on a few shared items, from a thread per CPU (and one
 * more): queue_work(_on), queue_delayed_work, cancel_work(_sync),
 * disable_work(_sync) + enable_work, flush_work, work_pending. Invariants:
 * an item never runs on two workers at once, and after everything settles
 * the callbacks ran exactly (successful queues) - (calls that returned true
 * because they took a pending run away) times.
 */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/kthread.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include "check.h"

#define NITEMS 6
#define OPS 6000

struct item {
	struct delayed_work dw;
	atomic_t running, runs;
};

static struct item items[NITEMS];
static struct workqueue_struct *wq;
static atomic_t queued, taken, overlaps;

static void item_fn(struct work_struct *w)
{
	struct item *it = container_of(to_delayed_work(w), struct item, dw);

	if (atomic_inc_return(&it->running) != 1)
		atomic_inc(&overlaps);
	if (atomic_read(&it->runs) % 3 == 0)
		udelay(3);
	atomic_dec(&it->running);
	atomic_inc(&it->runs);
}

static int hammer(void *arg)
{
	unsigned int seed = (unsigned int)(long)arg * 2654435761u + 1;
	int i, ncpu = num_online_cpus();

	for (i = 0; i < OPS; i++) {
		struct item *it;
		struct work_struct *w;

		seed = seed * 1103515245u + 12345u;
		it = &items[(seed >> 8) % NITEMS];
		w = &it->dw.work;
		switch ((seed >> 16) % 10) {
		case 0:
		case 1:
		case 2:
			atomic_add(queue_work(wq, w), &queued);
			break;
		case 3:
			atomic_add(queue_work_on((int)(seed >> 20) % ncpu, wq, w), &queued);
			break;
		case 4:
			atomic_add(queue_delayed_work(wq, &it->dw, (seed >> 24) % 3), &queued);
			break;
		case 5:
			atomic_add(cancel_work(w), &taken);
			break;
		case 6:
			atomic_add(cancel_delayed_work_sync(&it->dw), &taken);
			break;
		case 7:
			atomic_add(disable_work(w), &taken);
			(void)work_pending(w);
			enable_work(w);
			break;
		case 8:
			atomic_add(disable_work_sync(w), &taken);
			enable_work(w);
			break;
		default:
			flush_work(w);
			break;
		}
	}
	return 0;
}

int main(void)
{
	int n = num_online_cpus() + 1, i, runs = 0;
	struct task_struct *t[65];

	wq = alloc_workqueue("capi_stress", WQ_UNBOUND, 0);
	CHECK(wq);
	for (i = 0; i < NITEMS; i++)
		INIT_DELAYED_WORK(&items[i].dw, item_fn);
	n = min(n, 65);
	for (i = 0; i < n; i++) {
		t[i] = kthread_run(hammer, (void *)(long)i, "hammer/%d", i);
		CHECK(!IS_ERR(t[i]));
	}
	for (i = 0; i < n; i++)
		CHECK_EQ(kthread_stop(t[i]), 0);
	for (i = 0; i < NITEMS; i++) {
		flush_delayed_work(&items[i].dw);
		CHECK(!delayed_work_pending(&items[i].dw));
	}
	flush_workqueue(wq);
	for (i = 0; i < NITEMS; i++)
		runs += atomic_read(&items[i].runs);
	CHECK_EQ(atomic_read(&overlaps), 0);
	CHECK_EQ(runs, atomic_read(&queued) - atomic_read(&taken));
	printf("ok stress: %d queued, %d taken back, %d ran, never two at once\n",
	       atomic_read(&queued), atomic_read(&taken), runs);
	destroy_workqueue(wq);
	return 0;
}
