/* Calls the in-place functions of inplace.relay through the header:
 * three SGD steps on one buffer, then @step (a loss in its output, the
 * weight updated in its input field). Workspace and outputs start as
 * garbage. The updated field is `float *` (not const): taking it as one
 * compiles under -Werror. */
#include "m.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *garbage(size_t bytes) {
  void *p = aligned_alloc(M_ALIGNMENT, bytes ? (bytes + M_ALIGNMENT - 1) / M_ALIGNMENT * M_ALIGNMENT : M_ALIGNMENT);
  memset(p, 0xCD, bytes);
  return p;
}

int main(void) {
  enum { N = M_SGD_W_SIZE };
  float *w = garbage(M_SGD_W_BYTES), *g = garbage(M_SGD_G_BYTES), *lr = garbage(sizeof(float));
  float expect[N];
  for (int i = 0; i < N; ++i) {
    w[i] = expect[i] = (float)((i % 7) - 3) * 0.25f;
    g[i] = (float)((i % 5) - 2) * 0.5f;
  }
  *lr = 0.125f;
  struct m_sgd_inputs in = {w, g, lr};
  float *updated = in.w; /* not const: the call writes it */
  struct m_sgd_outputs out;
  void *ws = garbage(M_SGD_WORKSPACE_SIZE);
  for (int step = 0; step < 3; ++step) {
    if (m_sgd(&in, &out, ws) != 0)
      return 1;
    for (int i = 0; i < N; ++i)
      expect[i] = expect[i] - 0.125f * g[i];
  }
  double worst = 0;
  for (int i = 0; i < N; ++i)
    worst = fmax(worst, fabs(updated[i] - expect[i]));
  printf("sgd: three steps, max error %g\n", worst);

  float *x = garbage(M_STEP_X_BYTES), *w2 = garbage(M_STEP_W_BYTES);
  for (int i = 0; i < M_STEP_X_SIZE; ++i)
    x[i] = (float)((i % 3) - 1);
  for (int i = 0; i < M_STEP_W_SIZE; ++i)
    w2[i] = 0;
  struct m_step_inputs sin = {x, w2, lr};
  struct m_step_outputs sout = {garbage(M_STEP_OUTPUT_0_BYTES)};
  void *sws = garbage(M_STEP_WORKSPACE_SIZE);
  if (m_step(&sin, &sout, sws) != 0)
    return 1;
  /* w = 0: the loss is 0 and so is the gradient; w stays 0. */
  float most = 0;
  for (int i = 0; i < M_STEP_W_SIZE; ++i)
    most = fmaxf(most, fabsf(w2[i]));
  printf("step: loss %g, largest weight %g\n", *sout.output_0, most);
  return 0;
}
