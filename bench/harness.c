/* harness.c - time one compiled entry point through its C ABI, for any model.
 * Built by bench/bench.py with -DENTRY=<prefix>_<function> -DSET_THREADS=<prefix>_set_num_threads
 * and linked with the model's object. The inputs and outputs structs of the
 * ABI are arrays of pointers, so this harness needs only their byte sizes:
 *
 *   harness ITERATIONS THREADS WORKSPACE_BYTES in:BYTES:DTYPE[:SCALE]... out:BYTES...
 *
 * Floating-point inputs are filled with values spread over [0, SCALE) (default
 * 1, as torch.rand(...) * SCALE), integer inputs with 0 (a valid class index). Prints the median milliseconds of ITERATIONS calls
 * after one warm-up call. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

int32_t ENTRY(void *const *inputs, void *const *outputs, void *workspace);
void SET_THREADS(int32_t threads);

static void *buffer(size_t bytes, int is_float, float scale) {
  size_t size = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, size ? size : 64);
  memset(p, 0, size ? size : 64);
  if (is_float) {
    float *f = p;
    for (size_t i = 0; i < size / sizeof(float); ++i)
      f[i] = scale * (float)((i * 2654435761u) % 1000) / 1000.0f;
  }
  return p;
}


int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: harness ITERATIONS THREADS WORKSPACE_BYTES in:BYTES:DTYPE[:SCALE]... out:BYTES...\n");
    return 2;
  }
  int iters = atoi(argv[1]);
  SET_THREADS(atoi(argv[2]));
  void *workspace = buffer((size_t)atoll(argv[3]), 0, 0);
  void *inputs[256], *outputs[256];
  int n_in = 0, n_out = 0;
  for (int i = 4; i < argc && n_in < 256 && n_out < 256; ++i) {
    size_t bytes = (size_t)atoll(strchr(argv[i], ':') + 1);
    if (strncmp(argv[i], "in:", 3) == 0) {
      const char *dtype = strchr(argv[i] + 3, ':'), *scale = dtype ? strchr(dtype + 1, ':') : NULL;
      inputs[n_in++] = buffer(bytes, dtype && strncmp(dtype, ":float32", 8) == 0, scale ? (float)atof(scale + 1) : 1.0f);
    } else {
      outputs[n_out++] = buffer(bytes, 0, 0);
    }
  }
  double *t = malloc(sizeof(double) * (size_t)iters);
  /* Warm-up: calls for 20 ms at least (threads started, caches and clocks up), as the peers' scripts do. */
  double warm = bench_now();
  do {
    int32_t status = ENTRY(inputs, outputs, workspace);
    if (status != 0) {
      fprintf(stderr, "harness: the entry point returned %d\n", status);
      return 1;
    }
  } while (bench_now() - warm < 0.02);
  for (int i = 0; i < iters; ++i) {
    double s = bench_now();
    ENTRY(inputs, outputs, workspace);
    t[i] = (bench_now() - s) * 1e3;
  }
  printf("%.5f\n", bench_median(t, iters));
  return 0;
}
