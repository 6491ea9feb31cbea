/* threads.c - the thread pool behind gradc_rt_parallel_for (gradc_runtime.h).
 * Compiled to bitcode and linked into every module that gradc emits, where the outlined bodies
 * of parallel loops in CPU kernels call it. Its static variables are the only global state of
 * an emitted object; it needs only libc's pthreads. */
#define _POSIX_C_SOURCE 200809L

#include "gradc_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* A parallel loop in flight. It lives on the stack of the thread that posted it, which does
 * not return before every worker that joined has left (workers_in back to 0). */
struct gradc_rt_job {
  gradc_rt_task task;
  void *closure;
  int64_t n;
  int64_t grain;   /* the least iterations worth one claim */
  int64_t divisor; /* a claim takes the unclaimed iterations over this, at least `grain` */
  _Atomic int64_t next; /* the first unclaimed iteration: claimed first come, first served */
  _Atomic int32_t workers_in; /* changed under gradc_rt_pool.lock; the owner also polls it */
};

/* A model runs its parallel loops in quick succession, and a thread woken through a condition
 * variable (a futex) often arrives after the owner has done all the work alone. So a worker
 * polls for the next job, and the owner for its workers, this many pauses before sleeping:
 * 0.05 to 1 ms, by the CPU's pause latency (OpenMP runtimes spin up to 200 ms by default). */
enum { GRADC_RT_SPIN = 20000 };

static void gradc_rt_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause(); /* an intrinsic: the emitted objects have no inline assembly */
#endif
}

/* Held by the one application thread whose loop the pool is running, for the whole loop. It also
 * guards `threads`, `started`, `capacity` and `pid`, which only that thread changes. Other
 * callers try it and run their loop inline when it is taken: no caller ever sleeps on another's
 * loop, and a loop inside a task of the pool (on a worker or on the owner) runs inline on the
 * task's thread. In a child forked while another thread held it, every loop runs inline. */
static pthread_mutex_t gradc_rt_owner = PTHREAD_MUTEX_INITIALIZER;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;      /* workers: a job was posted, or `keep` went down */
  pthread_cond_t idle;      /* the owner: the last worker left its job */
  struct gradc_rt_job *job; /* NULL between jobs, so that a late worker joins no finished job */
  _Atomic uint64_t generation; /* bumped per job: a worker joins each job at most once */
  _Atomic int32_t keep;        /* workers whose id is below `keep` stay, the others exit */
  pthread_t *threads;       /* workers by id; [0, started) are running */
  int32_t started;
  int32_t capacity;
  pid_t pid; /* the process that started the workers */
} gradc_rt_pool = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, NULL, 0, 0, 0};

static _Atomic int32_t gradc_rt_requested;   /* as given to gradc_rt_set_num_threads */
static _Atomic int32_t gradc_rt_online_cpus; /* 0 until first read: sysconf reads /sys */

void gradc_rt_set_num_threads(int32_t n) { atomic_store(&gradc_rt_requested, n); }

int32_t gradc_rt_get_num_threads(void) {
  int32_t requested = atomic_load(&gradc_rt_requested);
  if (requested > 0)
    return requested;
  int32_t cpus = atomic_load(&gradc_rt_online_cpus);
  if (cpus == 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpus = online < 1 ? 1 : online > INT32_MAX ? INT32_MAX : (int32_t)online;
    atomic_store(&gradc_rt_online_cpus, cpus);
  }
  return cpus;
}

/* Claims shrink as the loop drains (guided scheduling): the first are large, so that a loop of
 * many cheap iterations costs few claims, and the last are `grain`, so that threads finish
 * within one small claim of each other even when iterations are few and heavy (49 panels of a
 * matrix product on 2 threads: fixed chunks of 7 left one thread 7 panels more). */
static void gradc_rt_run_chunks(struct gradc_rt_job *job) {
  int64_t begin = atomic_load_explicit(&job->next, memory_order_relaxed);
  while (begin < job->n) {
    int64_t left = job->n - begin, size = left / job->divisor;
    if (size < job->grain)
      size = job->grain;
    int64_t end = size >= left ? job->n : begin + size;
    if (atomic_compare_exchange_weak_explicit(&job->next, &begin, end, memory_order_relaxed, memory_order_relaxed)) {
      job->task(job->closure, begin, end);
      begin = atomic_load_explicit(&job->next, memory_order_relaxed);
    }
  }
}

static void *gradc_rt_worker(void *arg) {
  int32_t id = (int32_t)(intptr_t)arg;
  uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; spin < GRADC_RT_SPIN && gradc_rt_pool.generation == seen && id < gradc_rt_pool.keep; ++spin)
      gradc_rt_pause();
    pthread_mutex_lock(&gradc_rt_pool.lock);
    while (id < gradc_rt_pool.keep && (gradc_rt_pool.job == NULL || gradc_rt_pool.generation == seen))
      pthread_cond_wait(&gradc_rt_pool.wake, &gradc_rt_pool.lock);
    if (id >= gradc_rt_pool.keep) {
      pthread_mutex_unlock(&gradc_rt_pool.lock);
      return NULL;
    }
    struct gradc_rt_job *job = gradc_rt_pool.job;
    seen = gradc_rt_pool.generation;
    job->workers_in++;
    pthread_mutex_unlock(&gradc_rt_pool.lock);
    gradc_rt_run_chunks(job);
    pthread_mutex_lock(&gradc_rt_pool.lock);
    if (--job->workers_in == 0) /* the owner may return (and `job` end) once this is 0 */
      pthread_cond_signal(&gradc_rt_pool.idle);
    pthread_mutex_unlock(&gradc_rt_pool.lock);
  }
}

