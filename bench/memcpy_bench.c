/* memcpy_bench.c - the memory-bandwidth peer of the elementwise rows: a C
 * memcpy that reads BYTES/2 and writes BYTES/2, the same bytes moved as the
 * kernel it is compared with, timed in a process of its own under the policy
 * of bench/timing.h. Prints "MS SETTLED": the best milliseconds per copy.
 * Usage: memcpy_bench POLICY BYTES */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

struct copy {
  char *src, *dst;
  size_t half, round;
};

static void copy(void *ctx) {
  struct copy *c = ctx;
  memcpy(c->dst, c->src, c->half);
  c->src[c->round % c->half] ^= c->dst[(c->round * 7) % c->half]; /* keep the copies observable */
  ++c->round;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: memcpy_bench POLICY BYTES\n");
    return 2;
  }
  struct bench_policy policy = bench_parse_policy(argv[1]);
  struct copy c = {.half = (size_t)atoll(argv[2]) / 2};
  c.src = aligned_alloc(64, (c.half + 63) / 64 * 64);
  c.dst = aligned_alloc(64, (c.half + 63) / 64 * 64);
  memset(c.src, 1, c.half);
  memset(c.dst, 0, c.half);
  int settled;
  double ms = bench_best_ms(copy, &c, policy, &settled);
  printf("%.5f %d\n", ms, settled);
  return 0;
}
