// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Queue attributes: alloc/apply/free_workqueue_attrs (read back through
 * the sysfs files), workqueue_sysfs_register, workqueue_set_min_active,
 * create_freezable_workqueue and the lockdep-map allocators.
 */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/fs.h>
#include <linux/cpumask.h>
#include "check.h"

static bool read_attr(const char *wq, const char *attr, char *buf, size_t n)
{
	char path[160];
	struct file *f;
	loff_t pos = 0;
	ssize_t r;

	snprintf(path, sizeof(path), "/sys/bus/workqueue/devices/%s/%s", wq, attr);
	f = filp_open(path, O_RDONLY, 0);
	if (IS_ERR(f))
		return false;
	r = kernel_read(f, buf, n - 1, &pos);
	CHECK(r > 0);
	buf[r] = 0;
	CHECK_EQ(filp_close(f, NULL), 0);
	return true;
}

static void test_apply(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_attrs", WQ_UNBOUND | WQ_SYSFS, 0);
	struct workqueue_struct *bound = alloc_workqueue("capi_attrs_b", WQ_PERCPU, 0);
	struct workqueue_struct *ord = alloc_ordered_workqueue("capi_attrs_o", 0);
	struct workqueue_attrs *a = alloc_workqueue_attrs();
	int first = cmwq_kc_next_online_cpu(-1);
	char buf[128], want[32], *err;

	CHECK(wq && bound && ord && a);
	CHECK_EQ(a->nice, 0);
	CHECK_EQ(a->affn_scope, WQ_AFFN_DFL);
	CHECK(!a->affn_strict);
	CHECK_EQ(cpumask_weight(a->cpumask), num_online_cpus());

	a->nice = 5;
	cpumask_clear(a->cpumask);
	cpumask_set_cpu(first, a->cpumask);
	a->affn_scope = WQ_AFFN_CPU;
	a->affn_strict = true;
	CHECK_EQ(apply_workqueue_attrs(wq, a), 0);
	CHECK(read_attr("capi_attrs", "nice", buf, sizeof(buf)));
	CHECK(!strcmp(buf, "5\n"));
	CHECK(read_attr("capi_attrs", "affinity_scope", buf, sizeof(buf)));
	CHECK(!strcmp(buf, "cpu\n"));
	CHECK(read_attr("capi_attrs", "affinity_strict", buf, sizeof(buf)));
	CHECK(!strcmp(buf, "1\n"));
	CHECK(read_attr("capi_attrs", "cpumask", buf, sizeof(buf)));
	snprintf(want, sizeof(want), "%08x\n", 1u << (first % 32));
	CHECK(strstr(buf, want));

	/* Refused, with nothing changed: */
	capture_begin();
	CHECK_EQ(apply_workqueue_attrs(bound, a), -EINVAL);	/* per-CPU */
	CHECK_EQ(apply_workqueue_attrs(ord, a), -EINVAL);	/* ordered */
	a->nice = 30;
	CHECK_EQ(apply_workqueue_attrs(wq, a), -EINVAL);
	a->nice = 0;
	a->affn_scope = 99;
	CHECK_EQ(apply_workqueue_attrs(wq, a), -EINVAL);
	a->affn_scope = WQ_AFFN_SYSTEM;
	cpumask_clear(a->cpumask);
	CHECK_EQ(apply_workqueue_attrs(wq, a), -EINVAL);	/* no CPU */
	err = capture_end();
	CHECK(strstr(err, "apply_workqueue_attrs(\"capi_attrs_b\")"));
	CHECK(strstr(err, "nice 30"));
	free(err);
	CHECK(read_attr("capi_attrs", "nice", buf, sizeof(buf)));
	CHECK(!strcmp(buf, "5\n"));
	CHECK(read_attr("capi_attrs", "affinity_scope", buf, sizeof(buf)));
	CHECK(!strcmp(buf, "cpu\n"));
	free_workqueue_attrs(a);
	free_workqueue_attrs(NULL);
	destroy_workqueue(wq);
	destroy_workqueue(bound);
	destroy_workqueue(ord);
	PASS("alloc/apply/free_workqueue_attrs");
}

static void test_sysfs_register(void)
{
	struct workqueue_struct *wq = alloc_workqueue("capi_reg", WQ_UNBOUND, 7);
	struct workqueue_struct *ord = alloc_ordered_workqueue("capi_reg_o", 0);
	char buf[64];

	CHECK(wq && ord);
	CHECK(!read_attr("capi_reg", "max_active", buf, sizeof(buf)));
	CHECK_EQ(workqueue_sysfs_register(wq), 0);
	CHECK(read_attr("capi_reg", "max_active", buf, sizeof(buf)));
	CHECK(!strcmp(buf, "7\n"));
	capture_begin();
	CHECK_EQ(workqueue_sysfs_register(wq), -EEXIST);
	CHECK_EQ(workqueue_sysfs_register(ord), -EINVAL);
	free(capture_end());
	destroy_workqueue(wq);
	CHECK(!read_attr("capi_reg", "max_active", buf, sizeof(buf)));	/* gone with it */
	destroy_workqueue(ord);
	PASS("workqueue_sysfs_register");
}

static void test_min_active_and_allocators(void)
{
	struct workqueue_struct *u = alloc_workqueue("capi_min", WQ_UNBOUND, 16);
	struct workqueue_struct *b = alloc_workqueue("capi_min_b", WQ_PERCPU, 16);
	struct workqueue_struct *fz = create_freezable_workqueue("capi_frz");
	struct workqueue_struct *ld = alloc_workqueue_lockdep_map("capi_ld%d", WQ_UNBOUND, 3, NULL, 7);
	struct workqueue_struct *lo = alloc_ordered_workqueue_lockdep_map("capi_lo%d", 0, NULL, 8);
	char *err;

	CHECK(u && b && fz && ld && lo);
	capture_begin();
	workqueue_set_min_active(u, 4);		/* accepted: says nothing */
	err = capture_end();
	CHECK_EQ(strlen(err), 0);
	free(err);
	capture_begin();
	workqueue_set_min_active(b, 4);		/* a per-CPU queue has none */
	err = capture_end();
	CHECK(strstr(err, "workqueue_set_min_active(\"capi_min_b\", 4)"));
	free(err);
	CHECK_EQ(cmwq_workqueue_max_active(fz), 1);
	CHECK_EQ(cmwq_workqueue_max_active(ld), 3);
	CHECK_EQ(cmwq_workqueue_max_active(lo), 1);
	destroy_workqueue(u);
	destroy_workqueue(b);
	destroy_workqueue(fz);
	destroy_workqueue(ld);
	destroy_workqueue(lo);
	PASS("workqueue_set_min_active, create_freezable_workqueue, *_lockdep_map");
}

int main(void)
{
	test_apply();
	test_sysfs_register();
	test_min_active_and_allocators();
	return 0;
}
