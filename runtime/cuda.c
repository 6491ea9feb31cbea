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
  /* Optional, all or none: CUDA graphs (stream capture, CUDA 10 and later). */
  int (*stream_begin_capture)(void *stream, int mode);
  int (*stream_end_capture)(void *stream, void **graph);
  int (*graph_instantiate)(void **exec, void *graph, unsigned long long flags);
  int (*graph_launch)(void *exec, void *stream);
  int (*graph_destroy)(void *graph);
  int (*graph_exec_destroy)(void *exec);
};

enum { GRADC_RT_CUDA_CAPTURE_THREAD_LOCAL = 1 }; /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */

/* Modules stay loaded, one per (context, PTX): loading a module (the driver JIT-compiles the
 * PTX or fetches it from its disk cache) took about as long as the kernels of a small training
 * step. A context is named by its unique id (cuCtxGetId, CUDA 12), which no later context
 * reuses, so a destroyed context's entry can never be hit again; with a driver that lacks it,
 * each call loads and unloads its module as before. The table is this object's own (the
 * runtime is linked into every object), so a PTX pointer in it is always this object's. When
 * the table is full, calls with a new key load and unload as before. */
enum { GRADC_RT_CUDA_MODULES = 16, GRADC_RT_CUDA_GRAPHS = 8 };
/* A kept module's graphs: each the launches of one call captured (one entry point's, with one
 * set of buffers), named by the call's signature (gradc_rt_cuda_signature). Kept as long as
 * the module; when a module has GRADC_RT_CUDA_GRAPHS, calls with a new signature launch one
 * by one. */
struct gradc_rt_cuda_graph {
  int64_t *signature;
  size_t length;
  void *exec;
};
static struct gradc_rt_cuda_module {
  const char *ptx;
  unsigned long long context_id;
  void *module;
  struct gradc_rt_cuda_graph graphs[GRADC_RT_CUDA_GRAPHS];
  int num_graphs;
} gradc_rt_cuda_modules[GRADC_RT_CUDA_MODULES];
static int gradc_rt_cuda_num_modules;
static pthread_mutex_t gradc_rt_cuda_modules_lock = PTHREAD_MUTEX_INITIALIZER;

/* The module of `ptx` in `context`: a cached one (*cached = 1, *entry its row of the table),
 * or one loaded now that the caller unloads when done (*cached = 0). Returns 0 when loading
 * fails. */
