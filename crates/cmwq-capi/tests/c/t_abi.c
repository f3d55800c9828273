// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The ABI: the compiler's size and alignment of every public struct equal
 * the library's (#[repr(C)]); a change to either side fails here until
 * both agree (and the SONAME's major changes, see linux/workqueue.h).
 */
#include <linux/kernel.h>
#include <linux/workqueue.h>
#include "check.h"

#define LAYOUT(s)							\
	do {								\
		size_t size = 0, align = 0;				\
		CHECK_EQ(cmwq_abi_layout(#s, &size, &align), 0);	\
		CHECK_EQ(size, sizeof(struct s));			\
		CHECK_EQ(align, _Alignof(struct s));			\
		checked++;						\
	} while (0)

int main(void)
{
	size_t size = 7, align = 7;
	int checked = 0;

	LAYOUT(work_struct);
	LAYOUT(delayed_work);
	LAYOUT(rcu_work);
	LAYOUT(execute_work);
	LAYOUT(workqueue_attrs);
	/* Every struct the library knows was compared. */
	CHECK_EQ(checked, cmwq_abi_nr_structs());
	CHECK_EQ(cmwq_abi_layout("no_such_struct", &size, &align), -ENOENT);
	CHECK_EQ(size, 7);
	PASS("abi: struct sizes and alignments match the library");
	return 0;
}
