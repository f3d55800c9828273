/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: linux/string.h is the C library's. */
#ifndef CMWQ_KC_STRING_H
#define CMWQ_KC_STRING_H
#include <string.h>
#endif
