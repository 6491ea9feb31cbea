/* rnn_app.c - train the sample RNN language model a few steps with the compiled gradient.
 *
 * Links against the object gradc writes for samples/rnn.relay:
 *   gradc compile samples/rnn.relay --grad --wrt=%E,%Wx,%Wh,%b,%Wo,%bo -o rnn
 *   cc -O2 samples/rnn_app.c rnn.o -I. -lm -o rnn_app && ./rnn_app
 * Each sequence counts up from a random token (mod 16), so the next token is always the
 * current one plus one: there is something to learn (except at step 0, whose state has seen
 * nothing). Prints the loss of every tenth SGD step.
 */
#include "rnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PARAMS = 6, STEPS = 12, BATCH = 4, HIDDEN = 32, VOCAB = 16 };

static uint32_t rng_state = 11u;
static uint32_t next_random(void) { /* xorshift32 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}
static float uniform(void) { return (float)(next_random() >> 8) / 8388608.0f - 1.0f; } /* [-1, 1) */

static void *alloc_aligned(size_t bytes) {
  size_t size = (bytes + RNN_ALIGNMENT - 1) / RNN_ALIGNMENT * RNN_ALIGNMENT;
  void *p = aligned_alloc(RNN_ALIGNMENT, size ? size : RNN_ALIGNMENT);
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
  int64_t *tokens = alloc_aligned(STEPS * BATCH * sizeof(int64_t)); /* time-major */
  int64_t *targets = alloc_aligned(STEPS * BATCH * sizeof(int64_t));
  for (int b = 0; b < BATCH; ++b) {
    int64_t start = (int64_t)(next_random() % VOCAB);
    for (int t = 0; t < STEPS; ++t) {
      tokens[t * BATCH + b] = (start + t) % VOCAB;
      targets[t * BATCH + b] = (start + t + 1) % VOCAB;
    }
  }
  float *h0 = filled(BATCH * HIDDEN, 0);
  size_t sizes[PARAMS] = {RNN_MAIN_ADJOINT_E_SIZE, RNN_MAIN_ADJOINT_WX_SIZE, RNN_MAIN_ADJOINT_WH_SIZE,
                          RNN_MAIN_ADJOINT_B_SIZE, RNN_MAIN_ADJOINT_WO_SIZE, RNN_MAIN_ADJOINT_BO_SIZE};
  float *params[PARAMS] = {filled(sizes[0], 0.5f), filled(sizes[1], 0.3f), filled(sizes[2], 0.2f),
                           filled(sizes[3], 0),    filled(sizes[4], 0.3f), filled(sizes[5], 0)};
  struct rnn_main_adjoint_inputs in = {tokens,    targets,   h0,        params[0], params[1],
                                       params[2], params[3], params[4], params[5]};
  float *loss = alloc_aligned(sizeof(float));
  float *grads[PARAMS];
  for (int p = 0; p < PARAMS; ++p)
    grads[p] = alloc_aligned(sizes[p] * sizeof(float));
  struct rnn_main_adjoint_outputs out = {loss, grads[0], grads[1], grads[2], grads[3], grads[4], grads[5]};
  void *workspace = alloc_aligned(RNN_MAIN_ADJOINT_WORKSPACE_SIZE);

  printf("workspace: %d bytes\n", (int)RNN_MAIN_ADJOINT_WORKSPACE_SIZE);
  const float lr = 0.5f;
  float first = 0;
  for (int step = 0; step < 60; ++step) {
    int32_t rc = rnn_main_adjoint(&in, &out, workspace);
    if (rc != 0) {
      fprintf(stderr, "rnn_main_adjoint failed: %s\n", rnn_strerror(rc));
      return 1;
    }
    if (step % 10 == 0 || step == 59)
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
