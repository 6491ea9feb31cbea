/* threads_app.c - the thread pool of a compiled object, seen from C.
 * Runs @main_adjoint of threads.relay with 1 thread, with 2, and from two
 * application threads at once (each with its own workspace), and checks that
 * every result is bitwise the same. Links with `cc app.c m.o -lm` only. */
#define _POSIX_C_SOURCE 200809L
#include "m.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OUT 4
static const size_t out_bytes[N_OUT] = {M_MAIN_ADJOINT_OUTPUT_0_BYTES, M_MAIN_ADJOINT_OUTPUT_1_BYTES,
                                        M_MAIN_ADJOINT_OUTPUT_2_BYTES, M_MAIN_ADJOINT_OUTPUT_3_BYTES};

static void *alloc(size_t bytes) {
  void *p = aligned_alloc(M_ALIGNMENT, (bytes + M_ALIGNMENT - 1) / M_ALIGNMENT * M_ALIGNMENT + M_ALIGNMENT);
  memset(p, 0xAB, bytes); /* garbage: an unwritten output never passes as zero */
  return p;
}

static float *x, *w, *b;

static void run(void **outs) {
  struct m_main_adjoint_inputs in = {x, w, b};
  struct m_main_adjoint_outputs out;
  void **fields = (void **)&out;
  for (int i = 0; i < N_OUT; ++i)
    fields[i] = outs[i] = alloc(out_bytes[i]);
  void *ws = M_MAIN_ADJOINT_WORKSPACE_SIZE ? alloc(M_MAIN_ADJOINT_WORKSPACE_SIZE) : NULL;
  int rc = m_main_adjoint(&in, &out, ws);
  if (rc != 0) {
    printf("error: %s\n", m_strerror(rc));
    exit(1);
  }
  free(ws);
}

static void *thread_main(void *outs) {
  run(outs);
  return NULL;
}

static int same(void **a, void **b) {
  for (int i = 0; i < N_OUT; ++i)
    if (memcmp(a[i], b[i], out_bytes[i]) != 0)
      return 0;
  return 1;
}

int main(void) {
  x = alloc(M_MAIN_ADJOINT_X_BYTES);
  w = alloc(M_MAIN_ADJOINT_W_BYTES);
  b = alloc(M_MAIN_ADJOINT_B_BYTES);
  for (size_t i = 0; i < M_MAIN_ADJOINT_X_SIZE; ++i)
    x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  for (size_t i = 0; i < M_MAIN_ADJOINT_W_SIZE; ++i)
    w[i] = (float)((i * 40503u) % 1000) / 5000.0f - 0.1f;
  for (size_t i = 0; i < M_MAIN_ADJOINT_B_SIZE; ++i)
    b[i] = (float)i / 1000.0f;

  void *one[N_OUT], *two[N_OUT], *t1[N_OUT], *t2[N_OUT];
  m_set_num_threads(1);
  printf("threads: %d\n", m_get_num_threads());
  run(one);
  m_set_num_threads(2);
  printf("threads: %d\n", m_get_num_threads());
  run(two);
  pthread_t a, c;
  pthread_create(&a, NULL, thread_main, t1);
  pthread_create(&c, NULL, thread_main, t2);
  pthread_join(a, NULL);
  pthread_join(c, NULL);
  printf("1 vs 2 threads: %s\n", same(one, two) ? "identical" : "DIFFERENT");
  printf("concurrent callers: %s\n", same(one, t1) && same(one, t2) ? "identical" : "DIFFERENT");
  printf("loss: %.6f\n", *(float *)one[0]);
  return 0;
}
