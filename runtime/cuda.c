/* cuda.c - the host side of gradc's --target=cuda: gradc_rt_cuda_run (gradc_runtime.h).
 * Each entry point of a CUDA module calls it with the module's embedded PTX and its launches.
 * libcuda is opened at run time and the few driver declarations needed are written out below,
 * so neither building nor linking needs CUDA or its headers. */
#define _POSIX_C_SOURCE 200809L

#include "gradc_runtime.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
  GRADC_RT_CUDA_SUCCESS = 0,         /* CUDA_SUCCESS */
  GRADC_RT_CUDA_POINTER_CONTEXT = 1, /* CU_POINTER_ATTRIBUTE_CONTEXT */
  GRADC_RT_NO_LIBCUDA = 3,           /* the status codes of gradc's entry points */
  GRADC_RT_DRIVER_FAILED = 4
};

/* The driver functions that gradc_rt_cuda_open resolves, with cuda.h's signatures: handles are
 * pointers, CUresult an int, CUdeviceptr 64 bits. */
struct gradc_rt_cuda_driver {
  int (*init)(unsigned flags);
  int (*ctx_get_current)(void **context);
  int (*pointer_get_attribute)(void *data, int attribute, uint64_t address);
  int (*ctx_push_current)(void *context);
  int (*ctx_pop_current)(void **context);
  int (*module_load_data)(void **module, const void *image);
  int (*module_get_function)(void **function, void *module, const char *name);
  int (*launch_kernel)(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                       unsigned block_y, unsigned block_z, unsigned shared_bytes, void *stream, void **params,
                       void **extra);
  int (*stream_synchronize)(void *stream);
  int (*module_unload)(void *module);
  int (*memset_d8)(uint64_t address, unsigned char value, size_t bytes);    /* only with a status word */
  int (*memcpy_dtoh)(void *destination, uint64_t source, size_t bytes);     /* only with a status word */
  int (*ctx_get_id)(void *context, unsigned long long *id);                 /* optional (CUDA 12) */
};

/* Modules stay loaded, one per (context, PTX): loading a module (the driver JIT-compiles the
 * PTX or fetches it from its disk cache) took about as long as the kernels of a small training
 * step. A context is named by its unique id (cuCtxGetId, CUDA 12), which no later context
 * reuses, so a destroyed context's entry can never be hit again; with a driver that lacks it,
 * each call loads and unloads its module as before. The table is this object's own (the
 * runtime is linked into every object), so a PTX pointer in it is always this object's. When
 * the table is full, calls with a new key load and unload as before. */
enum { GRADC_RT_CUDA_MODULES = 16 };
static struct gradc_rt_cuda_module {
  const char *ptx;
  unsigned long long context_id;
  void *module;
} gradc_rt_cuda_modules[GRADC_RT_CUDA_MODULES];
static int gradc_rt_cuda_num_modules;
static pthread_mutex_t gradc_rt_cuda_modules_lock = PTHREAD_MUTEX_INITIALIZER;

/* The module of `ptx` in `context`: a cached one (*cached = 1), or one loaded now that the
 * caller unloads when done (*cached = 0). Returns 0 when loading fails. */
static int gradc_rt_cuda_module(const struct gradc_rt_cuda_driver *d, void *context, const char *ptx,
                                void **module, int *cached) {
  unsigned long long id = 0;
  *cached = 0;
  if (d->ctx_get_id == NULL || d->ctx_get_id(context, &id) != GRADC_RT_CUDA_SUCCESS)
    return d->module_load_data(module, ptx) == GRADC_RT_CUDA_SUCCESS;
  pthread_mutex_lock(&gradc_rt_cuda_modules_lock);
  for (int i = 0; i < gradc_rt_cuda_num_modules; ++i)
    if (gradc_rt_cuda_modules[i].ptx == ptx && gradc_rt_cuda_modules[i].context_id == id) {
      *module = gradc_rt_cuda_modules[i].module;
      *cached = 1;
      pthread_mutex_unlock(&gradc_rt_cuda_modules_lock);
      return 1;
    }
  int loaded = d->module_load_data(module, ptx) == GRADC_RT_CUDA_SUCCESS;
  if (loaded && gradc_rt_cuda_num_modules < GRADC_RT_CUDA_MODULES) {
    struct gradc_rt_cuda_module entry = {ptx, id, *module};
    gradc_rt_cuda_modules[gradc_rt_cuda_num_modules++] = entry;
    *cached = 1;
  }
  pthread_mutex_unlock(&gradc_rt_cuda_modules_lock);
  return loaded;
}

