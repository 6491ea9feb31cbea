/* test_cuda.c - checks gradc_rt_cuda_run (runtime/cuda.c) against runtime/fake_cuda.c.
 * run_tests.sh runs it three times, with LD_LIBRARY_PATH leading to: the fake driver ("fake":
 * call order, arguments, status 4 for each failing call), the fake without cuModuleUnload
 * ("incomplete": status 3), no driver at all ("absent": status 3), the fake with context ids
 * ("cached": modules kept) and with graphs too ("graphs"). Prints TAP-style lines. */
#define _POSIX_C_SOURCE 200809L

#include "gradc_runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *name, const char *detail) {
  printf("%s - %s\n", ok ? "ok" : "not ok", name);
  if (!ok) {
    printf("#   %s\n", detail);
    failures++;
  }
}

static void (*fake_reset)(const char *fail_call, int fail_on, int has_context);
static const char *(*fake_log)(void);

static const char ptx[] = "PTX";
static char stream_object;
static void *const stream = &stream_object;
static const void *const owner = (const void *)(uintptr_t)0x7000;
static int64_t first_arg = 11, second_arg = 22;
static void *first_args[] = {&first_arg}, *second_args[] = {&second_arg};
static const gradc_rt_cuda_launch two_launches[] = {{"m_f_k0", {8, 1, 1}, {256, 1, 1}, first_args, 1},
                                                    {"m_f_k1", {1, 1, 1}, {32, 1, 1}, second_args, 1}};

/* Runs the two launches under a failure plan and compares status and log with the expected. */
static void expect(const char *name, const char *fail_call, int fail_on, int has_context, int32_t want_status,
                   const char *want_log) {
  fake_reset(fail_call, fail_on, has_context);
  int32_t status = gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, NULL);
  char detail[4096];
  snprintf(detail, sizeof detail, "status %d (want %d)\n#   log:  %s\n#   want: %s", status, want_status, fake_log(),
           want_log);
  check(status == want_status && strcmp(fake_log(), want_log) == 0, name, detail);
}

/* The fake's controls come from the same library that cuda.c opens, found the same way. */
static int find_fake_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  void *reset = lib ? dlsym(lib, "fake_cuda_reset") : NULL, *log = lib ? dlsym(lib, "fake_cuda_log") : NULL;
  check(reset != NULL && log != NULL, "the fake libcuda.so.1 is found", "LD_LIBRARY_PATH must lead to the fake driver");
  memcpy(&fake_reset, &reset, sizeof reset);
  memcpy(&fake_log, &log, sizeof log);
  return reset != NULL && log != NULL;
}

