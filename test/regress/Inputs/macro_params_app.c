/* Includes every C library header whose macros a parameter may be named
 * after, then the header gradc wrote, and calls @main through it. */
#define _GNU_SOURCE 1 /* M_PI and the other POSIX constants of math.h */
#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <wchar.h>
#ifndef __cplusplus
#include <complex.h>
#include <stdnoreturn.h>
#endif
#include "m.h"

#ifdef __cplusplus
#define ALIGNED alignas(M_ALIGNMENT)
#else
#define ALIGNED _Alignas(M_ALIGNMENT)
#endif

int main(void) {
  /* Rows of 64 bytes: every buffer aligned to M_ALIGNMENT. */
  ALIGNED static float buf[13][M_ALIGNMENT / sizeof(float)];
  struct m_main_inputs in;
  struct m_main_outputs res;
  int n, p;
  if (M_MAIN_P_INT32_MAX_SIZE != 2 || M_MAIN_P_NULL_SIZE != 2 || M_MAIN_P_EOF_BYTES != 8 || M_MAIN_P_I_RANK != 1 ||
      M_MAIN_P_PRID64_DIM0 != 2 || M_MAIN_P_M_OTHER_Y_SIZE_SIZE != 2 || M_OTHER_Y_SIZE != 3)
    return 3;
  for (p = 0; p < 12; ++p)
    for (n = 0; n < 2; ++n)
      buf[p][n] = (float)(1 << p);
  in.p_INT32_MAX = buf[0], in.p_int8_t = buf[1], in.p_NULL = buf[2], in.p_uint64_t = buf[3];
  in.p_SIZE_MAX = buf[4], in.p_EOF = buf[5], in.p_errno = buf[6], in.p_M_ALIGNMENT = buf[7];
  in.p_int = buf[8], in.p_I = buf[9], in.p_PRId64 = buf[10], in.p_M_OTHER_Y_SIZE = buf[11];
  res.output_0 = buf[12];
  buf[12][0] = buf[12][1] = NAN; /* an unwritten output never passes */
  if (m_main(&in, &res, NULL) != 0)
    return 1;
  printf("%g %g\n", buf[12][0], buf[12][1]);
  return buf[12][0] == 4095 && buf[12][1] == 4095 ? 0 : 2;
}
