/* timing.h - what the C timing programs of bench/ share: a monotonic clock
 * and the median of a set of samples. */
#ifndef GRADC_BENCH_TIMING_H
#define GRADC_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

static double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts `t` and returns its median. */
static double bench_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof(double), bench_cmp);
  return t[n / 2];
}

#endif
