/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: min, max, clamp (each argument evaluated once). */
#ifndef CMWQ_KC_MINMAX_H
#define CMWQ_KC_MINMAX_H
#define min(x, y) ({ __typeof__(x) _kc_a = (x); __typeof__(y) _kc_b = (y); _kc_a < _kc_b ? _kc_a : _kc_b; })
#define max(x, y) ({ __typeof__(x) _kc_a = (x); __typeof__(y) _kc_b = (y); _kc_a > _kc_b ? _kc_a : _kc_b; })
#define min3(x, y, z) min(min(x, y), z)
#define max3(x, y, z) max(max(x, y), z)
#define min_t(type, x, y) ({ type _kc_a = (x); type _kc_b = (y); _kc_a < _kc_b ? _kc_a : _kc_b; })
#define max_t(type, x, y) ({ type _kc_a = (x); type _kc_b = (y); _kc_a > _kc_b ? _kc_a : _kc_b; })
#define clamp(v, lo, hi) min(max(v, lo), hi)
#define clamp_t(type, v, lo, hi) min_t(type, max_t(type, v, lo), hi)
#define swap(a, b) do { __typeof__(a) _kc_t = (a); (a) = (b); (b) = _kc_t; } while (0)
#endif
