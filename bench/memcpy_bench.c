/* memcpy_bench.c - the memory-bandwidth peer of the elementwise rows: median
 * milliseconds of a C memcpy that reads BYTES/2 and writes BYTES/2, the same
 * bytes moved as the kernel it is compared with.
 * Usage: memcpy_bench BYTES ITERATIONS */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"


int main(int argc, char **argv) {
  size_t half = (size_t)atoll(argv[1]) / 2;
  int iters = atoi(argv[2]);
  char *src = aligned_alloc(64, (half + 63) / 64 * 64), *dst = aligned_alloc(64, (half + 63) / 64 * 64);
  memset(src, 1, half);
  memset(dst, 0, half);
  double *t = malloc(sizeof(double) * (size_t)iters);
  memcpy(dst, src, half);
  for (int i = 0; i < iters; ++i) {
    double s = bench_now();
    memcpy(dst, src, half);
    t[i] = (bench_now() - s) * 1e3;
    src[i % half] ^= dst[(i * 7) % half]; /* keep the copies observable */
  }
  printf("%.5f\n", bench_median(t, iters));
  return 0;
}
