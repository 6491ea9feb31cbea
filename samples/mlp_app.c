/* mlp_app.c - train the sample MLP for a few steps with the compiled gradient.
 *
 * Links against the object gradc writes for samples/mlp.relay:
 *   gradc compile samples/mlp.relay --grad --wrt=%w1,%b1,%w2,%b2 -o mlp
 *   cc -O2 samples/mlp_app.c mlp.o -I. -lm -o mlp_app && ./mlp_app
 * Prints the loss and the gradient norms of each SGD step on a fixed batch.
 */
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng_state = 12345u;
static float uniform(void) { /* xorshift32 in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

static void *alloc_aligned(size_t bytes) {
  size_t size = (bytes + MLP_ALIGNMENT - 1) / MLP_ALIGNMENT * MLP_ALIGNMENT;
  void *p = aligned_alloc(MLP_ALIGNMENT, size ? size : MLP_ALIGNMENT);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(p, 0xAB, size); /* garbage: an unwritten output never passes as zero */
  return p;
}

static float *random_tensor(size_t n, float scale) {
  float *p = alloc_aligned(n * sizeof(float));
  for (size_t i = 0; i < n; ++i)
    p[i] = scale * uniform();
  return p;
}

static double norm(const float *p, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i)
    s += (double)p[i] * p[i];
  return sqrt(s);
}

int main(void) {
  float *x = random_tensor(MLP_MAIN_ADJOINT_X_SIZE, 1.0f);
  int64_t *y = alloc_aligned(MLP_MAIN_ADJOINT_Y_SIZE * sizeof(int64_t));
  for (size_t i = 0; i < MLP_MAIN_ADJOINT_Y_SIZE; ++i)
    y[i] = (int64_t)(i % 10);
  float *w1 = random_tensor(MLP_MAIN_ADJOINT_W1_SIZE, 0.05f);
  float *b1 = random_tensor(MLP_MAIN_ADJOINT_B1_SIZE, 0.01f);
  float *w2 = random_tensor(MLP_MAIN_ADJOINT_W2_SIZE, 0.05f);
  float *b2 = random_tensor(MLP_MAIN_ADJOINT_B2_SIZE, 0.01f);

  struct mlp_main_adjoint_inputs in = {x, y, w1, b1, w2, b2};
  struct mlp_main_adjoint_outputs out;
  out.output_0 = alloc_aligned(sizeof(float));
  out.output_1 = alloc_aligned(MLP_MAIN_ADJOINT_OUTPUT_1_SIZE * sizeof(float));
  out.output_2 = alloc_aligned(MLP_MAIN_ADJOINT_OUTPUT_2_SIZE * sizeof(float));
  out.output_3 = alloc_aligned(MLP_MAIN_ADJOINT_OUTPUT_3_SIZE * sizeof(float));
  out.output_4 = alloc_aligned(MLP_MAIN_ADJOINT_OUTPUT_4_SIZE * sizeof(float));
  void *workspace = alloc_aligned(MLP_MAIN_ADJOINT_WORKSPACE_SIZE);

  printf("workspace: %d bytes\n", (int)MLP_MAIN_ADJOINT_WORKSPACE_SIZE);
  const float lr = 0.1f;
  for (int step = 0; step < 5; ++step) {
    int32_t rc = mlp_main_adjoint(&in, &out, workspace);
    if (rc != 0) {
      fprintf(stderr, "mlp_main_adjoint failed: %s\n", mlp_strerror(rc));
      return 1;
    }
    printf("step %d: loss %.6f  |dw1| %.6f  |db1| %.6f  |dw2| %.6f  |db2| %.6f\n", step, *out.output_0,
           norm(out.output_1, MLP_MAIN_ADJOINT_OUTPUT_1_SIZE), norm(out.output_2, MLP_MAIN_ADJOINT_OUTPUT_2_SIZE),
           norm(out.output_3, MLP_MAIN_ADJOINT_OUTPUT_3_SIZE), norm(out.output_4, MLP_MAIN_ADJOINT_OUTPUT_4_SIZE));
    float *params[4] = {w1, b1, w2, b2};
    float *grads[4] = {out.output_1, out.output_2, out.output_3, out.output_4};
    size_t sizes[4] = {MLP_MAIN_ADJOINT_W1_SIZE, MLP_MAIN_ADJOINT_B1_SIZE, MLP_MAIN_ADJOINT_W2_SIZE,
                       MLP_MAIN_ADJOINT_B2_SIZE};
    for (int p = 0; p < 4; ++p)
      for (size_t i = 0; i < sizes[p]; ++i)
        params[p][i] -= lr * grads[p][i];
  }
  return 0;
}