static void test_fake_driver(void) {
  char launches[512], s[32];
  snprintf(s, sizeof s, "%p", stream);
  snprintf(launches, sizeof launches,
           "cuModuleGetFunction(module,m_f_k0) cuLaunchKernel(m_f_k0,8x1x1,256x1x1,0,%s,11,NULL) "
           "cuModuleGetFunction(module,m_f_k1) cuLaunchKernel(m_f_k1,1x1x1,32x1x1,0,%s,22,NULL)",
           s, s);
  const char *start = "cuInit(0) cuCtxGetCurrent";
  const char *borrow = "cuInit(0) cuCtxGetCurrent cuPointerGetAttribute(1,0x7000) cuCtxPushCurrent_v2(buffer_context)";
  char want[1024];

  snprintf(want, sizeof want, "%s cuModuleLoadData(PTX) %s cuStreamSynchronize(%s) cuModuleUnload(module)", start,
           launches, s);
  expect("launches in order on the caller's context", NULL, 0, 1, 0, want);
  snprintf(want, sizeof want,
           "%s cuModuleLoadData(PTX) %s cuStreamSynchronize(%s) cuModuleUnload(module) cuCtxPopCurrent_v2", borrow,
           launches, s);
  expect("borrows the buffers' context when the thread has none", NULL, 0, 0, 0, want);

  fake_reset(NULL, 0, 1);
  check(gradc_rt_cuda_run(ptx, two_launches, 0, stream, owner, NULL) == 0 && fake_log()[0] == '\0',
        "no launches: status 0 and no driver call", fake_log());

  expect("cuInit fails", "cuInit", 1, 1, 4, "cuInit(0)");
  expect("cuCtxGetCurrent fails", "cuCtxGetCurrent", 1, 1, 4, start);
  expect("cuPointerGetAttribute fails", "cuPointerGetAttribute", 1, 0, 4,
         "cuInit(0) cuCtxGetCurrent cuPointerGetAttribute(1,0x7000)");
  expect("cuCtxPushCurrent fails: nothing to pop", "cuCtxPushCurrent_v2", 1, 0, 4, borrow);
  snprintf(want, sizeof want, "%s cuModuleLoadData(PTX) cuCtxPopCurrent_v2", borrow);
  expect("cuModuleLoadData fails: nothing to unload", "cuModuleLoadData", 1, 0, 4, want);
  snprintf(want, sizeof want, "%s cuModuleLoadData(PTX) cuModuleGetFunction(module,m_f_k0) cuModuleUnload(module)",
           start);
  expect("cuModuleGetFunction fails: unloads, nothing to wait for", "cuModuleGetFunction", 1, 1, 4, want);
  snprintf(want, sizeof want,
           "%s cuModuleLoadData(PTX) cuModuleGetFunction(module,m_f_k0) "
           "cuLaunchKernel(m_f_k0,8x1x1,256x1x1,0,%s,11,NULL) cuModuleGetFunction(module,m_f_k1) "
           "cuLaunchKernel(m_f_k1,1x1x1,32x1x1,0,%s,22,NULL) cuStreamSynchronize(%s) cuModuleUnload(module) "
           "cuCtxPopCurrent_v2",
           borrow, s, s, s);
  expect("second cuLaunchKernel fails: waits for the first, unloads, pops", "cuLaunchKernel", 2, 0, 4, want);
  snprintf(want, sizeof want, "%s cuModuleLoadData(PTX) %s cuStreamSynchronize(%s) cuModuleUnload(module)", start,
           launches, s);
  expect("cuStreamSynchronize fails", "cuStreamSynchronize", 1, 1, 4, want);

  /* A grid and block of three dimensions each, then a grid too tall for the driver. */
  const gradc_rt_cuda_launch too_big[] = {{"m_f_k0", {8, 2, 3}, {16, 4, 2}, first_args, 1},
                                          {"m_f_k1", {1, (int64_t)1 << 32, 1}, {32, 1, 1}, second_args, 1}};
  fake_reset(NULL, 0, 1);
  int32_t status = gradc_rt_cuda_run(ptx, too_big, 2, stream, owner, NULL);
  snprintf(want, sizeof want,
           "%s cuModuleLoadData(PTX) cuModuleGetFunction(module,m_f_k0) "
           "cuLaunchKernel(m_f_k0,8x2x3,16x4x2,0,%s,11,NULL) cuStreamSynchronize(%s) cuModuleUnload(module)",
           start, s, s);
  check(status == 4 && strcmp(fake_log(), want) == 0, "3-D launches; a grid beyond unsigned int is not launched",
        fake_log());

  /* A status word: zeroed before loading, read back after the stream is done. */
  void (*set_status)(int64_t) = NULL;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  void *sym = lib ? dlsym(lib, "fake_cuda_set_status") : NULL;
  memcpy(&set_status, &sym, sizeof sym);
  void *const word = (void *)(uintptr_t)0x9000;
  const char *zero = "cuMemsetD8_v2(0x9000, 0, 8)", *read = "cuMemcpyDtoH_v2(0x9000, 8)";
  for (int64_t reported = 0; reported <= 5; reported += 5) {
    fake_reset(NULL, 0, 1);
    set_status(reported);
    status = gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, word);
    snprintf(want, sizeof want, "%s %s cuModuleLoadData(PTX) %s cuStreamSynchronize(%s) %s cuModuleUnload(module)",
             start, zero, launches, s, read);
    char detail[2048];
    snprintf(detail, sizeof detail, "status %d (want %d)\n#   log:  %s\n#   want: %s", status, (int)reported, fake_log(),
             want);
    check(status == reported && strcmp(fake_log(), want) == 0,
          reported ? "a status word of 5 is the status" : "a status word of 0: status 0", detail);
  }
  /* Time loops: launch 1 three times inside a loop of both launches run twice; a failure
   * inside a repeat stops the call (and the launches made are waited for). */
  {
    const gradc_rt_cuda_loop loops[] = {{0, 2, 2}, {1, 2, 3}};
    char k0[256], k1[256], body[1024], looped[2048];
    snprintf(k0, sizeof k0, "cuModuleGetFunction(module,m_f_k0) cuLaunchKernel(m_f_k0,8x1x1,256x1x1,0,%s,11,NULL)", s);
    snprintf(k1, sizeof k1, "cuModuleGetFunction(module,m_f_k1) cuLaunchKernel(m_f_k1,1x1x1,32x1x1,0,%s,22,NULL)", s);
    snprintf(body, sizeof body, "%s %s %s %s", k0, k1, k1, k1);
    snprintf(looped, sizeof looped, "%s cuModuleLoadData(PTX) %s %s cuStreamSynchronize(%s) cuModuleUnload(module)",
             start, body, body, s);
    fake_reset(NULL, 0, 1);
    status = gradc_rt_cuda_run_loops(ptx, two_launches, 2, loops, 2, stream, owner, NULL);
    check(status == 0 && strcmp(fake_log(), looped) == 0, "nested time loops repeat their launches", fake_log());
    fake_reset("cuLaunchKernel", 3, 1);
    status = gradc_rt_cuda_run_loops(ptx, two_launches, 2, loops, 2, stream, owner, NULL);
    snprintf(looped, sizeof looped, "%s cuModuleLoadData(PTX) %s %s %s cuStreamSynchronize(%s) cuModuleUnload(module)",
             start, k0, k1, k1, s);
    check(status == 4 && strcmp(fake_log(), looped) == 0, "a launch failing inside a time loop stops the call",
          fake_log());
    /* Trip counts: the inner loop runs 0 times on the first entry, then twice. */
    const int64_t trips[] = {0, 2};
    const gradc_rt_cuda_loop streamed[] = {{0, 2, 2, NULL}, {1, 2, 2, trips, 2}};
    snprintf(looped, sizeof looped, "%s cuModuleLoadData(PTX) %s %s %s %s cuStreamSynchronize(%s) cuModuleUnload(module)",
             start, k0, k0, k1, k1, s);
    fake_reset(NULL, 0, 1);
    status = gradc_rt_cuda_run_loops(ptx, two_launches, 2, streamed, 2, stream, owner, NULL);
    check(status == 0 && strcmp(fake_log(), looped) == 0, "a loop with trip counts runs each entry's count",
          fake_log());
    /* A table of one run that the loop around runs twice: it restarts, 0 then 2 again. */
    const gradc_rt_cuda_loop repeated[] = {{0, 2, 4, NULL}, {1, 2, 2, trips, 2}};
    snprintf(looped, sizeof looped,
             "%s cuModuleLoadData(PTX) %s %s %s %s %s %s %s %s cuStreamSynchronize(%s) cuModuleUnload(module)", start,
             k0, k0, k1, k1, k0, k0, k1, k1, s);
    fake_reset(NULL, 0, 1);
    status = gradc_rt_cuda_run_loops(ptx, two_launches, 2, repeated, 2, stream, owner, NULL);
    check(status == 0 && strcmp(fake_log(), looped) == 0, "a trip-count table restarts after its last entry",
          fake_log());
  }
  fake_reset("cuMemcpyDtoH_v2", 1, 1);
  set_status(0);
  check(gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, word) == 4, "the status word cannot be read: status 4",
        fake_log());
}

