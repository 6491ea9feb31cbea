/* Calls m_main_adjoint of test/regress/nested_scan_checkpoint_slots.test through the C
 * ABI: the inputs from h0.raw, x.raw and w.raw (raw float64), the outputs and the
 * workspace full of garbage first, twice in a row; writes the second call's outputs to
 * out_0.raw ... out_3.raw and prints what both calls return. */
#include "m.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *garbage(size_t bytes) {
  size_t size = (bytes / M_ALIGNMENT + 1) * M_ALIGNMENT;
  void *p = aligned_alloc(M_ALIGNMENT, size);
  memset(p, 0xAB, size);
  return p;
}

static void *input(const char *path, size_t bytes) {
  void *p = garbage(bytes);
  FILE *f = fopen(path, "rb");
  if (f == NULL || fread(p, 1, bytes, f) != bytes)
    exit(2);
  fclose(f);
  return p;
}

static void output(const char *path, const void *p, size_t bytes) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(p, 1, bytes, f) != bytes)
    exit(3);
  fclose(f);
}

int main(void) {
  struct m_main_adjoint_inputs in = {input("h0.raw", M_MAIN_ADJOINT_H0_BYTES), input("x.raw", M_MAIN_ADJOINT_X_BYTES),
                                     input("w.raw", M_MAIN_ADJOINT_W_BYTES)};
  const size_t bytes[4] = {M_MAIN_ADJOINT_OUTPUT_0_BYTES, M_MAIN_ADJOINT_OUTPUT_1_BYTES,
                           M_MAIN_ADJOINT_OUTPUT_2_BYTES, M_MAIN_ADJOINT_OUTPUT_3_BYTES};
  int32_t rc[2];
  struct m_main_adjoint_outputs out;
  for (int call = 0; call < 2; ++call) {
    out = (struct m_main_adjoint_outputs){garbage(bytes[0]), garbage(bytes[1]), garbage(bytes[2]), garbage(bytes[3])};
    rc[call] = m_main_adjoint(&in, &out, garbage(M_MAIN_ADJOINT_WORKSPACE_SIZE));
  }
  double *leaves[4] = {out.output_0, out.output_1, out.output_2, out.output_3};
  char path[16];
  for (int i = 0; i < 4; ++i) {
    snprintf(path, sizeof path, "out_%d.raw", i);
    output(path, leaves[i], bytes[i]);
  }
  printf("rc=%d,%d\n", rc[0], rc[1]);
  return 0;
}
