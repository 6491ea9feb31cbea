/* cnn_app.c - train the sample CNN for a few steps with the compiled gradient.
 *
 * Links against the object gradc writes for samples/cnn.relay:
 *   gradc compile samples/cnn.relay --grad --wrt=%w1,%g1,%b1,%w2,%g2,%b2,%w3,%b3,%w4,%b4 -o cnn
 *   cc -O2 samples/cnn_app.c cnn.o -I. -lm -o cnn_app && ./cnn_app
 * The images are a fixed batch of noise with a class-dependent bright
 * square, so there is something to learn; prints the loss of each SGD step.
 */
#include "cnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PARAMS = 10 };

static uint32_t rng_state = 2024u;
static float uniform(void) { /* xorshift32 in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

static void *alloc_aligned(size_t bytes) {
  size_t size = (bytes + CNN_ALIGNMENT - 1) / CNN_ALIGNMENT * CNN_ALIGNMENT;
  void *p = aligned_alloc(CNN_ALIGNMENT, size ? size : CNN_ALIGNMENT);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(p, 0xAB, size); /* garbage: an unwritten output never passes as zero */
  return p;
}

static float *filled(size_t n, float base, float scale) {
  float *p = alloc_aligned(n * sizeof(float));
  for (size_t i = 0; i < n; ++i)
    p[i] = base + scale * uniform();
  return p;
}

int main(void) {
  const size_t batch = CNN_MAIN_ADJOINT_Y_SIZE, pixels = 28 * 28;
  float *x = filled(CNN_MAIN_ADJOINT_X_SIZE, 0.0f, 0.3f);
  int64_t *y = alloc_aligned(batch * sizeof(int64_t));
  for (size_t n = 0; n < batch; ++n) { /* class c: a bright 6x6 square at row 2 + 2c */
    y[n] = (int64_t)(n % 10);
    for (size_t r = 0; r < 6; ++r)
      for (size_t c = 0; c < 6; ++c)
        x[n * pixels + (2 + 2 * (size_t)y[n] + r) * 28 + 10 + c] += 2.0f;
  }
  size_t sizes[PARAMS] = {CNN_MAIN_ADJOINT_W1_SIZE, CNN_MAIN_ADJOINT_G1_SIZE, CNN_MAIN_ADJOINT_B1_SIZE,
                          CNN_MAIN_ADJOINT_W2_SIZE, CNN_MAIN_ADJOINT_G2_SIZE, CNN_MAIN_ADJOINT_B2_SIZE,
                          CNN_MAIN_ADJOINT_W3_SIZE, CNN_MAIN_ADJOINT_B3_SIZE, CNN_MAIN_ADJOINT_W4_SIZE,
                          CNN_MAIN_ADJOINT_B4_SIZE};
  /* weights ~ 1/sqrt(fan-in); batch-norm scales 1, shifts 0 */
  float *params[PARAMS] = {filled(sizes[0], 0, 0.35f),  filled(sizes[1], 1, 0), filled(sizes[2], 0, 0),
                           filled(sizes[3], 0, 0.15f),  filled(sizes[4], 1, 0), filled(sizes[5], 0, 0),
                           filled(sizes[6], 0, 0.08f),  filled(sizes[7], 0, 0), filled(sizes[8], 0, 0.15f),
                           filled(sizes[9], 0, 0)};
  struct cnn_main_adjoint_inputs in = {x, y, params[0], params[1], params[2], params[3], params[4],
                                       params[5], params[6], params[7], params[8], params[9]};
  struct cnn_main_adjoint_outputs out;
  float *loss = alloc_aligned(sizeof(float));
  float *grads[PARAMS];
  for (int p = 0; p < PARAMS; ++p)
    grads[p] = alloc_aligned(sizes[p] * sizeof(float));
  out.output_0 = loss;
  out.output_1 = grads[0], out.output_2 = grads[1], out.output_3 = grads[2], out.output_4 = grads[3];
  out.output_5 = grads[4], out.output_6 = grads[5], out.output_7 = grads[6], out.output_8 = grads[7];
  out.output_9 = grads[8], out.output_10 = grads[9];
  void *workspace = alloc_aligned(CNN_MAIN_ADJOINT_WORKSPACE_SIZE);

  printf("workspace: %d bytes\n", (int)CNN_MAIN_ADJOINT_WORKSPACE_SIZE);
  const float lr = 0.05f;
  float first = 0;
  for (int step = 0; step < 8; ++step) {
    int32_t rc = cnn_main_adjoint(&in, &out, workspace);
    if (rc != 0) {
      fprintf(stderr, "cnn_main_adjoint failed: %s\n", cnn_strerror(rc));
      return 1;
    }
    double gnorm = 0;
    for (int p = 0; p < PARAMS; ++p)
      for (size_t i = 0; i < sizes[p]; ++i)
        gnorm += (double)grads[p][i] * grads[p][i];
    printf("step %d: loss %.4f  |grad| %.4f\n", step, *loss, sqrt(gnorm));
    if (!isfinite(*loss) || !isfinite(gnorm))
      return 1;
    if (step == 0)
      first = *loss;
    for (int p = 0; p < PARAMS; ++p)
      for (size_t i = 0; i < sizes[p]; ++i)
        params[p][i] -= lr * grads[p][i];
  }
  printf("%s\n", *loss < 0.8f * first ? "the loss fell" : "the loss did not fall");
  return 0;
}