static int gradc_rt_cuda_module(const struct gradc_rt_cuda_driver *d, void *context, const char *ptx,
                                void **module, int *cached, int *entry) {
  unsigned long long id = 0;
  *cached = 0;
  *entry = -1;
  if (d->ctx_get_id == NULL || d->ctx_get_id(context, &id) != GRADC_RT_CUDA_SUCCESS)
    return d->module_load_data(module, ptx) == GRADC_RT_CUDA_SUCCESS;
  pthread_mutex_lock(&gradc_rt_cuda_modules_lock);
  for (int i = 0; i < gradc_rt_cuda_num_modules; ++i)
    if (gradc_rt_cuda_modules[i].ptx == ptx && gradc_rt_cuda_modules[i].context_id == id) {
      *module = gradc_rt_cuda_modules[i].module;
      *cached = 1;
      *entry = i;
      pthread_mutex_unlock(&gradc_rt_cuda_modules_lock);
      return 1;
    }
  int loaded = d->module_load_data(module, ptx) == GRADC_RT_CUDA_SUCCESS;
  if (loaded && gradc_rt_cuda_num_modules < GRADC_RT_CUDA_MODULES) {
    struct gradc_rt_cuda_module row = {ptx, id, *module, {{NULL, 0, NULL}}, 0};
    *entry = gradc_rt_cuda_num_modules;
    gradc_rt_cuda_modules[gradc_rt_cuda_num_modules++] = row;
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
  int graphs = gradc_rt_cuda_resolve(lib, "cuStreamBeginCapture_v2", &d->stream_begin_capture);
  graphs &= gradc_rt_cuda_resolve(lib, "cuStreamEndCapture", &d->stream_end_capture);
  graphs &= gradc_rt_cuda_resolve(lib, "cuGraphInstantiateWithFlags", &d->graph_instantiate);
  graphs &= gradc_rt_cuda_resolve(lib, "cuGraphLaunch", &d->graph_launch);
  graphs &= gradc_rt_cuda_resolve(lib, "cuGraphDestroy", &d->graph_destroy);
  graphs &= gradc_rt_cuda_resolve(lib, "cuGraphExecDestroy", &d->graph_exec_destroy);
  if (!graphs)
    d->stream_begin_capture = NULL;
  return found;
}

/* What a captured graph depends on: the time-loop table (a constant of the entry point), and
 * for each launch its kernel name (a constant too), shape and argument values (the buffers'
 * device addresses). Returns a malloc'd array and its length in *length, or NULL. */
static int64_t *gradc_rt_cuda_signature(const gradc_rt_cuda_launch *launches, int32_t num_launches,
                                        const gradc_rt_cuda_loop *loops, int32_t num_loops, size_t *length) {
  size_t n = 3;
  for (int32_t i = 0; i < num_launches; ++i)
    n += 8 + (size_t)(launches[i].num_args > 0 ? launches[i].num_args : 0);
  int64_t *s = (int64_t *)malloc(n * sizeof(int64_t));
  if (s == NULL)
    return NULL;
  size_t k = 0;
  s[k++] = (int64_t)(uintptr_t)loops;
  s[k++] = num_loops;
  s[k++] = num_launches;
  for (int32_t i = 0; i < num_launches; ++i) {
    const gradc_rt_cuda_launch *l = &launches[i];
    s[k++] = (int64_t)(uintptr_t)l->kernel;
    for (int d = 0; d < 3; ++d) {
      s[k++] = l->grid[d];
      s[k++] = l->block[d];
    }
    s[k++] = l->num_args;
    for (int64_t a = 0; a < l->num_args; ++a)
      memcpy(&s[k++], l->args[a], sizeof(int64_t));
  }
  *length = n;
  return s;
}

/* The graph of `m` with this signature, or NULL. The caller holds the table's lock. */
static void *gradc_rt_cuda_graph_of(const struct gradc_rt_cuda_module *m, const int64_t *signature, size_t length) {
  for (int g = 0; g < m->num_graphs; ++g)
    if (m->graphs[g].length == length && memcmp(m->graphs[g].signature, signature, length * sizeof(int64_t)) == 0)
      return m->graphs[g].exec;
  return NULL;
}

/* The graph of module row `entry` with this signature, or NULL. Takes the table's lock. */
static void *gradc_rt_cuda_find_graph(int entry, const int64_t *signature, size_t length) {
  pthread_mutex_lock(&gradc_rt_cuda_modules_lock);
  void *exec = gradc_rt_cuda_graph_of(&gradc_rt_cuda_modules[entry], signature, length);
  pthread_mutex_unlock(&gradc_rt_cuda_modules_lock);
  return exec;
}

/* Keeps `exec` under `signature` (which it then owns) if the row has room; returns 1 if kept.
 * A graph another thread kept meanwhile for the same signature wins: this one is not kept. */
static int gradc_rt_cuda_keep_graph(int entry, int64_t *signature, size_t length, void *exec) {
  int kept = 0;
  pthread_mutex_lock(&gradc_rt_cuda_modules_lock);
  struct gradc_rt_cuda_module *m = &gradc_rt_cuda_modules[entry];
  if (gradc_rt_cuda_graph_of(m, signature, length) == NULL && m->num_graphs < GRADC_RT_CUDA_GRAPHS) {
    struct gradc_rt_cuda_graph g = {signature, length, exec};
    m->graphs[m->num_graphs++] = g;
    kept = 1;
  }
  pthread_mutex_unlock(&gradc_rt_cuda_modules_lock);
  return kept;
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
    int fits = 1;
    for (int dim = 0; dim < 3; ++dim)
      fits = fits && gradc_rt_cuda_fits(l->grid[dim]) && gradc_rt_cuda_fits(l->block[dim]);
    if (!fits || d->module_get_function(&function, module, l->kernel) != GRADC_RT_CUDA_SUCCESS ||
        d->launch_kernel(function, (unsigned)l->grid[0], (unsigned)l->grid[1], (unsigned)l->grid[2],
                         (unsigned)l->block[0], (unsigned)l->block[1], (unsigned)l->block[2], 0, stream, l->args,
                         NULL) != GRADC_RT_CUDA_SUCCESS)
      return 0;
    ++*launched;
    ++i;
  }
  return 1;
}

