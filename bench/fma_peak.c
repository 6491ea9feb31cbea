/* fma_peak.c - the single-core float32 FMA peak of this host, measured:
 * independent vector FMA chains (enough to hide the latency of two FMA units,
 * few enough to stay in registers: 24 of 32 with AVX-512, 12 of 16 otherwise)
 * at the widest vector width the compiler targets (-march=native), timed in a
 * process of its own under the policy of bench/timing.h (the best pass, as the
 * machine may be shared). Prints "GFLOPS SETTLED" (one FMA = 2 FLOPs).
 * Built and run by bench/bench.py.
 * Usage: fma_peak POLICY */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>

#include "timing.h"

#if defined(__AVX512F__)
#define LANES 16
#define CHAINS 24
#elif defined(__AVX__)
#define LANES 8
#define CHAINS 12
#else
#define LANES 4
#define CHAINS 12
#endif
#define ITERATIONS 100000 /* of all chains, per call: about 1 ms */

typedef float vec __attribute__((vector_size(LANES * 4)));

struct chains {
  vec acc[CHAINS], a, b;
};

static void run_chains(void *ctx) {
  struct chains *s = ctx;
  vec acc[CHAINS], a = s->a, b = s->b;
  for (int c = 0; c < CHAINS; ++c)
    acc[c] = s->acc[c];
  for (long i = 0; i < ITERATIONS; ++i) {
#pragma GCC unroll 24 /* at least CHAINS */
    for (int c = 0; c < CHAINS; ++c)
      acc[c] = acc[c] * a + b; /* one FMA with -ffp-contract=fast */
  }
  for (int c = 0; c < CHAINS; ++c)
    s->acc[c] = acc[c];
}

struct chains s; /* external linkage: the sums stay observable */

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fma_peak POLICY\n");
    return 2;
  }
  for (int l = 0; l < LANES; ++l) {
    s.a[l] = 0.999999f;
    s.b[l] = 1e-7f;
  }
  for (int c = 0; c < CHAINS; ++c)
    s.acc[c] = s.a * (float)c;
  int settled;
  double ms = bench_best_ms(run_chains, &s, bench_parse_policy(argv[1]), &settled);
  printf("%.1f %d\n", 2.0 * LANES * CHAINS * ITERATIONS / ms / 1e6, settled);
  return 0;
}
