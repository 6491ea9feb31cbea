/* fake_cuda.c - a stand-in libcuda.so.1 for runtime/test_cuda.c, built by runtime/run_tests.sh.
 * It implements the driver functions that cuda.c resolves, writes every call to a log that the
 * test reads back, and fails a chosen call on request. Built with -DFAKE_CUDA_WITHOUT_UNLOAD it
 * lacks cuModuleUnload, like a driver too old for the runtime; with -DFAKE_CUDA_CONTEXT_IDS it
 * has cuCtxGetId (CUDA 12), with which the runtime keeps modules loaded; with -DFAKE_CUDA_GRAPHS
 * also stream capture and graphs (a launch while capturing is logged as recorded). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { FAKE_CUDA_ERROR = 999 }; /* CUDA_ERROR_UNKNOWN */

static char fake_log[4096];
static const char *fake_fail_call; /* the call that fails on its fail_on-th use */
static int fake_fail_on;
static int fake_calls_seen;
static char fake_app_context, fake_buffer_context, fake_module;
static void *fake_current_context;
static const char *fake_function_names[16];
static int fake_num_functions;

static void fake_write(const char *format, ...) __attribute__((format(printf, 1, 2)));

static void fake_write(const char *format, ...) {
  size_t used = strlen(fake_log);
  va_list args;
  va_start(args, format);
  vsnprintf(fake_log + used, sizeof fake_log - used, format, args);
  va_end(args);
}

/* Logs the call, then says whether it is the one to fail. */
static int fake_call(const char *name) {
  fake_write("%s%s", fake_log[0] ? " " : "", name);
  return fake_fail_call != NULL && strcmp(name, fake_fail_call) == 0 && ++fake_calls_seen == fake_fail_on;
}

/* The test's controls: start a new log; fail the fail_on-th call of `fail_call` (NULL: none);
 * give the calling thread a current context or none. */
void fake_cuda_reset(const char *fail_call, int fail_on, int has_context) {
  fake_log[0] = '\0';
  fake_fail_call = fail_call;
  fake_fail_on = fail_on;
  fake_calls_seen = 0;
  fake_current_context = has_context ? &fake_app_context : NULL;
  fake_num_functions = 0;
}

const char *fake_cuda_log(void) { return fake_log; }

#ifdef FAKE_CUDA_CONTEXT_IDS
static unsigned long long fake_context_id = 1;

/* The id that cuCtxGetId gives every context from now on: a new id is a new context. */
void fake_cuda_set_context_id(unsigned long long id) { fake_context_id = id; }

int cuCtxGetId(void *context, unsigned long long *id) {
  int fail = fake_call("cuCtxGetId");
  fake_write("(%s)", context == &fake_app_context ? "app_context" : context == &fake_buffer_context ? "buffer_context" : "?");
  if (fail)
    return FAKE_CUDA_ERROR;
  *id = fake_context_id;
  return 0;
}
#endif

int cuInit(unsigned flags) {
  int fail = fake_call("cuInit");
  fake_write("(%u)", flags);
  return fail ? FAKE_CUDA_ERROR : 0;
}

int cuCtxGetCurrent(void **context) {
  if (fake_call("cuCtxGetCurrent"))
    return FAKE_CUDA_ERROR;
  *context = fake_current_context;
  return 0;
}

int cuPointerGetAttribute(void *data, int attribute, uint64_t address) {
  int fail = fake_call("cuPointerGetAttribute");
  fake_write("(%d,%#llx)", attribute, (unsigned long long)address);
  if (fail)
    return FAKE_CUDA_ERROR;
  *(void **)data = &fake_buffer_context;
  return 0;
}

int cuCtxPushCurrent_v2(void *context) {
  int fail = fake_call("cuCtxPushCurrent_v2");
  fake_write("(%s)", context == &fake_buffer_context ? "buffer_context" : "?");
  if (fail)
    return FAKE_CUDA_ERROR;
  fake_current_context = context;
  return 0;
}

int cuCtxPopCurrent_v2(void **context) {
  if (fake_call("cuCtxPopCurrent_v2"))
    return FAKE_CUDA_ERROR;
  *context = fake_current_context;
  fake_current_context = NULL;
  return 0;
}

int cuModuleLoadData(void **module, const void *image) {
  int fail = fake_call("cuModuleLoadData");
  fake_write("(%s)", (const char *)image);
  if (fail)
    return FAKE_CUDA_ERROR;
  *module = &fake_module;
  return 0;
}

