/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: a module is a program. module_init(fn) defines main(): it sets
 * the module parameters (moduleparam.h) from the environment and from
 * name=value arguments, runs fn and reports what it returned on stderr.
 * 0 runs the module_exit function (if any) and exits 0; -EAGAIN (what a
 * test module returns so that it does not stay loaded) exits 0 too; any
 * other value exits 1. A bad parameter exits 2 before fn runs.
 */
#ifndef CMWQ_KC_MODULE_H
#define CMWQ_KC_MODULE_H
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>

#define MODULE_LICENSE(x) extern int cmwq_kc_module_dummy
#define MODULE_AUTHOR(x) extern int cmwq_kc_module_dummy
#define MODULE_DESCRIPTION(x) extern int cmwq_kc_module_dummy
#define MODULE_VERSION(x) extern int cmwq_kc_module_dummy
#define MODULE_ALIAS(x) extern int cmwq_kc_module_dummy
#define MODULE_INFO(t, x) extern int cmwq_kc_module_dummy
#define MODULE_IMPORT_NS(x) extern int cmwq_kc_module_dummy
#define EXPORT_SYMBOL(x) extern int cmwq_kc_module_dummy
#define EXPORT_SYMBOL_GPL(x) extern int cmwq_kc_module_dummy
#define THIS_MODULE ((void *)0)

extern void (*cmwq_kc_module_exit)(void) __attribute__((weak));

static inline int cmwq_kc_module_main(int argc, char **argv, int (*init)(void), const char *name)
{
	static struct task_struct main_task = { .comm = "main", .cpu = -1, .started = 1 };
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	cmwq_kc_set_current(&main_task);
	if (cmwq_kc_params_apply(argc, (const char *const *)argv))
		return 2;
	ret = init();
	if (ret == 0) {
		if (cmwq_kc_module_exit)
			cmwq_kc_module_exit();
		fprintf(stderr, "kcompat: %s() returned 0\n", name);
		return 0;
	}
	if (ret == -EAGAIN) {
		fprintf(stderr, "kcompat: %s() returned -EAGAIN (done, not staying loaded)\n", name);
		return 0;
	}
	fprintf(stderr, "kcompat: %s() returned %d (%s)\n", name, ret, strerror(ret < 0 ? -ret : ret));
	return 1;
}

#define module_init(fn)							\
	int main(int argc, char **argv)					\
	{								\
		return cmwq_kc_module_main(argc, argv, fn, #fn);	\
	}								\
	extern int cmwq_kc_module_dummy
#define module_exit(fn) void (*cmwq_kc_module_exit)(void) = fn
#define late_initcall(fn) module_init(fn)
#endif
