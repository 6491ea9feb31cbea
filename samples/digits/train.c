/* Trains the digits CNN (digits.relay) from C with the compiled training
 * step: one call per batch computes the loss, the gradients and Adam's
 * update of every weight, its moments and the batch norm's running
 * statistics, all in place. No gradient buffer, no optimizer code here.
 *
 *   gradc compile digits.relay --train='adam(lr=0.003)' \
 *     --wrt=%w1,%g1,%b1,%w2,%b2,%w3,%b3 -o digits
 *   cc -O2 -I. train.c digits.o -lm -lpthread -o train
 *   ./train DATA_DIR [EPOCHS] [CURVES.csv]
 *
 * DATA_DIR holds prepare.py's train_x.npy, train_y.npy, test_x.npy and
 * test_y.npy. Prints the mean loss and the test accuracy every epoch, and
 * writes them to CURVES.csv (plot.py draws them). Exits 1 below 95%. */
#include "digits.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 32, TEST = 360, PIXELS = 64, CLASSES = 10 };

static void *buffer(size_t bytes) {
  size_t rounded = (bytes + DIGITS_ALIGNMENT - 1) / DIGITS_ALIGNMENT * DIGITS_ALIGNMENT;
  void *p = aligned_alloc(DIGITS_ALIGNMENT, rounded ? rounded : DIGITS_ALIGNMENT);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

/* A .npy file of `count` values of `descr` ("<f4" or "<i8"), or exit. */
static void *load_npy(const char *dir, const char *name, const char *descr, size_t elem, size_t *count) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  unsigned char head[12];
  if (!f || fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "%s: not a .npy file (run prepare.py)\n", path);
    exit(2);
  }
  size_t header = head[8] | (size_t)head[9] << 8;
  if (head[6] >= 2) { /* format 2.0: a 4-byte header length */
    if (fread(head + 10, 1, 2, f) != 2) {
      fprintf(stderr, "%s: truncated\n", path);
      exit(2);
    }
    header |= (size_t)head[10] << 16 | (size_t)head[11] << 24;
  }
  char *dict = malloc(header + 1);
  if (fread(dict, 1, header, f) != header) {
    fprintf(stderr, "%s: truncated header\n", path);
    exit(2);
  }
  dict[header] = '\0';
  if (!strstr(dict, descr) || strstr(dict, "'fortran_order': True")) {
    fprintf(stderr, "%s: expected C-order %s values: %s\n", path, descr, dict);
    exit(2);
  }
  long start = ftell(f);
  fseek(f, 0, SEEK_END);
  *count = (size_t)(ftell(f) - start) / elem;
  fseek(f, start, SEEK_SET);
  void *data = buffer(*count * elem);
  if (fread(data, elem, *count, f) != *count) {
    fprintf(stderr, "%s: truncated data\n", path);
    exit(2);
  }
  free(dict);
  fclose(f);
  return data;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static double uniform(void) { /* xorshift64*, in [0, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717u) >> 11) / 9007199254740992.0;
}

/* n floats: PyTorch's default initialisation U(-1/sqrt(fan_in), 1/sqrt(fan_in)), or `fill`. */
static float *weights(size_t n, size_t fan_in, float fill) {
  float *w = buffer(n * sizeof(float));
  double bound = fan_in ? 1.0 / sqrt((double)fan_in) : 0;
  for (size_t i = 0; i < n; ++i)
    w[i] = fan_in ? (float)((2 * uniform() - 1) * bound) : fill;
  return w;
}

static void *garbage(size_t bytes) {
  if (bytes == 0)
    return NULL;
  void *p = buffer(bytes);
  memset(p, 0xA5, bytes); /* the compiled code must not read what it did not write */
  return p;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR [EPOCHS] [CURVES.csv]\n", argv[0]);
    return 2;
  }
  int epochs = argc > 2 ? atoi(argv[2]) : 12;
  FILE *curves = argc > 3 ? fopen(argv[3], "w") : NULL;
  size_t n_train, n_labels, n_test, n_test_labels;
  float *train_x = load_npy(argv[1], "train_x.npy", "<f4", 4, &n_train);
  int64_t *train_y = load_npy(argv[1], "train_y.npy", "<i8", 8, &n_labels);
  float *test_x = load_npy(argv[1], "test_x.npy", "<f4", 4, &n_test);
  int64_t *test_y = load_npy(argv[1], "test_y.npy", "<i8", 8, &n_test_labels);
  n_train /= PIXELS;
  if (n_train != n_labels || n_test != TEST * PIXELS || n_test_labels != TEST) {
    fprintf(stderr, "unexpected data sizes (run prepare.py)\n");
    return 2;
  }

  /* The model's parameters, and the running statistics (mean 0, variance 1). */
  struct digits_main_train_step_inputs in;
  in.w1 = weights(DIGITS_MAIN_TRAIN_STEP_W1_SIZE, 9, 0);
  in.g1 = weights(16, 0, 1);
  in.b1 = weights(16, 0, 0);
  in.rm = weights(16, 0, 0);
  in.rv = weights(16, 0, 1);
  in.w2 = weights(DIGITS_MAIN_TRAIN_STEP_W2_SIZE, 16 * 9, 0);
  in.b2 = weights(32, 16 * 9, 0);
  in.w3 = weights(DIGITS_MAIN_TRAIN_STEP_W3_SIZE, 128, 0);
  in.b3 = weights(10, 128, 0);
  /* Adam's state: zeros before the first step, as torch.optim starts. */
  float **state[] = {&in.w1_exp_avg, &in.w1_exp_avg_sq, &in.g1_exp_avg, &in.g1_exp_avg_sq,
                     &in.b1_exp_avg, &in.b1_exp_avg_sq, &in.w2_exp_avg, &in.w2_exp_avg_sq,
                     &in.b2_exp_avg, &in.b2_exp_avg_sq, &in.w3_exp_avg, &in.w3_exp_avg_sq,
                     &in.b3_exp_avg, &in.b3_exp_avg_sq};
  const size_t state_size[] = {144, 144, 16, 16, 16, 16, 4608, 4608, 32, 32, 1280, 1280, 10, 10};
  for (size_t i = 0; i < sizeof state / sizeof *state; ++i)
    *state[i] = weights(state_size[i], 0, 0);
  int64_t *step = buffer(sizeof(int64_t));
  *step = 0;
  float *lr = buffer(sizeof(float));
  float *x = buffer(BATCH * PIXELS * sizeof(float));
  int64_t *y = buffer(BATCH * sizeof(int64_t));
  in.x = x;
  in.y = y;
  in.step = step;
  in.lr = lr;
  float *loss = garbage(sizeof(float));
  struct digits_main_train_step_outputs out = {loss};
  void *workspace = garbage(DIGITS_MAIN_TRAIN_STEP_WORKSPACE_SIZE);

  /* Inference on the test set with the running statistics. */
  struct digits_predict_inputs pin = {test_x, in.w1, in.g1, in.b1, in.rm, in.rv, in.w2, in.b2, in.w3, in.b3};
  float *logits = garbage(TEST * CLASSES * sizeof(float));
  struct digits_predict_outputs pout = {logits};
  void *predict_workspace = garbage(DIGITS_PREDICT_WORKSPACE_SIZE);

  printf("digits: %zu training, %d test images; step workspace %d bytes, no gradient buffer\n", n_train, TEST,
         DIGITS_MAIN_TRAIN_STEP_WORKSPACE_SIZE);
  if (curves)
    fprintf(curves, "epoch,loss,accuracy\n");
  size_t *order = malloc(n_train * sizeof *order);
  for (size_t i = 0; i < n_train; ++i)
    order[i] = i;
  double accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (size_t i = n_train - 1; i > 0; --i) { /* a new order every epoch */
      size_t j = (size_t)(uniform() * (double)(i + 1)), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    /* A cosine schedule: the rate is an input of the step. */
    *lr = (float)(DIGITS_MAIN_TRAIN_STEP_DEFAULT_LR * 0.5 * (1 + cos(M_PI * (epoch - 1) / epochs)));
    double sum = 0;
    size_t batches = n_train / BATCH;
    for (size_t b = 0; b < batches; ++b) {
      for (size_t i = 0; i < BATCH; ++i) {
        memcpy(x + i * PIXELS, train_x + order[b * BATCH + i] * PIXELS, PIXELS * sizeof(float));
        y[i] = train_y[order[b * BATCH + i]];
      }
      int32_t status = digits_main_train_step(&in, &out, workspace);
      if (status != 0) {
        fprintf(stderr, "step: %s\n", digits_strerror(status));
        return 2;
      }
      sum += *loss;
    }
    int32_t status = digits_predict(&pin, &pout, predict_workspace);
    if (status != 0) {
      fprintf(stderr, "predict: %s\n", digits_strerror(status));
      return 2;
    }
    int correct = 0;
    for (int i = 0; i < TEST; ++i) {
      int best = 0;
      for (int c = 1; c < CLASSES; ++c)
        if (logits[i * CLASSES + c] > logits[i * CLASSES + best])
          best = c;
      correct += best == test_y[i];
    }
    accuracy = (double)correct / TEST;
    printf("epoch %2d  lr %.5f  loss %.4f  test accuracy %.2f%%  (steps %lld)\n", epoch, *lr, sum / batches,
           100 * accuracy, (long long)*step);
    if (curves)
      fprintf(curves, "%d,%.6f,%.6f\n", epoch, sum / batches, accuracy);
  }
  if (curves)
    fclose(curves);
  printf("final test accuracy %.2f%%: %s\n", 100 * accuracy, accuracy >= 0.95 ? "reached 95%" : "BELOW 95%");
  return accuracy >= 0.95 ? 0 : 1;
}