int cuModuleGetFunction(void **function, void *module, const char *name) {
  int fail = fake_call("cuModuleGetFunction");
  fake_write("(%s,%s)", module == &fake_module ? "module" : "?", name);
  if (fail || fake_num_functions == 16)
    return FAKE_CUDA_ERROR;
  fake_function_names[fake_num_functions] = name;
  *function = &fake_function_names[fake_num_functions++];
  return 0;
}

int cuLaunchKernel(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                   unsigned block_y, unsigned block_z, unsigned shared_bytes, void *stream, void **params,
                   void **extra) {
  int fail = fake_call("cuLaunchKernel");
  fake_write("(%s,%ux%ux%u,%ux%ux%u,%u,%p,%lld,%s)", *(const char **)function, grid_x, grid_y, grid_z, block_x, block_y,
             block_z, shared_bytes, stream, (long long)*(int64_t *)params[0], extra ? "extra" : "NULL");
  return fail ? FAKE_CUDA_ERROR : 0;
}

int cuStreamSynchronize(void *stream) {
  int fail = fake_call("cuStreamSynchronize");
  fake_write("(%p)", stream);
  return fail ? FAKE_CUDA_ERROR : 0;
}

#ifndef FAKE_CUDA_WITHOUT_UNLOAD
int cuModuleUnload(void *module) {
  int fail = fake_call("cuModuleUnload");
  fake_write("(%s)", module == &fake_module ? "module" : "?");
  return fail ? FAKE_CUDA_ERROR : 0;
}
#endif

/* The status word of gradc_rt_cuda_run: memset logs the address; memcpy reads a value the test
 * set with fake_cuda_set_status (what "kernels" would have written). */
static int64_t fake_status;
void fake_cuda_set_status(int64_t value) { fake_status = value; }

int cuMemsetD8_v2(uint64_t address, unsigned char value, size_t bytes) {
  int fail = fake_call("cuMemsetD8_v2");
  fake_write("(0x%llx, %u, %zu)", (unsigned long long)address, (unsigned)value, bytes);
  return fail ? FAKE_CUDA_ERROR : 0;
}

int cuMemcpyDtoH_v2(void *destination, uint64_t source, size_t bytes) {
  int fail = fake_call("cuMemcpyDtoH_v2");
  fake_write("(0x%llx, %zu)", (unsigned long long)source, bytes);
  if (!fail && bytes == sizeof fake_status)
    memcpy(destination, &fake_status, bytes);
  return fail ? FAKE_CUDA_ERROR : 0;
}

#ifdef FAKE_CUDA_GRAPHS
/* Graphs: a capture logs the launches it records; a graph or executable graph is a number, its
 * launch logged with it. */
static int fake_capturing, fake_graphs;
static long fake_graph_handles[64];

int cuStreamBeginCapture_v2(void *stream, int mode) {
  int fail = fake_call("cuStreamBeginCapture_v2");
  fake_write("(%d)", mode);
  if (fail || stream == NULL)
    return FAKE_CUDA_ERROR;
  fake_capturing = 1;
  return 0;
}

int cuStreamEndCapture(void *stream, void **graph) {
  (void)stream;
  int fail = fake_call("cuStreamEndCapture");
  fake_capturing = 0;
  if (fail || fake_graphs == 64)
    return FAKE_CUDA_ERROR;
  fake_graph_handles[fake_graphs] = fake_graphs + 1;
  *graph = &fake_graph_handles[fake_graphs++];
  return 0;
}

int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
  (void)flags;
  int fail = fake_call("cuGraphInstantiateWithFlags");
  fake_write("(graph%ld)", *(long *)graph);
  if (fail)
    return FAKE_CUDA_ERROR;
  *exec = graph;
  return 0;
}

int cuGraphLaunch(void *exec, void *stream) {
  (void)stream;
  int fail = fake_call("cuGraphLaunch");
  fake_write("(graph%ld)", *(long *)exec);
  return fail ? FAKE_CUDA_ERROR : 0;
}

int cuGraphDestroy(void *graph) {
  (void)graph;
  fake_call("cuGraphDestroy");
  return 0;
}

int cuGraphExecDestroy(void *exec) {
  fake_call("cuGraphExecDestroy");
  fake_write("(graph%ld)", *(long *)exec);
  return 0;
}

int fake_cuda_capturing(void) { return fake_capturing; }
#endif