/* With cuCtxGetId, a module is loaded once per context and PTX and kept: the second call in
 * the same context launches without loading, a new context loads again, a failed load is not
 * kept, and nothing is unloaded. */
static void test_cached_modules(void) {
  void (*set_id)(unsigned long long) = NULL;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  void *sym = lib ? dlsym(lib, "fake_cuda_set_context_id") : NULL;
  memcpy(&set_id, &sym, sizeof sym);
  check(set_id != NULL, "the fake has cuCtxGetId", "build it with -DFAKE_CUDA_CONTEXT_IDS");
  if (set_id == NULL)
    return;
  char launches[512], s[32], want[1024];
  snprintf(s, sizeof s, "%p", stream);
  snprintf(launches, sizeof launches,
           "cuModuleGetFunction(module,m_f_k0) cuLaunchKernel(m_f_k0,8x1x1,256x1x1,0,%s,11,NULL) "
           "cuModuleGetFunction(module,m_f_k1) cuLaunchKernel(m_f_k1,1x1x1,32x1x1,0,%s,22,NULL) "
           "cuStreamSynchronize(%s)",
           s, s, s);
  const char *start = "cuInit(0) cuCtxGetCurrent cuCtxGetId(app_context)";
  set_id(1);
  snprintf(want, sizeof want, "%s cuModuleLoadData(PTX)", start);
  expect("a failed load fails the call", "cuModuleLoadData", 1, 1, 4, want);
  snprintf(want, sizeof want, "%s cuModuleLoadData(PTX) %s", start, launches);
  expect("the next call loads again (a failed load is not kept) and keeps the module", NULL, 0, 1, 0, want);
  snprintf(want, sizeof want, "%s %s", start, launches);
  expect("the second call in that context launches without loading", NULL, 0, 1, 0, want);
  set_id(2);
  snprintf(want, sizeof want, "%s cuModuleLoadData(PTX) %s", start, launches);
  expect("a new context loads the module again", NULL, 0, 1, 0, want);
  set_id(3);
  snprintf(want, sizeof want,
           "cuInit(0) cuCtxGetCurrent cuPointerGetAttribute(1,0x7000) cuCtxPushCurrent_v2(buffer_context) "
           "cuCtxGetId(buffer_context) cuModuleLoadData(PTX) %s cuCtxPopCurrent_v2",
           launches);
  expect("a borrowed context is the one that keeps the module", NULL, 0, 0, 0, want);
}

