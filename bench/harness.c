/* harness.c - time one compiled entry point through its C ABI, for any model,
 * in a process of its own under the timing policy of bench/timing.h.
 * Built by bench/bench.py with -DENTRY=<prefix>_<function> -DSET_THREADS=<prefix>_set_num_threads
 * and linked with the model's object. The inputs and outputs structs of the
 * ABI are arrays of pointers, so this harness needs only their byte sizes:
 *
 *   harness POLICY THREADS WORKSPACE_BYTES in:BYTES:DTYPE[:SCALE]... out:BYTES...
 *
 * The thread count is set before the first call. Floating-point inputs are
 * filled with values spread over [0, SCALE) (default 1, as torch.rand(...) *
 * SCALE), integer inputs with 0 (a valid class index); outputs and the
 * workspace start as garbage (0xAB bytes), so that nothing passes by relying
 * on zeroed memory. Prints "MS SETTLED": the best milliseconds per call (bench/timing.h). */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

int32_t ENTRY(void *const *inputs, void *const *outputs, void *workspace);
void SET_THREADS(int32_t threads);

enum fill { GARBAGE, ZERO, VALUES };

static void *buffer(size_t bytes, enum fill fill, float scale) {
  size_t size = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, size ? size : 64);
  memset(p, fill == GARBAGE ? 0xAB : 0, size ? size : 64);
  if (fill == VALUES) {
    float *f = p;
    for (size_t i = 0; i < size / sizeof(float); ++i)
      f[i] = scale * (float)((i * 2654435761u) % 1000) / 1000.0f;
  }
  return p;
}

struct call {
  void *inputs[256], *outputs[256], *workspace;
};

static void call_entry(void *ctx) {
  struct call *c = ctx;
  int32_t status = ENTRY(c->inputs, c->outputs, c->workspace);
  if (status != 0) {
    fprintf(stderr, "harness: the entry point returned %d\n", status);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: harness POLICY THREADS WORKSPACE_BYTES in:BYTES:DTYPE[:SCALE]... out:BYTES...\n");
    return 2;
  }
  struct bench_policy policy = bench_parse_policy(argv[1]);
  SET_THREADS(atoi(argv[2]));
  static struct call c;
  c.workspace = buffer((size_t)atoll(argv[3]), GARBAGE, 0);
  int n_in = 0, n_out = 0;
  for (int i = 4; i < argc && n_in < 256 && n_out < 256; ++i) {
    size_t bytes = (size_t)atoll(strchr(argv[i], ':') + 1);
    if (strncmp(argv[i], "in:", 3) == 0) {
      const char *dtype = strchr(argv[i] + 3, ':'), *scale = dtype ? strchr(dtype + 1, ':') : NULL;
      c.inputs[n_in++] = buffer(bytes, dtype && strncmp(dtype, ":float32", 8) == 0 ? VALUES : ZERO,
                                scale ? (float)atof(scale + 1) : 1.0f);
    } else {
      c.outputs[n_out++] = buffer(bytes, GARBAGE, 0);
    }
  }
  int settled;
  double ms = bench_best_ms(call_entry, &c, policy, &settled);
  printf("%.5f %d\n", ms, settled);
  return 0;
}
