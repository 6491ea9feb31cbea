/* Loads test/codegen/threads.relay's object as a shared library, calls @main_adjoint on the
 * thread pool, unloads it, and does that 20 times; then the same with m_shutdown_threads()
 * between calls (the pool starts again). Workers left spinning in the unmapped code crashed
 * the process right after dlclose. */
#define _POSIX_C_SOURCE 200809L
#include "m.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int32_t (*entry_fn)(const struct m_main_adjoint_inputs *, struct m_main_adjoint_outputs *, void *);

static void *garbage(size_t bytes) {
  size_t size = (bytes / M_ALIGNMENT + 1) * M_ALIGNMENT;
  void *p = aligned_alloc(M_ALIGNMENT, size);
  memset(p, 0xAB, size);
  return p;
}

static void call(void *lib, int shutdown_between) {
  entry_fn entry = (entry_fn)dlsym(lib, "m_main_adjoint");
  void (*set_threads)(int32_t) = (void (*)(int32_t))dlsym(lib, "m_set_num_threads");
  void (*shutdown)(void) = (void (*)(void))dlsym(lib, "m_shutdown_threads");
  if (!entry || !set_threads || !shutdown) {
    printf("missing symbol\n");
    exit(1);
  }
  set_threads(2);
  float *x = garbage(M_MAIN_ADJOINT_X_BYTES), *w = garbage(M_MAIN_ADJOINT_W_BYTES), *b = garbage(M_MAIN_ADJOINT_B_BYTES);
  for (size_t i = 0; i < M_MAIN_ADJOINT_X_BYTES / sizeof(float); ++i)
    x[i] = 0.001f * (float)i;
  memset(w, 0, M_MAIN_ADJOINT_W_BYTES);
  memset(b, 0, M_MAIN_ADJOINT_B_BYTES);
  struct m_main_adjoint_inputs in = {x, w, b};
  struct m_main_adjoint_outputs out = {garbage(M_MAIN_ADJOINT_OUTPUT_0_BYTES), garbage(M_MAIN_ADJOINT_OUTPUT_1_BYTES),
                                       garbage(M_MAIN_ADJOINT_OUTPUT_2_BYTES), garbage(M_MAIN_ADJOINT_OUTPUT_3_BYTES)};
  void *ws = garbage(M_MAIN_ADJOINT_WORKSPACE_SIZE);
  for (int k = 0; k < 3; ++k) {
    if (entry(&in, &out, ws) != 0) {
      printf("call failed\n");
      exit(1);
    }
    if (shutdown_between)
      shutdown();
  }
}

int main(int argc, char **argv) {
  int shutdown_between = argc > 2;
  for (int i = 0; i < 20; ++i) {
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      printf("dlopen: %s\n", dlerror());
      return 1;
    }
    call(lib, shutdown_between);
    if (dlclose(lib) != 0) {
      printf("dlclose: %s\n", dlerror());
      return 1;
    }
    struct timespec pause = {0, 2000000}; /* 2 ms: long enough for a stray worker to run */
    nanosleep(&pause, NULL);
  }
  printf("20 loads, calls and unloads%s: ok\n", shutdown_between ? " with shutdowns" : "");
  return 0;
}