/* With graphs (and cuCtxGetId): the first call captures its launches into a graph and replays
 * it; the next with the same buffers is one cuGraphLaunch; other buffers capture another; the
 * legacy stream launches one by one; a failed capture fails the call without launching; past
 * the row's graphs, a call's graph is destroyed after it. */
static void test_graphs(void) {
  void (*set_id)(unsigned long long) = NULL;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  void *sym = lib ? dlsym(lib, "fake_cuda_set_context_id") : NULL;
  memcpy(&set_id, &sym, sizeof sym);
  check(set_id != NULL && dlsym(lib, "cuGraphLaunch") != NULL, "the fake has cuCtxGetId and graphs",
        "build it with -DFAKE_CUDA_CONTEXT_IDS -DFAKE_CUDA_GRAPHS");
  if (set_id == NULL)
    return;
  set_id(7);
  char s[32], want[2048], launches[512];
  snprintf(s, sizeof s, "%p", stream);
  const char *start = "cuInit(0) cuCtxGetCurrent cuCtxGetId(app_context)";
  snprintf(launches, sizeof launches,
           "cuModuleGetFunction(module,m_f_k0) cuLaunchKernel(m_f_k0,8x1x1,256x1x1,0,%s,11,NULL) "
           "cuModuleGetFunction(module,m_f_k1) cuLaunchKernel(m_f_k1,1x1x1,32x1x1,0,%s,22,NULL)",
           s, s);
  snprintf(want, sizeof want,
           "%s cuModuleLoadData(PTX) cuStreamBeginCapture_v2(1) %s cuStreamEndCapture "
           "cuGraphInstantiateWithFlags(graph1) cuGraphDestroy cuGraphLaunch(graph1) cuStreamSynchronize(%s)",
           start, launches, s);
  expect("the first call captures its launches and launches the graph", NULL, 0, 1, 0, want);
  snprintf(want, sizeof want, "%s cuGraphLaunch(graph1) cuStreamSynchronize(%s)", start, s);
  expect("the same call again is one graph launch", NULL, 0, 1, 0, want);

  fake_reset(NULL, 0, 1);
  first_arg = 12; /* another buffer */
  int32_t status = gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, NULL);
  check(status == 0 && strstr(fake_log(), "cuStreamBeginCapture_v2(1)") && strstr(fake_log(), "cuGraphLaunch(graph2)"),
        "other buffers are captured into a graph of their own", fake_log());
  first_arg = 11;
  snprintf(want, sizeof want, "%s cuGraphLaunch(graph1) cuStreamSynchronize(%s)", start, s);
  expect("the first buffers' graph is still kept", NULL, 0, 1, 0, want);

  fake_reset(NULL, 0, 1);
  status = gradc_rt_cuda_run(ptx, two_launches, 2, NULL, owner, NULL);
  check(status == 0 && !strstr(fake_log(), "Capture") && strstr(fake_log(), "cuLaunchKernel(m_f_k1"),
        "the legacy stream launches one by one", fake_log());

  first_arg = 13;
  snprintf(want, sizeof want, "%s cuStreamBeginCapture_v2(1) %s cuStreamEndCapture", start, launches);
  for (char *p = strstr(want, ",11,"); p; p = NULL)
    p[2] = '3';
  expect("a failed capture fails the call without launching", "cuStreamEndCapture", 1, 1, 4, want);
  /* Graphs 3 .. 8 fill the row; the next call's graph is destroyed after it. */
  for (int64_t v = 100; v < 106; ++v) {
    first_arg = v;
    fake_reset(NULL, 0, 1);
    gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, NULL);
  }
  first_arg = 200;
  fake_reset(NULL, 0, 1);
  status = gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, NULL);
  check(status == 0 && strstr(fake_log(), "cuGraphLaunch(graph9) cuStreamSynchronize") &&
            strstr(fake_log(), "cuGraphExecDestroy(graph9)"),
        "past the kept graphs, a call's graph is destroyed after it", fake_log());
  first_arg = 11;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "fake") == 0) {
    if (find_fake_driver())
      test_fake_driver();
  } else if (strcmp(mode, "incomplete") == 0) {
    if (find_fake_driver()) {
      fake_reset(NULL, 0, 1);
      int32_t status = gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, NULL);
      check(status == 3 && fake_log()[0] == '\0', "a driver without cuModuleUnload: status 3, no call", fake_log());
    }
  } else if (strcmp(mode, "cached") == 0) {
    if (find_fake_driver())
      test_cached_modules();
  } else if (strcmp(mode, "graphs") == 0) {
    if (find_fake_driver())
      test_graphs();
  } else if (strcmp(mode, "absent") == 0) {
    void *real = dlopen("libcuda.so.1", RTLD_NOW);
    if (real != NULL) {
      printf("ok - no libcuda.so.1: status 3 # SKIP this machine has a CUDA driver\n");
      return 0;
    }
    check(gradc_rt_cuda_run(ptx, two_launches, 2, stream, owner, NULL) == 3, "no libcuda.so.1: status 3", "");
  } else {
    fprintf(stderr, "usage: test_cuda fake|incomplete|absent|cached|graphs\n");
    return 2;
  }
  return failures != 0;
}
