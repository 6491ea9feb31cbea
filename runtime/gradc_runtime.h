/* gradc_runtime.h - the C runtime that gradc links, as bitcode, into every module it emits.
 * threads.c runs the parallel loops of CPU kernels on a thread pool; cuda.c is the host side of
 * --target=cuda, launching a module's PTX kernels through libcuda opened at run time.
 * Application code never calls these symbols, which are internal to each object: it calls the
 * object's P_set_num_threads, P_get_num_threads and P_shutdown_threads, which forward here. */
#ifndef GRADC_RUNTIME_H
#define GRADC_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Thread pool (threads.c) ---------------------------------------------------------------
 * The pool is the only global state of an emitted object. It is created on the first
 * gradc_rt_parallel_for that needs more than one thread; its workers sleep on a condition
 * variable between jobs, and are joined by gradc_rt_shutdown or when the object is unloaded. */

/* One chunk of a parallel loop: iterations [begin, end) with the loop's captured state. */
typedef void (*gradc_rt_task)(void *closure, int64_t begin, int64_t end);

/* Runs `task` over [0, n), split into chunks that cover [0, n) exactly once, in no particular
 * order, each of at least `grain` iterations (grain < 1 counts as 1) but the one ending at n;
 * returns when all are done.
 * The calling thread works on chunks too. It runs task(closure, 0, n) inline, starting no
 * thread, when the thread count is 1, when n <= grain, when called from inside a task that
 * the pool is running (nested loops run serially), or when another application thread's loop
 * holds the pool at that moment: concurrent callers never wait for each other. */
void gradc_rt_parallel_for(int64_t n, int64_t grain, gradc_rt_task task, void *closure);

/* Sets the thread count of later parallel loops, the caller included: n <= 0 selects the
 * default, the number of online CPUs (read once); 1 never starts a thread. Safe to call at any
 * time, from any thread: the pool grows or shrinks to the new count when the next loop that
 * uses it starts. Workers started earlier stay asleep while the count is 1. */
void gradc_rt_set_num_threads(int32_t n);

/* The thread count that the next parallel loop will use (always >= 1). */
int32_t gradc_rt_get_num_threads(void);

/* Stops and joins the pool's workers, waiting for a loop another thread is running, and frees
 * the pool; the next parallel loop that needs threads starts them again. The object also does
 * this by itself when it is unloaded (a destructor), unless a loop is running then. */
void gradc_rt_shutdown(void);

/* ---- CUDA host launcher (cuda.c) -----------------------------------------------------------
 * libcuda is looked up with dlopen on every call (dlopen only counts references once the
 * library is loaded) and never closed, because unloading the driver under live contexts is
 * unsafe. Its one piece of state is a table of loaded modules, one per (context, PTX), kept
 * where the driver names contexts by a unique id (cuCtxGetId); see cuda.c. */

/* One kernel launch, with no dynamic shared memory. */
typedef struct gradc_rt_cuda_launch {
  const char *kernel; /* the kernel's entry name in the PTX */
  int64_t grid[3];    /* blocks: x, y, z */
  int64_t block[3];   /* threads per block: x, y, z */
  void **args;        /* cuLaunchKernel's kernelParams: the address of each parameter's value */
  int64_t num_args;   /* how many: each a device pointer (8 bytes) */
} gradc_rt_cuda_launch;

/* Loads `ptx` (NUL-terminated) as a module, or finds it loaded in this context already,
 * launches `launches[0 .. num_launches)` in order on `stream` (a CUstream; NULL is the legacy
 * default stream), and waits for the stream. Where the module is kept and the driver has CUDA
 * graphs, the launches are captured into a graph once per (module, launch arguments) and each
 * call replays it: one cuGraphLaunch per call (the legacy stream, which cannot be captured, or
 * a failed capture launches one by one). A module that could not be kept (no cuCtxGetId,
 * or the table full) is unloaded. A calling thread with no current CUDA context borrows, for the call, the context
 * that owns the device address `context_owner` (one of the call's buffers).
 * Returns 0 on success (also when num_launches is 0, without opening libcuda); 3 when
 * libcuda.so.1 or one of the driver functions it needs cannot be found; 4 when a driver call
 * fails or a grid or block size does not fit the driver's unsigned int. After a failed launch
 * the kernels already launched are waited for before the module is unloaded.
 * `status_word` (NULL: none) is the device address of an int64 that kernels set to a nonzero
 * status when an input is invalid (an out-of-range index): it is zeroed before the first launch
 * and, when every launch succeeded, read back after the stream is done; a nonzero value is
 * returned as the status (cuMemsetD8_v2 and cuMemcpyDtoH_v2 are looked up only then). */
int32_t gradc_rt_cuda_run(const char *ptx, const gradc_rt_cuda_launch *launches, int32_t num_launches, void *stream,
                          const void *context_owner, void *status_word);

/* A time loop over launches (loops/LoopIR.h: TimeLoop): launches [first, last) run `extent`
 * times before the launch after them; or, with `trips`, trips[i % num_trips] times the i-th
 * time the loop is entered in the call (the table is one run of the operator that made the
 * loop, which a loop around it may run again). */
typedef struct gradc_rt_cuda_loop {
  int32_t first, last;
  int64_t extent;
  const int64_t *trips;
  int64_t num_trips;
} gradc_rt_cuda_loop;

/* gradc_rt_cuda_run with time loops: `loops[0 .. num_loops)`, disjoint or nested, sorted by
 * first launch with the outer of two loops that start together first, repeat their launches
 * (a loop with extent 0 runs nothing). gradc_rt_cuda_run is this with no loops. */
int32_t gradc_rt_cuda_run_loops(const char *ptx, const gradc_rt_cuda_launch *launches, int32_t num_launches,
                                const gradc_rt_cuda_loop *loops, int32_t num_loops, void *stream,
                                const void *context_owner, void *status_word);

#ifdef __cplusplus
}
#endif

#endif /* GRADC_RUNTIME_H */
