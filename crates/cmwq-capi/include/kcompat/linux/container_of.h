/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: container_of. */
#ifndef CMWQ_KC_CONTAINER_OF_H
#define CMWQ_KC_CONTAINER_OF_H
#include <stddef.h>
#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif
#endif
