/* fma_peak.c - the single-core float32 FMA peak of this host, measured:
 * independent vector FMA chains (enough to hide the latency of two FMA units,
 * few enough to stay in registers: 24 of 32 with AVX-512, 12 of 16 otherwise)
 * at the widest vector width the compiler targets (-march=native).
 * Prints GFLOP/s (one FMA = 2 FLOPs). Built and run by bench/bench.py. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>

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

typedef float vec __attribute__((vector_size(LANES * 4)));

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
  vec acc[CHAINS], a, b;
  for (int l = 0; l < LANES; ++l) {
    a[l] = 0.999999f;
    b[l] = 1e-7f;
  }
  for (int c = 0; c < CHAINS; ++c)
    acc[c] = a * (float)c;
  const long iters = 20000000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double start = now();
    for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 24 /* at least CHAINS */
      for (int c = 0; c < CHAINS; ++c)
        acc[c] = acc[c] * a + b; /* one FMA with -ffp-contract=fast */
    }
    double gflops = 2.0 * LANES * CHAINS * (double)iters / (now() - start) / 1e9;
    best = gflops > best ? gflops : best;
  }
  float sink = 0;
  for (int c = 0; c < CHAINS; ++c)
    sink += acc[c][0];
  printf("%.1f %d\n", best, LANES + (sink == 12345.0f));
  return 0;
}