/* Called by the owner between jobs. Workers that cannot be started are simply missing: the
 * owner's own share of the work grows, and the next loop tries again. */
static void gradc_rt_resize_pool(int32_t workers) {
  /* fork() copies only the forking thread: a child must not wait for, join or share a lock with
   * workers that live in its parent, so it forgets them and their state. pthread_atfork is the
   * usual tool, but glibc exports it only through libc_nonshared.a, out of reach of a JIT that
   * resolves symbols with dlsym; hence the process ids. */
  if (gradc_rt_pool.started > 0 && gradc_rt_pool.pid != getpid()) {
    pthread_mutex_init(&gradc_rt_pool.lock, NULL);
    pthread_cond_init(&gradc_rt_pool.wake, NULL);
    pthread_cond_init(&gradc_rt_pool.idle, NULL);
    gradc_rt_pool.started = 0;
  }
  if (gradc_rt_pool.started == workers)
    return;
  gradc_rt_pool.pid = getpid();
  pthread_mutex_lock(&gradc_rt_pool.lock);
  gradc_rt_pool.keep = workers;
  pthread_cond_broadcast(&gradc_rt_pool.wake);
  pthread_mutex_unlock(&gradc_rt_pool.lock);
  while (gradc_rt_pool.started > workers)
    pthread_join(gradc_rt_pool.threads[--gradc_rt_pool.started], NULL);
  if (workers > gradc_rt_pool.capacity) {
    pthread_t *grown = realloc(gradc_rt_pool.threads, (size_t)workers * sizeof *grown);
    if (grown == NULL)
      return;
    gradc_rt_pool.threads = grown;
    gradc_rt_pool.capacity = workers;
  }
  while (gradc_rt_pool.started < workers &&
         pthread_create(&gradc_rt_pool.threads[gradc_rt_pool.started], NULL, gradc_rt_worker,
                        (void *)(intptr_t)gradc_rt_pool.started) == 0)
    gradc_rt_pool.started++;
}

void gradc_rt_parallel_for(int64_t n, int64_t grain, gradc_rt_task task, void *closure) {
  if (n <= 0)
    return;
  if (grain < 1)
    grain = 1;
  int32_t threads = gradc_rt_get_num_threads();
  if (threads == 1 || n <= grain || pthread_mutex_trylock(&gradc_rt_owner) != 0) {
    task(closure, 0, n);
    return;
  }
  gradc_rt_resize_pool(threads - 1);

  struct gradc_rt_job job = {task, closure, n, grain, 2 * (int64_t)threads, 0, 0};

  pthread_mutex_lock(&gradc_rt_pool.lock);
  gradc_rt_pool.job = &job;
  gradc_rt_pool.generation++;
  pthread_cond_broadcast(&gradc_rt_pool.wake);
  pthread_mutex_unlock(&gradc_rt_pool.lock);

  gradc_rt_run_chunks(&job);

  /* Every chunk is claimed now; wait for those still running on workers. */
  pthread_mutex_lock(&gradc_rt_pool.lock);
  gradc_rt_pool.job = NULL;
  pthread_mutex_unlock(&gradc_rt_pool.lock);
  for (int spin = 0; spin < GRADC_RT_SPIN && job.workers_in > 0; ++spin)
    gradc_rt_pause();
  pthread_mutex_lock(&gradc_rt_pool.lock);
  while (job.workers_in > 0)
    pthread_cond_wait(&gradc_rt_pool.idle, &gradc_rt_pool.lock);
  pthread_mutex_unlock(&gradc_rt_pool.lock);
  pthread_mutex_unlock(&gradc_rt_owner);
}

/* Stops and joins every worker and frees the pool; a later parallel loop starts it again. Runs as
 * a destructor too, when the object is unloaded (dlclose) or the process exits: workers spinning
 * or sleeping in code that is about to be unmapped crashed a dlclose right after a call. A pool
 * busy with another thread's loop at that moment is left alone (waiting could deadlock an exit),
 * and so is one inherited across fork(), whose workers live in the parent. */
static void gradc_rt_stop_pool(int wait) {
  if (wait)
    pthread_mutex_lock(&gradc_rt_owner);
  else if (pthread_mutex_trylock(&gradc_rt_owner) != 0)
    return;
  if (gradc_rt_pool.started > 0 && gradc_rt_pool.pid == getpid())
    gradc_rt_resize_pool(0);
  free(gradc_rt_pool.threads);
  gradc_rt_pool.threads = NULL;
  gradc_rt_pool.capacity = 0;
  gradc_rt_pool.started = 0;
  pthread_mutex_unlock(&gradc_rt_owner);
}

void gradc_rt_shutdown(void) { gradc_rt_stop_pool(1); }

__attribute__((destructor)) static void gradc_rt_unload(void) { gradc_rt_stop_pool(0); }
