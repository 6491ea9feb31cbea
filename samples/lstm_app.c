/* lstm_app.c - train the sample LSTM classifier a few steps with the compiled gradient.
 *
 * Links against the object gradc writes for samples/lstm.relay:
 *   gradc compile samples/lstm.relay --grad --wrt=%W_ih,%W_hh,%b,%Wc,%bc -o lstm
 *   cc -O2 samples/lstm_app.c lstm.o -I. -lm -o lstm_app && ./lstm_app
 * Each sequence is 16 steps of 4 random features; its class is the feature with the largest
 * sum over steps 1..15 (step 0 is the initial state's, which the scan does not read), so the
 * LSTM has to count. Prints the loss of every 20th SGD step on one fixed batch.
 */
#include "lstm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PARAMS = 5, STEPS = 16, BATCH = 8, FEATURES = 4, HIDDEN = 32 };

static uint32_t rng_state = 5u;
static uint32_t next_random(void) { /* xorshift32 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}
static float uniform(void) { return (float)(next_random() >> 8) / 8388608.0f - 1.0f; } /* [-1, 1) */

static void *alloc_aligned(size_t bytes) {
  size_t size = (bytes + LSTM_ALIGNMENT - 1) / LSTM_ALIGNMENT * LSTM_ALIGNMENT;
  void *p = aligned_alloc(LSTM_ALIGNMENT, size ? size : LSTM_ALIGNMENT);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(p, 0xAB, size); /* garbage: an unwritten output never passes as zero */
  return p;
}

static float *filled(size_t n, float scale) {
  float *p = alloc_aligned(n * sizeof(float));
  for (size_t i = 0; i < n; ++i)
    p[i] = scale * uniform();
  return p;
}

int main(void) {
  float *x = filled(STEPS * BATCH * FEATURES, 1.0f); /* time-major: [step][batch][feature] */
  int64_t *labels = alloc_aligned(BATCH * sizeof(int64_t));
  for (int b = 0; b < BATCH; ++b) {
    float best = -INFINITY;
    for (int f = 0; f < FEATURES; ++f) {
      float sum = 0;
      for (int t = 1; t < STEPS; ++t)
        sum += x[(t * BATCH + b) * FEATURES + f];
      if (sum > best)
        best = sum, labels[b] = f;
    }
  }
  float *h0 = filled(BATCH * HIDDEN, 0), *c0 = filled(BATCH * HIDDEN, 0);
  size_t sizes[PARAMS] = {LSTM_MAIN_ADJOINT_W_IH_SIZE, LSTM_MAIN_ADJOINT_W_HH_SIZE, LSTM_MAIN_ADJOINT_B_SIZE,
                          LSTM_MAIN_ADJOINT_WC_SIZE, LSTM_MAIN_ADJOINT_BC_SIZE};
  float *params[PARAMS] = {filled(sizes[0], 0.3f), filled(sizes[1], 0.2f), filled(sizes[2], 0),
                           filled(sizes[3], 0.3f), filled(sizes[4], 0)};
  struct lstm_main_adjoint_inputs in = {x, labels, h0, c0, params[0], params[1], params[2], params[3], params[4]};
  float *loss = alloc_aligned(sizeof(float));
  float *grads[PARAMS];
  for (int p = 0; p < PARAMS; ++p)
    grads[p] = alloc_aligned(sizes[p] * sizeof(float));
  struct lstm_main_adjoint_outputs out = {loss, grads[0], grads[1], grads[2], grads[3], grads[4]};
  void *workspace = alloc_aligned(LSTM_MAIN_ADJOINT_WORKSPACE_SIZE);

  printf("workspace: %d bytes\n", (int)LSTM_MAIN_ADJOINT_WORKSPACE_SIZE);
  const float lr = 0.5f;
  float first = 0;
  for (int step = 0; step < 100; ++step) {
    int32_t rc = lstm_main_adjoint(&in, &out, workspace);
    if (rc != 0) {
      fprintf(stderr, "lstm_main_adjoint failed: %s\n", lstm_strerror(rc));
      return 1;
    }
    if (step % 20 == 0 || step == 99)
      printf("step %d: loss %.4f\n", step, *loss);
    if (!isfinite(*loss))
      return 1;
    if (step == 0)
      first = *loss;
    for (int p = 0; p < PARAMS; ++p)
      for (size_t i = 0; i < sizes[p]; ++i)
        params[p][i] -= lr * grads[p][i];
  }
  printf("%s\n", *loss < 0.5f * first ? "the loss fell" : "the loss did not fall");
  return 0;
}