/* POSIX guarantees that dlsym's data pointer converts to a function pointer; memcpy says so
 * without a cast that ISO C does not define. */
static int gradc_rt_cuda_resolve(void *library, const char *name, void *function_pointer) {
  void *symbol = dlsym(library, name);
  memcpy(function_pointer, &symbol, sizeof symbol);
  return symbol != NULL;
}

/* By the names libcuda exports for the current ABI of each function (the _v2 ones where it
 * exports several). */
static int gradc_rt_cuda_open(struct gradc_rt_cuda_driver *d) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL)
    return 0;
  int found = gradc_rt_cuda_resolve(lib, "cuInit", &d->init);
  found &= gradc_rt_cuda_resolve(lib, "cuCtxGetCurrent", &d->ctx_get_current);
  found &= gradc_rt_cuda_resolve(lib, "cuPointerGetAttribute", &d->pointer_get_attribute);
  found &= gradc_rt_cuda_resolve(lib, "cuCtxPushCurrent_v2", &d->ctx_push_current);
  found &= gradc_rt_cuda_resolve(lib, "cuCtxPopCurrent_v2", &d->ctx_pop_current);
  found &= gradc_rt_cuda_resolve(lib, "cuModuleLoadData", &d->module_load_data);
  found &= gradc_rt_cuda_resolve(lib, "cuModuleGetFunction", &d->module_get_function);
  found &= gradc_rt_cuda_resolve(lib, "cuLaunchKernel", &d->launch_kernel);
  found &= gradc_rt_cuda_resolve(lib, "cuStreamSynchronize", &d->stream_synchronize);
  found &= gradc_rt_cuda_resolve(lib, "cuModuleUnload", &d->module_unload);
  if (!gradc_rt_cuda_resolve(lib, "cuCtxGetId", &d->ctx_get_id))
    d->ctx_get_id = NULL;
  return found;
}

static int gradc_rt_cuda_fits(int64_t size) { return size >= 1 && size <= UINT_MAX; }

/* Launches [first, last) in order, each time loop that starts there (among loops[from ..),
 * which are sorted outer first) repeated `extent` times (or its next trip count: cursors[loop]
 * counts its entries, modulo the table's length), until one launch fails or has a size that
 * the driver cannot take;
 * counts the launches made in *launched. Returns 1 if all were. */
static int gradc_rt_cuda_launch_range(const struct gradc_rt_cuda_driver *d, void *module,
                                      const gradc_rt_cuda_launch *launches, const gradc_rt_cuda_loop *loops,
                                      int64_t *cursors, int32_t num_loops, int32_t from, int32_t first,
                                      int32_t last, void *stream, int64_t *launched) {
  for (int32_t i = first; i < last;) {
    int32_t loop = from;
    while (loop < num_loops && !(loops[loop].first == i && loops[loop].last <= last))
      ++loop;
    if (loop < num_loops) {
      int64_t trips = loops[loop].extent;
      if (loops[loop].trips && loops[loop].num_trips > 0) {
        trips = loops[loop].trips[cursors[loop]];
        cursors[loop] = (cursors[loop] + 1) % loops[loop].num_trips;
      }
      for (int64_t step = 0; step < trips; ++step)
        if (!gradc_rt_cuda_launch_range(d, module, launches, loops, cursors, num_loops, loop + 1,
                                        loops[loop].first, loops[loop].last, stream, launched))
          return 0;
      i = loops[loop].last;
      continue;
    }
    const gradc_rt_cuda_launch *l = &launches[i];
    void *function = NULL;
    if (!gradc_rt_cuda_fits(l->grid) || !gradc_rt_cuda_fits(l->block) ||
        d->module_get_function(&function, module, l->kernel) != GRADC_RT_CUDA_SUCCESS ||
        d->launch_kernel(function, (unsigned)l->grid, 1, 1, (unsigned)l->block, 1, 1, 0, stream, l->args, NULL) !=
            GRADC_RT_CUDA_SUCCESS)
      return 0;
    ++*launched;
    ++i;
  }
  return 1;
}

