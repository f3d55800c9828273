/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The C suite's one assertion: prints where and aborts. */
#ifndef CMWQ_CHECK_H
#define CMWQ_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#define CHECK(c)								\
	do {									\
		if (!(c)) {							\
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			abort();						\
		}								\
	} while (0)
#define CHECK_EQ(a, b)								\
	do {									\
		long long _a = (long long)(a), _b = (long long)(b);		\
		if (_a != _b) {							\
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", \
				__FILE__, __LINE__, #a, _a, #b, _b);		\
			abort();						\
		}								\
	} while (0)
#define PASS(name) printf("ok %s\n", name)
/* Line-buffered, so a crash still shows how far a test got. */
__attribute__((constructor)) static void check_line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}
#endif
