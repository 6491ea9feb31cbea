/* timing.h - the timing policy of every C program of bench/ (bench/peer_timing.py
 * applies the same policy to the peers timed in Python), and a monotonic clock.
 *
 * A pass is CALLS consecutive calls timed together; its figure is milliseconds
 * per call. Warm-up: passes until at least MIN_WARM_MS have gone by, at least 3
 * passes have run and the newest pass is no longer 2% faster than the best one
 * before it (the timings have stopped falling); after each pass CALLS is set so
 * that a pass lasts about PASS_MS. A warm-up that has not settled after
 * MAX_WARM_MS ends there and says so. Then PASSES passes are timed and the best
 * (fastest) is reported. The policy comes from bench/bench.py as one argument,
 * "MIN_WARM_MS,MAX_WARM_MS,PASS_MS,PASSES"; each program prints its figure and
 * whether the warm-up settled (1) or hit MAX_WARM_MS (0), as "FIGURE SETTLED". */
#ifndef GRADC_BENCH_TIMING_H
#define GRADC_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct bench_policy {
  double min_warm_ms, max_warm_ms, pass_ms;
  int passes;
};

/* Parses "MIN_WARM_MS,MAX_WARM_MS,PASS_MS,PASSES"; exits on a malformed one. */
static inline struct bench_policy bench_parse_policy(const char *text) {
  struct bench_policy p;
  if (sscanf(text, "%lf,%lf,%lf,%d", &p.min_warm_ms, &p.max_warm_ms, &p.pass_ms, &p.passes) != 4 || p.passes < 1) {
    fprintf(stderr, "bench: a timing policy is MIN_WARM_MS,MAX_WARM_MS,PASS_MS,PASSES, not '%s'\n", text);
    exit(2);
  }
  return p;
}

/* Milliseconds per call of one pass of `calls` calls of call(ctx). */
static inline double bench_pass_ms(void (*call)(void *), void *ctx, long calls) {
  double start = bench_now();
  for (long i = 0; i < calls; ++i)
    call(ctx);
  return (bench_now() - start) * 1e3 / (double)calls;
}

/* Warms call(ctx) up and times it under `policy`: the best milliseconds per
 * call; *settled says whether the warm-up settled. */
static inline double bench_best_ms(void (*call)(void *), void *ctx, struct bench_policy policy, int *settled) {
  long calls = 1;
  int warm_passes = 0;
  double best = 1e300, start = bench_now();
  *settled = 0;
  for (;;) {
    double ms = bench_pass_ms(call, ctx, calls);
    int falling = ms < 0.98 * best;
    best = ms < best ? ms : best;
    long next = (long)(policy.pass_ms / ms);
    calls = next > 1 ? next : 1;
    double elapsed_ms = (bench_now() - start) * 1e3;
    if (++warm_passes >= 3 && elapsed_ms >= policy.min_warm_ms && !falling) {
      *settled = 1;
      break;
    }
    if (elapsed_ms >= policy.max_warm_ms)
      break;
  }
  best = 1e300;
  for (int pass = 0; pass < policy.passes; ++pass) {
    double ms = bench_pass_ms(call, ctx, calls);
    best = ms < best ? ms : best;
  }
  return best;
}

#endif