int32_t gradc_rt_cuda_run(const char *ptx, const gradc_rt_cuda_launch *launches, int32_t num_launches, void *stream,
                          const void *context_owner, void *status_word) {
  return gradc_rt_cuda_run_loops(ptx, launches, num_launches, NULL, 0, stream, context_owner, status_word);
}

int32_t gradc_rt_cuda_run_loops(const char *ptx, const gradc_rt_cuda_launch *launches, int32_t num_launches,
                                const gradc_rt_cuda_loop *loops, int32_t num_loops, void *stream,
                                const void *context_owner, void *status_word) {
  if (num_launches <= 0)
    return 0;
  struct gradc_rt_cuda_driver d = {0};
  if (!gradc_rt_cuda_open(&d))
    return GRADC_RT_NO_LIBCUDA;
  if (status_word != NULL) {
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL || !gradc_rt_cuda_resolve(library, "cuMemsetD8_v2", &d.memset_d8) ||
        !gradc_rt_cuda_resolve(library, "cuMemcpyDtoH_v2", &d.memcpy_dtoh))
      return GRADC_RT_NO_LIBCUDA;
  }
  uint64_t status_address = (uint64_t)(uintptr_t)status_word;
  void *context = NULL;
  if (d.init(0) != GRADC_RT_CUDA_SUCCESS || d.ctx_get_current(&context) != GRADC_RT_CUDA_SUCCESS)
    return GRADC_RT_DRIVER_FAILED;
  /* A thread on which the caller never used CUDA has no current context; the buffers' own
   * context is the one the kernels must run in. */
  int pushed = context == NULL;
  if (pushed && (d.pointer_get_attribute(&context, GRADC_RT_CUDA_POINTER_CONTEXT, (uint64_t)(uintptr_t)context_owner) !=
                     GRADC_RT_CUDA_SUCCESS ||
                 d.ctx_push_current(context) != GRADC_RT_CUDA_SUCCESS))
    return GRADC_RT_DRIVER_FAILED;

  int32_t status = GRADC_RT_DRIVER_FAILED;
  void *module = NULL;
  int cached = 0;
  if ((status_word == NULL || d.memset_d8(status_address, 0, sizeof(int64_t)) == GRADC_RT_CUDA_SUCCESS) &&
      gradc_rt_cuda_module(&d, context, ptx, &module, &cached)) {
    int64_t launched = 0;
    int64_t *cursors = num_loops > 0 ? (int64_t *)calloc((size_t)num_loops, sizeof(int64_t)) : NULL;
    int all = (num_loops == 0 || cursors != NULL) &&
              gradc_rt_cuda_launch_range(&d, module, launches, loops, cursors, num_loops, 0, 0, num_launches, stream,
                                         &launched);
    free(cursors);
    /* Also after a failed launch, so that no kernel still runs when its module is unloaded. */
    int synced = launched == 0 || d.stream_synchronize(stream) == GRADC_RT_CUDA_SUCCESS;
    if (all && synced) {
      int64_t reported = 0;
      if (status_word == NULL)
        status = 0;
      else if (d.memcpy_dtoh(&reported, status_address, sizeof reported) == GRADC_RT_CUDA_SUCCESS)
        status = (int32_t)reported;
    }
    if (!cached)
      d.module_unload(module);
  }
  if (pushed)
    d.ctx_pop_current(&context);
  return status;
}