/* Every launch of the call, time loops repeated, counted in *launched. Returns 1 if all were. */
static int gradc_rt_cuda_launch_all(const struct gradc_rt_cuda_driver *d, void *module,
                                    const gradc_rt_cuda_launch *launches, int32_t num_launches,
                                    const gradc_rt_cuda_loop *loops, int32_t num_loops, void *stream,
                                    int64_t *launched) {
  int64_t *cursors = num_loops > 0 ? (int64_t *)calloc((size_t)num_loops, sizeof(int64_t)) : NULL;
  int all = (num_loops == 0 || cursors != NULL) &&
            gradc_rt_cuda_launch_range(d, module, launches, loops, cursors, num_loops, 0, 0, num_launches, stream,
                                       launched);
  free(cursors);
  return all;
}

/* The call's launches as one graph launch: the graph kept for this signature in module row
 * `entry`, or captured now (kept if the row has room, else destroyed after the call: *temporary).
 * Returns the graph, or NULL: *failed when the capture failed (a launch could not be recorded),
 * else the stream cannot be captured (the legacy stream, or one being captured already) and the
 * caller launches one by one. */
static void *gradc_rt_cuda_graph(const struct gradc_rt_cuda_driver *d, void *module, int entry,
                                 const gradc_rt_cuda_launch *launches, int32_t num_launches,
                                 const gradc_rt_cuda_loop *loops, int32_t num_loops, void *stream, int *temporary,
                                 int *failed) {
  *temporary = *failed = 0;
  if (entry < 0 || stream == NULL || d->stream_begin_capture == NULL)
    return NULL;
  size_t length = 0;
  int64_t *signature = gradc_rt_cuda_signature(launches, num_launches, loops, num_loops, &length);
  if (signature == NULL)
    return NULL;
  void *exec = gradc_rt_cuda_find_graph(entry, signature, length);
  if (exec == NULL && d->stream_begin_capture(stream, GRADC_RT_CUDA_CAPTURE_THREAD_LOCAL) == GRADC_RT_CUDA_SUCCESS) {
    int64_t recorded = 0;
    int all = gradc_rt_cuda_launch_all(d, module, launches, num_launches, loops, num_loops, stream, &recorded);
    void *graph = NULL;
    int ended = d->stream_end_capture(stream, &graph) == GRADC_RT_CUDA_SUCCESS && graph != NULL;
    if (!all || !ended || d->graph_instantiate(&exec, graph, 0) != GRADC_RT_CUDA_SUCCESS)
      exec = NULL;
    if (graph != NULL)
      d->graph_destroy(graph);
    *failed = exec == NULL;
    if (exec != NULL && gradc_rt_cuda_keep_graph(entry, signature, length, exec))
      signature = NULL; /* the table's now */
    else
      *temporary = exec != NULL;
  }
  free(signature);
  return exec;
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
  int cached = 0, entry = -1;
  if ((status_word == NULL || d.memset_d8(status_address, 0, sizeof(int64_t)) == GRADC_RT_CUDA_SUCCESS) &&
      gradc_rt_cuda_module(&d, context, ptx, &module, &cached, &entry)) {
    int64_t launched = 0;
    int temporary = 0, failed = 0, all = 0;
    void *graph = gradc_rt_cuda_graph(&d, module, entry, launches, num_launches, loops, num_loops, stream, &temporary,
                                      &failed);
    if (graph != NULL) {
      all = d.graph_launch(graph, stream) == GRADC_RT_CUDA_SUCCESS;
      launched = all;
    } else if (!failed) {
      all = gradc_rt_cuda_launch_all(&d, module, launches, num_launches, loops, num_loops, stream, &launched);
    }
    /* Also after a failed launch, so that no kernel still runs when its module is unloaded. */
    int synced = launched == 0 || d.stream_synchronize(stream) == GRADC_RT_CUDA_SUCCESS;
    if (temporary)
      d.graph_exec_destroy(graph);
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
