// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The edges the header documents: a NULL name, max_active out of range and a
 * long name (each said once on stderr, in the kernel's words), and
 * cancel_delayed_work_sync() from the item's own callback (refused whole: the
 * cycle the callback armed still runs; cancel_delayed_work() drops it).
 */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/atomic.h>
#include <linux/completion.h>
#include "check.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static atomic_t plain_runs;
static struct completion plain_done;

static void plain_fn(struct work_struct *w)
{
	atomic_inc(&plain_runs);
	complete(&plain_done);
}

static void null_name_and_limits(void)
{
	struct work_struct w;
	struct workqueue_struct *wq;
	char *err;

	/* As alloc_workqueue(NULL, ...): a queue with an empty name. */
	wq = cmwq_alloc_workqueue(NULL, WQ_UNBOUND, 0);
	CHECK(wq);
	init_completion(&plain_done);
	INIT_WORK(&w, plain_fn);
	CHECK(queue_work(wq, &w));
	wait_for_completion(&plain_done);
	destroy_workqueue(wq);
	PASS("cmwq_alloc_workqueue(NULL, ...) makes a queue with an empty name");

	struct { int asked, got; } cases[] = {
		{ -1, 1 }, { INT_MIN, 1 }, { 10000, WQ_MAX_ACTIVE }, { 5, 5 }, { 0, WQ_DFL_ACTIVE },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char want[128];

		capture_begin();
		wq = alloc_workqueue("edges_%zu", WQ_UNBOUND, cases[i].asked, i);
		err = capture_end();
		CHECK(wq);
		CHECK_EQ(cmwq_workqueue_max_active(wq), cases[i].got);
		snprintf(want, sizeof(want),
			 "workqueue: max_active %d requested for edges_%zu is out of range, "
			 "clamping between 1 and %d\n", cases[i].asked, i, WQ_MAX_ACTIVE);
		/* Said once when out of range, not at all otherwise. */
		CHECK_EQ(count(err, want), cases[i].asked == cases[i].got || cases[i].asked == 0 ? 0 : 1);
		CHECK_EQ(count(err, "out of range"), cases[i].asked == cases[i].got || cases[i].asked == 0 ? 0 : 1);
		free(err);
		if (i == 0) {
			capture_begin();
			workqueue_set_max_active(wq, 0);
			err = capture_end();
			CHECK_EQ(cmwq_workqueue_max_active(wq), 1);
			CHECK_EQ(count(err, "max_active 0 requested for edges_0 is out of range"), 1);
			free(err);
		}
		destroy_workqueue(wq);
	}
	PASS("max_active -1, INT_MIN, 10000 clamped, each said once on stderr");

	/* 40 characters: cut to 31, said once per process. */
	capture_begin();
	wq = alloc_workqueue("%s", WQ_UNBOUND, 0, "a_workqueue_name_of_forty_characters_xy");
	struct workqueue_struct *wq2 = alloc_workqueue("another_name_longer_than_31_characters", 0, 0);
	err = capture_end();
	CHECK(wq && wq2);
	CHECK_EQ(count(err, "workqueue: name exceeds WQ_NAME_LEN. Truncating to: "
			    "a_workqueue_name_of_forty_chara\n"), 1);
	CHECK_EQ(count(err, "Truncating"), 1);
	free(err);
	destroy_workqueue(wq);
	destroy_workqueue(wq2);
	PASS("a name of more than 31 characters is cut, said once");
}

/* The callback arms its own item again, then cancels it: with _sync (refused
 * whole, the armed cycle runs) or without (dropped). */
static struct delayed_work self_dw;
static atomic_t self_runs;
static int use_sync;
static atomic_t cancel_result = ATOMIC_INIT(-1);
static struct completion self_second;

static void self_fn(struct work_struct *w)
{
	if (atomic_inc_return(&self_runs) == 1) {
		CHECK(queue_delayed_work(system_wq, &self_dw, 1));
		atomic_set(&cancel_result, use_sync ? cancel_delayed_work_sync(&self_dw)
						   : cancel_delayed_work(&self_dw));
	} else {
		complete(&self_second);
	}
}

static void cancel_sync_from_own_callback(void)
{
	char *err;

	use_sync = 1;
	atomic_set(&self_runs, 0);
	init_completion(&self_second);
	INIT_DELAYED_WORK(&self_dw, self_fn);
	capture_begin();
	CHECK(queue_delayed_work(system_wq, &self_dw, 0));
	/* The re-armed cycle runs: the second run signals. */
	CHECK(wait_for_completion_timeout(&self_second, 30000));
	err = capture_end();
	CHECK_EQ(atomic_read(&cancel_result), 0);
	CHECK_EQ(count(err, "waits for itself from its own callback"), 1);
	free(err);
	CHECK(!cancel_delayed_work_sync(&self_dw));
	CHECK_EQ(atomic_read(&self_runs), 2);
	PASS("cancel_delayed_work_sync from its own callback: refused, the armed cycle runs");

	use_sync = 0;
	atomic_set(&self_runs, 0);
	atomic_set(&cancel_result, -1);
	INIT_DELAYED_WORK(&self_dw, self_fn);
	CHECK(queue_delayed_work(system_wq, &self_dw, 0));
	while (atomic_read(&self_runs) == 0 || atomic_read(&cancel_result) < 0)
		usleep(1000);
	flush_delayed_work(&self_dw);
	CHECK_EQ(atomic_read(&cancel_result), 1);
	CHECK_EQ(atomic_read(&self_runs), 1);
	PASS("cancel_delayed_work from its own callback drops the armed cycle");
}

int main(void)
{
	null_name_and_limits();
	cancel_sync_from_own_callback();
	return 0;
}
