/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: a module is a program, run as insmod and rmmod would run it.
 * module_init(fn) defines main(): it sets the module parameters
 * (moduleparam.h) from the environment and from name=value arguments, then
 * runs fn, the module's init:
 * - 0: the module is loaded, and stays loaded (its work items and threads
 *   run) until the program gets SIGTERM or SIGINT (Ctrl-C), the rmmod; then
 *   the module_exit function (if any) runs, and the program exits 0. A
 *   second signal while module_exit runs ends the program at once.
 * - -EAGAIN (what a test module returns so that it does not stay loaded):
 *   exits 0 at once, without module_exit, as the kernel's insmod fails.
 * - any other value: says so on stderr and exits 1, without module_exit.
 * A bad parameter exits 2 before fn runs. Each outcome is a line on stderr.
 * As the kernel's, this header brings linux/init.h (__init, __exit) and the
 * kernel's printing and helpers (linux/kernel.h).
 */
#ifndef CMWQ_KC_MODULE_H
#define CMWQ_KC_MODULE_H
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/init.h>
#include <linux/kernel.h>
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

/* Posted by the SIGTERM/SIGINT handler (sem_post may be called there). */
static sem_t cmwq_kc_unload;

static void cmwq_kc_unload_signal(int sig)
{
	(void)sig;
	sem_post(&cmwq_kc_unload);
}

/* Waits for the rmmod: SIGTERM or SIGINT, whichever thread it reaches. The
 * handler is reset by its first signal, so a second one kills. */
static inline void cmwq_kc_wait_unload(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cmwq_kc_unload_signal;
	sa.sa_flags = SA_RESETHAND | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sem_init(&cmwq_kc_unload, 0, 0);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	while (sem_wait(&cmwq_kc_unload) != 0 && errno == EINTR)
		;
}

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
		fprintf(stderr, "kcompat: %s() returned 0: loaded until SIGTERM or SIGINT\n", name);
		cmwq_kc_wait_unload();
		fprintf(stderr, "kcompat: unloading (module_exit)\n");
		if (cmwq_kc_module_exit)
			cmwq_kc_module_exit();
		fflush(stdout);
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
