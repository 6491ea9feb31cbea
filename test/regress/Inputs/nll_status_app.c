/* Calls m_main of test/regress/nll_loss_index_out_of_range.test with targets given on the
 * command line; prints the return code and what m_strerror says of it. */
#include "m.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  static float p[40] __attribute__((aligned(64)));
  static int64_t t[4] __attribute__((aligned(64)));
  static float loss __attribute__((aligned(64)));
  void *ws = aligned_alloc(64, M_MAIN_WORKSPACE_SIZE);
  memset(ws, 0xAB, M_MAIN_WORKSPACE_SIZE); /* garbage: nothing may rely on a zeroed workspace */
  memset(&loss, 0xAB, sizeof loss);
  for (int i = 0; i < 4 && i + 1 < argc; ++i)
    t[i] = atoll(argv[i + 1]);
  struct m_main_inputs in = {p, t};
  struct m_main_outputs out = {&loss};
  int32_t rc = m_main(&in, &out, ws);
  printf("rc=%d %s\n", rc, m_strerror(rc));
  free(ws);
  return 0;
}
