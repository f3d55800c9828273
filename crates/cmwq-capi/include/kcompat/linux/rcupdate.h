/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: RCU is the userspace RCU library (liburcu, Debian's liburcu-dev),
 * its "bulletproof" flavour: a thread needs no registration before
 * rcu_read_lock(). Link with -lurcu-bp. The kernel's names map to it:
 * rcu_read_lock, rcu_read_unlock, synchronize_rcu, call_rcu (struct
 * rcu_head, a callback taking it), rcu_barrier, rcu_dereference,
 * rcu_assign_pointer. Including this header also registers liburcu with
 * libcmwq (a constructor), so queue_rcu_work() waits for a grace period of
 * this RCU: a reader inside rcu_read_lock() when it is called holds the
 * item off until it unlocks.
 */
#ifndef CMWQ_KC_RCUPDATE_H
#define CMWQ_KC_RCUPDATE_H
#include <urcu-bp.h>

void cmwq_rcu_set_ops(void (*call)(struct rcu_head *head, void (*func)(struct rcu_head *head)),
		      void (*barrier)(void));

/* The library hands its own heads to call_rcu: they must be liburcu's. */
_Static_assert(sizeof(struct rcu_head) == 2 * sizeof(void *),
	       "libcmwq's rcu_head is two pointers: a queue link and the callback");

__attribute__((constructor, used)) static void cmwq_rcu_register(void)
{
	cmwq_rcu_set_ops(urcu_bp_call_rcu, urcu_bp_barrier);
}
#endif
