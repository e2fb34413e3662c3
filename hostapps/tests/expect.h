/*
 * expect.h - the assertions of the packet-in/packet-out C tests: count
 * passes and failures, print each failure with its place and the current
 * test's name, and let main() print "N passed, M failed".
 */
#ifndef NETKV_TESTS_EXPECT_H
#define NETKV_TESTS_EXPECT_H

#include <stdio.h>

/* each test uses one of the two forms below; the other's counters stay unused */
#define NK_TEST_UNUSED __attribute__((unused))
static int passed NK_TEST_UNUSED, failed NK_TEST_UNUSED;
static const char *current NK_TEST_UNUSED;

#define EXPECT(cond)                                                              \
	do {                                                                      \
		if (cond) {                                                       \
			passed++;                                                 \
		} else {                                                          \
			failed++;                                                 \
			fprintf(stderr, "FAIL %s:%d [%s]: %s\n", __FILE__, __LINE__,  \
				current, #cond);                                  \
		}                                                                 \
	} while (0)
#define EXPECT_EQ(a, b)                                                           \
	do {                                                                      \
		unsigned long long a_ = (unsigned long long)(a);                  \
		unsigned long long b_ = (unsigned long long)(b);                  \
		if (a_ == b_) {                                                   \
			passed++;                                                 \
		} else {                                                          \
			failed++;                                                 \
			fprintf(stderr, "FAIL %s:%d [%s]: %s == %s (%llu vs %llu)\n", \
				__FILE__, __LINE__, current, #a, #b, a_, b_);     \
		}                                                                 \
	} while (0)

/* the statistical tests' form: count failures, print a formatted reason */
static int failures NK_TEST_UNUSED;
#define CHECK(c, ...)                                             \
	do {                                                      \
		if (!(c)) {                                       \
			failures++;                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);             \
			fputc('\n', stderr);                      \
		}                                                 \
	} while (0)

#endif /* NETKV_TESTS_EXPECT_H */
