/* Calls the CUDA host object of test/regress/nll_loss_index_out_of_range_cuda.test against
 * runtime/fake_cuda.c, whose status word the test sets to what kernels would have written. */
#define _POSIX_C_SOURCE 200809L
#include "m.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  void *reset_sym = lib ? dlsym(lib, "fake_cuda_reset") : NULL, *set_sym = lib ? dlsym(lib, "fake_cuda_set_status") : NULL;
  if (!reset_sym || !set_sym) {
    printf("no fake libcuda.so.1\n");
    return 1;
  }
  void (*reset)(const char *, int, int);
  void (*set_status)(int64_t);
  memcpy(&reset, &reset_sym, sizeof reset);
  memcpy(&set_status, &set_sym, sizeof set_status);
  static float p[40] __attribute__((aligned(64)));
  static int64_t t[4] __attribute__((aligned(64)));
  static float loss __attribute__((aligned(64)));
  void *ws = aligned_alloc(64, M_MAIN_WORKSPACE_SIZE);
  struct m_main_inputs in = {p, t};
  struct m_main_outputs out = {&loss};
  for (int64_t reported = 0; reported <= 5; reported += 5) {
    reset(NULL, 0, 1);
    set_status(reported);
    int32_t rc = m_main(&in, &out, ws, NULL);
    printf("kernels reported %lld: rc=%d %s\n", (long long)reported, rc, m_strerror(rc));
  }
  free(ws);
  return 0;
}
