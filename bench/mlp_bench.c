/* mlp_bench.c - time the compiled MLP training step (forward + gradient).
 * Built by bench/run.sh against the object of samples/mlp.relay; prints the
 * median milliseconds per call over several repetitions.
 * Usage: mlp_bench [ITERATIONS [THREADS]]   (THREADS: the object's thread pool size) */
#define _POSIX_C_SOURCE 199309L
#include "mlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *buffer(size_t bytes, float fill) {
  size_t size = (bytes + 63) / 64 * 64;
  float *p = aligned_alloc(64, size ? size : 64);
  for (size_t i = 0; i < size / sizeof(float); ++i)
    p[i] = fill * (float)((i * 2654435761u) % 1000) / 1000.0f;
  return p;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20;
  if (argc > 2)
    mlp_set_num_threads(atoi(argv[2]));
  int64_t *y = buffer(MLP_MAIN_ADJOINT_Y_SIZE * sizeof(int64_t), 0);
  for (int i = 0; i < MLP_MAIN_ADJOINT_Y_SIZE; ++i)
    y[i] = i % 10;
  struct mlp_main_adjoint_inputs in = {buffer(MLP_MAIN_ADJOINT_X_SIZE * 4, 1), y,
                                       buffer(MLP_MAIN_ADJOINT_W1_SIZE * 4, 0.05f), buffer(MLP_MAIN_ADJOINT_B1_SIZE * 4, 0.01f),
                                       buffer(MLP_MAIN_ADJOINT_W2_SIZE * 4, 0.05f), buffer(MLP_MAIN_ADJOINT_B2_SIZE * 4, 0.01f)};
  struct mlp_main_adjoint_outputs out = {buffer(4, 0), buffer(MLP_MAIN_ADJOINT_OUTPUT_1_SIZE * 4, 0),
                                         buffer(MLP_MAIN_ADJOINT_OUTPUT_2_SIZE * 4, 0), buffer(MLP_MAIN_ADJOINT_OUTPUT_3_SIZE * 4, 0),
                                         buffer(MLP_MAIN_ADJOINT_OUTPUT_4_SIZE * 4, 0)};
  void *ws = buffer(MLP_MAIN_ADJOINT_WORKSPACE_SIZE, 0);
  double *t = malloc(sizeof(double) * iters);
  mlp_main_adjoint(&in, &out, ws); /* warm-up */
  for (int i = 0; i < iters; ++i) {
    double s = now();
    if (mlp_main_adjoint(&in, &out, ws) != 0)
      return 1;
    t[i] = (now() - s) * 1e3;
  }
  qsort(t, iters, sizeof(double), cmp);
  printf("%.4f\n", t[iters / 2]);
  return 0;
}
