/* transformer_app.c - train the sample transformer block a few steps with the
 * compiled gradient, on a toy next-token task.
 *
 * Links against the object gradc writes for samples/transformer.relay:
 *   gradc compile samples/transformer.relay --grad \
 *     --wrt=%E,%P,%ln1_g,%ln1_b,%Wqkv,%bqkv,%Wo,%bo,%ln2_g,%ln2_b,%W1,%b1,%W2,%b2 -o transformer
 *   cc -O2 samples/transformer_app.c transformer.o -I. -lm -o transformer_app && ./transformer_app
 * Each sequence counts up from a random token (mod 16), so the next token is
 * always the current one plus one: there is something to learn. Prints the
 * loss of each SGD step.
 */
#include "transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PARAMS = 14, BATCH = 4, SEQ = 8, VOCAB = 16 };

static uint32_t rng_state = 7u;
static uint32_t next_random(void) { /* xorshift32 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}
static float uniform(void) { return (float)(next_random() >> 8) / 8388608.0f - 1.0f; } /* [-1, 1) */

static void *alloc_aligned(size_t bytes) {
  size_t size = (bytes + TRANSFORMER_ALIGNMENT - 1) / TRANSFORMER_ALIGNMENT * TRANSFORMER_ALIGNMENT;
  void *p = aligned_alloc(TRANSFORMER_ALIGNMENT, size ? size : TRANSFORMER_ALIGNMENT);
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
  int64_t *tokens = alloc_aligned(BATCH * SEQ * sizeof(int64_t));
  int64_t *targets = alloc_aligned(BATCH * SEQ * sizeof(int64_t));
  for (int b = 0; b < BATCH; ++b) {
    int64_t start = (int64_t)(next_random() % VOCAB);
    for (int t = 0; t < SEQ; ++t) {
      tokens[b * SEQ + t] = (start + t) % VOCAB;
      targets[b * SEQ + t] = (start + t + 1) % VOCAB;
    }
  }
  float *mask = alloc_aligned(SEQ * SEQ * sizeof(float));
  for (int i = 0; i < SEQ; ++i)
    for (int j = 0; j < SEQ; ++j)
      mask[i * SEQ + j] = j > i ? -1e9f : 0.0f;
  size_t sizes[PARAMS] = {
      TRANSFORMER_MAIN_ADJOINT_E_SIZE,    TRANSFORMER_MAIN_ADJOINT_P_SIZE,  TRANSFORMER_MAIN_ADJOINT_LN1_G_SIZE,
      TRANSFORMER_MAIN_ADJOINT_LN1_B_SIZE, TRANSFORMER_MAIN_ADJOINT_WQKV_SIZE, TRANSFORMER_MAIN_ADJOINT_BQKV_SIZE,
      TRANSFORMER_MAIN_ADJOINT_WO_SIZE,   TRANSFORMER_MAIN_ADJOINT_BO_SIZE, TRANSFORMER_MAIN_ADJOINT_LN2_G_SIZE,
      TRANSFORMER_MAIN_ADJOINT_LN2_B_SIZE, TRANSFORMER_MAIN_ADJOINT_W1_SIZE,  TRANSFORMER_MAIN_ADJOINT_B1_SIZE,
      TRANSFORMER_MAIN_ADJOINT_W2_SIZE,   TRANSFORMER_MAIN_ADJOINT_B2_SIZE};
  /* matrices ~ 1/sqrt(fan-in), layer norm scales 1, biases 0 */
  float *params[PARAMS] = {filled(sizes[0], 0, 0.5f),  filled(sizes[1], 0, 0.1f), filled(sizes[2], 1, 0),
                           filled(sizes[3], 0, 0),     filled(sizes[4], 0, 0.3f), filled(sizes[5], 0, 0),
                           filled(sizes[6], 0, 0.3f),  filled(sizes[7], 0, 0),    filled(sizes[8], 1, 0),
                           filled(sizes[9], 0, 0),     filled(sizes[10], 0, 0.3f), filled(sizes[11], 0, 0),
                           filled(sizes[12], 0, 0.2f), filled(sizes[13], 0, 0)};
  struct transformer_main_adjoint_inputs in = {tokens,     targets,    mask,       params[0],  params[1],
                                               params[2],  params[3],  params[4],  params[5],  params[6],
                                               params[7],  params[8],  params[9],  params[10], params[11],
                                               params[12], params[13]};
  struct transformer_main_adjoint_outputs out;
  float *loss = alloc_aligned(sizeof(float));
  float *grads[PARAMS];
  for (int p = 0; p < PARAMS; ++p)
    grads[p] = alloc_aligned(sizes[p] * sizeof(float));
  out.output_0 = loss;
  out.output_1 = grads[0], out.output_2 = grads[1], out.output_3 = grads[2], out.output_4 = grads[3];
  out.output_5 = grads[4], out.output_6 = grads[5], out.output_7 = grads[6], out.output_8 = grads[7];
  out.output_9 = grads[8], out.output_10 = grads[9], out.output_11 = grads[10], out.output_12 = grads[11];
  out.output_13 = grads[12], out.output_14 = grads[13];
  void *workspace = alloc_aligned(TRANSFORMER_MAIN_ADJOINT_WORKSPACE_SIZE);

  printf("workspace: %d bytes\n", (int)TRANSFORMER_MAIN_ADJOINT_WORKSPACE_SIZE);
  const float lr = 0.2f;
  float first = 0;
  for (int step = 0; step < 30; ++step) {
    int32_t rc = transformer_main_adjoint(&in, &out, workspace);
    if (rc != 0) {
      fprintf(stderr, "transformer_main_adjoint failed: %s\n", transformer_strerror(rc));
      return 1;
    }
    double gnorm = 0;
    for (int p = 0; p < PARAMS; ++p)
      for (size_t i = 0; i < sizes[p]; ++i)
        gnorm += (double)grads[p][i] * grads[p][i];
    if (step % 5 == 0 || step == 29)
      printf("step %d: loss %.4f  |grad| %.4f\n", step, *loss, sqrt(gnorm));
    if (!isfinite(*loss) || !isfinite(gnorm))
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
