/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: BUG_ON aborts; WARN_ON prints where and goes on. */
#ifndef CMWQ_KC_BUG_H
#define CMWQ_KC_BUG_H
#include <stdio.h>
#include <stdlib.h>
#define BUG() do { fprintf(stderr, "BUG at %s:%d\n", __FILE__, __LINE__); abort(); } while (0)
#define BUG_ON(c) do { if (__builtin_expect(!!(c), 0)) BUG(); } while (0)
#define WARN_ON(c) ({ int _kc_c = !!(c); if (_kc_c) fprintf(stderr, "WARNING at %s:%d: %s\n", __FILE__, __LINE__, #c); _kc_c; })
#define WARN_ON_ONCE(c) ({ static int _kc_w; int _kc_c = !!(c); if (_kc_c && !_kc_w) { _kc_w = 1; fprintf(stderr, "WARNING at %s:%d: %s\n", __FILE__, __LINE__, #c); } _kc_c; })
#define WARN(c, fmt, ...) ({ int _kc_c = !!(c); if (_kc_c) fprintf(stderr, fmt, ##__VA_ARGS__); _kc_c; })
#define WARN_ONCE(c, fmt, ...) WARN(c, fmt, ##__VA_ARGS__)
#endif
