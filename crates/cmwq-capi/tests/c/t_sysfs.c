// SPDX-License-Identifier: MIT OR Apache-2.0
/* Writes to /sys/bus/workqueue/devices/<wq>/<attr> reach a WQ_SYSFS queue. */
#include <unistd.h>
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include <linux/fs.h>
#include <linux/atomic.h>
#include "check.h"

#define DIR "/sys/bus/workqueue/devices/capi_sysfs/"

static long write_attr(const char *path, const char *value)
{
	struct file *f = filp_open(path, O_WRONLY, 0);
	loff_t pos = 0;
	long ret;

	if (IS_ERR(f))
		return PTR_ERR(f);
	ret = kernel_write(f, value, strlen(value), &pos);
	CHECK_EQ(filp_close(f, NULL), 0);
	return ret;
}

static void read_attr(const char *path, char *buf, size_t n)
{
	struct file *f = filp_open(path, O_RDONLY, 0);
	loff_t pos = 0;
	ssize_t r;

	CHECK(!IS_ERR(f));
	r = kernel_read(f, buf, n - 1, &pos);
	CHECK(r > 0);
	buf[r] = 0;
	filp_close(f, NULL);
}

static atomic_t runs;
static void fn(struct work_struct *w)
{
	(void)w;
	atomic_inc(&runs);
}

int main(void)
{
	static const char *const scopes[] = { "cpu", "smt", "cache_shard", "cache", "numa", "system" };
	struct workqueue_struct *wq = alloc_workqueue("capi_sysfs", WQ_UNBOUND | WQ_SYSFS, 0);
	struct workqueue_struct *bound = alloc_workqueue("capi_sysfs_bound", WQ_SYSFS, 0);
	struct work_struct w;
	char buf[256];
	unsigned int i;

	CHECK(wq && bound);
	CHECK(alloc_workqueue("capi_sysfs", WQ_UNBOUND | WQ_SYSFS, 0) == NULL);	/* name taken */
	INIT_WORK(&w, fn);
	for (i = 0; i < ARRAY_SIZE(scopes); i++) {
		CHECK_EQ(write_attr(DIR "affinity_scope", scopes[i]), (long)strlen(scopes[i]));
		read_attr(DIR "affinity_scope", buf, sizeof(buf));
		CHECK(strncmp(buf, scopes[i], strlen(scopes[i])) == 0 && buf[strlen(scopes[i])] == '\n');
		CHECK(queue_work(wq, &w));	/* the queue keeps working */
		flush_work(&w);
	}
	CHECK_EQ(atomic_read(&runs), (int)ARRAY_SIZE(scopes));
	CHECK_EQ(write_attr(DIR "affinity_scope", "default\n"), 8);
	CHECK_EQ(write_attr(DIR "affinity_scope", "bogus"), -EINVAL);
	PASS("affinity_scope: every scope, default, a bad name refused");

	CHECK_EQ(write_attr(DIR "max_active", "3"), 1);
	CHECK_EQ(cmwq_workqueue_max_active(wq), 3);
	read_attr(DIR "max_active", buf, sizeof(buf));
	CHECK(strcmp(buf, "3\n") == 0);
	CHECK_EQ(write_attr(DIR "max_active", "0"), -EINVAL);
	CHECK_EQ(write_attr(DIR "affinity_strict", "1"), 1);
	read_attr(DIR "affinity_strict", buf, sizeof(buf));
	CHECK(strcmp(buf, "1\n") == 0);
	CHECK_EQ(write_attr(DIR "affinity_strict", "2"), -EINVAL);
	CHECK_EQ(write_attr(DIR "nice", "5"), 1);
	read_attr(DIR "nice", buf, sizeof(buf));
	CHECK(strcmp(buf, "5\n") == 0);
	CHECK_EQ(write_attr(DIR "nice", "99"), -EINVAL);
	CHECK_EQ(write_attr(DIR "cpumask", "1"), 1);	/* CPU 0 */
	read_attr(DIR "cpumask", buf, sizeof(buf));
	CHECK(strcmp(buf, "00000001\n") == 0);
	CHECK_EQ(write_attr(DIR "cpumask", "zz"), -EINVAL);
	CHECK(queue_work(wq, &w));
	flush_work(&w);
	read_attr(DIR "per_cpu", buf, sizeof(buf));
	CHECK(strcmp(buf, "0\n") == 0);
	CHECK_EQ(write_attr(DIR "per_cpu", "1"), -EINVAL);
	PASS("max_active, affinity_strict, nice, cpumask, per_cpu");

	CHECK_EQ(write_attr("/sys/bus/workqueue/devices/no_such_wq/affinity_scope", "cpu"), -ENOENT);
	CHECK_EQ(write_attr(DIR "no_such_attr", "1"), -ENOENT);
	/* A bound queue has max_active and per_cpu only. */
	CHECK_EQ(write_attr("/sys/devices/virtual/workqueue/capi_sysfs_bound/affinity_scope", "cpu"),
		 -ENOENT);
	CHECK_EQ(write_attr("/sys/devices/virtual/workqueue/capi_sysfs_bound/max_active", "4"), 1);
	CHECK_EQ(cmwq_workqueue_max_active(bound), 4);
	PASS("missing queues and attributes are -ENOENT");

	destroy_workqueue(wq);
	CHECK_EQ(write_attr(DIR "max_active", "3"), -ENOENT);	/* gone with its queue */
	wq = alloc_workqueue("capi_sysfs", WQ_UNBOUND | WQ_SYSFS, 0);	/* the name is free again */
	CHECK(wq);
	destroy_workqueue(wq);
	destroy_workqueue(bound);

	/* Other paths are real files. */
	{
		char path[] = "/tmp/cmwq-capi-fs-XXXXXX";
		int fd = mkstemp(path);
		struct file *f;
		loff_t pos = 0;

		CHECK(fd >= 0);
		close(fd);
		f = filp_open(path, O_WRONLY, 0);
		CHECK(!IS_ERR(f));
		CHECK_EQ(kernel_write(f, "abc", 3, &pos), 3);
		CHECK_EQ(kernel_write(f, "de", 2, &pos), 2);
		CHECK_EQ(pos, 5);
		filp_close(f, NULL);
		read_attr(path, buf, sizeof(buf));
		CHECK(strcmp(buf, "abcde") == 0);
		unlink(path);
		CHECK(IS_ERR(filp_open("/nonexistent/dir/file", O_RDONLY, 0)));
	}
	PASS("other paths are real files");
	return 0;
}
