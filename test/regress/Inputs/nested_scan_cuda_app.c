/* Calls m_main_adjoint of nested_scan_checkpoint_slots.test's CUDA object against
 * nested_scan_fake_cuda.c (the buffers are never read: no kernel runs) and prints the rc. */
#include "m.h"

#include <stdio.h>
#include <stdlib.h>

static void *buffer(size_t bytes) { return aligned_alloc(M_ALIGNMENT, (bytes / M_ALIGNMENT + 1) * M_ALIGNMENT); }

int main(void) {
  struct m_main_adjoint_inputs in = {buffer(M_MAIN_ADJOINT_H0_BYTES), buffer(M_MAIN_ADJOINT_X_BYTES),
                                     buffer(M_MAIN_ADJOINT_W_BYTES)};
  struct m_main_adjoint_outputs out = {buffer(M_MAIN_ADJOINT_OUTPUT_0_BYTES), buffer(M_MAIN_ADJOINT_OUTPUT_1_BYTES),
                                       buffer(M_MAIN_ADJOINT_OUTPUT_2_BYTES), buffer(M_MAIN_ADJOINT_OUTPUT_3_BYTES)};
  printf("rc=%d\n", m_main_adjoint(&in, &out, buffer(M_MAIN_ADJOINT_WORKSPACE_SIZE), NULL));
  return 0;
}
