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

/* Captures what the calls in between write to stderr (fd 2), where the
 * library reports: capture_end() returns the text (malloc'd). Not nested. */
#include <string.h>
#include <unistd.h>
static int capture_saved_fd __attribute__((unused)) = -1;
static FILE *capture_file __attribute__((unused));

static inline void capture_begin(void)
{
	fflush(stderr);
	capture_file = tmpfile();
	CHECK(capture_file);
	capture_saved_fd = dup(2);
	CHECK(capture_saved_fd >= 0);
	CHECK(dup2(fileno(capture_file), 2) == 2);
}

static inline char *capture_end(void)
{
	long n;
	char *s;

	fflush(stderr);
	CHECK(dup2(capture_saved_fd, 2) == 2);
	close(capture_saved_fd);
	n = ftell(capture_file);
	s = calloc(1, (size_t)n + 1);
	CHECK(s);
	rewind(capture_file);
	CHECK(fread(s, 1, (size_t)n, capture_file) == (size_t)n);
	fclose(capture_file);
	return s;
}
/* Line-buffered, so a crash still shows how far a test got. */
__attribute__((constructor)) static void check_line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}
#endif
