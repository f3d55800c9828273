/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: section annotations are no-ops in a program. */
#ifndef CMWQ_KC_INIT_H
#define CMWQ_KC_INIT_H
#define __init
#define __exit
#define __initdata
#define __exitdata
#define __initconst
#define __ref
#include <linux/module.h>
#endif
