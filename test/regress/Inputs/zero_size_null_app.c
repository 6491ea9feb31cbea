/* Calls m_main of test/regress/zero_size_tensors_accept_null.test with NULL for its empty
 * input and output, then with NULL for a non-empty one. */
#include "m.h"

#include <stdio.h>

int main(void) {
  static float y[2] __attribute__((aligned(64))) = {1, 2};
  static float sum __attribute__((aligned(64))), y2[2] __attribute__((aligned(64)));
  struct m_main_inputs in = {NULL, y};
  struct m_main_outputs out = {&sum, y2, NULL};
  sum = y2[0] = y2[1] = -777; /* garbage: an unwritten output never passes */
  int32_t rc = m_main(&in, &out, NULL);
  printf("empty tensors NULL: rc=%d sum=%g y2=%g,%g\n", rc, sum, y2[0], y2[1]);
  struct m_main_inputs bad = {NULL, NULL};
  printf("non-empty NULL: rc=%d\n", m_main(&bad, &out, NULL));
  return 0;
}
