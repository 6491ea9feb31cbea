/* Runs m_main of test/regress/header_stack_size.test on a thread whose stack is the header's
 * M_MAIN_STACK_SIZE plus 64 KiB for frames, with the pool off (1 thread). */
#define _POSIX_C_SOURCE 200809L
#include "m.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *garbage(size_t bytes) {
  size_t size = (bytes / M_ALIGNMENT + 1) * M_ALIGNMENT;
  void *p = aligned_alloc(M_ALIGNMENT, size);
  memset(p, 0, size);
  return p;
}

static void *call(void *rc) {
  struct m_main_inputs in = {garbage(M_MAIN_X_BYTES), garbage(M_MAIN_W_BYTES)};
  struct m_main_outputs out = {garbage(M_MAIN_OUTPUT_0_BYTES)};
  *(int32_t *)rc = m_main(&in, &out, garbage(M_MAIN_WORKSPACE_SIZE));
  return NULL;
}

int main(void) {
  m_set_num_threads(1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstacksize(&attr, M_MAIN_STACK_SIZE + 65536) != 0)
    return 2;
  pthread_t thread;
  int32_t rc = -1;
  if (pthread_create(&thread, &attr, call, &rc) != 0)
    return 3;
  pthread_join(thread, NULL);
  printf("stack %d + 64 KiB: rc=%d\n", (int)M_MAIN_STACK_SIZE, rc);
  return 0;
}
