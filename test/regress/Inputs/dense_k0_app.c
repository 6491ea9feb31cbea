/* Calls m_main of test/regress/dense_empty_inner_dimension.test through the C
 * ABI with outputs and workspace full of garbage, and prints what it returns. */
#include "m.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *garbage(size_t bytes) {
  void *p = aligned_alloc(M_ALIGNMENT, (bytes / M_ALIGNMENT + 1) * M_ALIGNMENT);
  memset(p, 0xAB, (bytes / M_ALIGNMENT + 1) * M_ALIGNMENT);
  return p;
}

int main(void) {
  float *b = garbage(3 * sizeof(float)), *sum = garbage(4), *relu = garbage(6 * sizeof(float));
  double *d3 = garbage(20 * sizeof(double));
  b[0] = -1, b[1] = 0.5f, b[2] = 2;
  struct m_main_inputs in = {NULL, NULL, b, NULL, NULL};
  struct m_main_outputs out = {sum, relu, d3};
  int32_t rc = m_main(&in, &out, garbage(M_MAIN_WORKSPACE_SIZE));
  printf("rc=%d sum=%g relu=", rc, *sum);
  for (int i = 0; i < 6; ++i)
    printf("%g ", relu[i]);
  double total = 0;
  for (int i = 0; i < 20; ++i)
    total += d3[i] == 0 ? 0 : 1;
  printf("nonzero3d=%g\n", total);
  return 0;
}
