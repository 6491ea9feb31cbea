/* test_threads.c - checks the thread pool of runtime/threads.c through gradc_runtime.h.
 * run_tests.sh builds it with AddressSanitizer+UBSan and with ThreadSanitizer. Threads are
 * counted in /proc/self/task. Prints TAP-style lines; exits nonzero if a check failed. */
#define _POSIX_C_SOURCE 200809L

#include "gradc_runtime.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static int failures;

static void check(int ok, const char *name) {
  printf("%s - %s\n", ok ? "ok" : "not ok", name);
  failures += !ok;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static int count_threads(void) {
  DIR *dir = opendir("/proc/self/task");
  if (dir == NULL)
    return -1;
  int count = 0;
  for (struct dirent *e; (e = readdir(dir)) != NULL;)
    count += e->d_name[0] != '.';
  closedir(dir);
  return count;
}

/* A joined thread leaves /proc a moment after pthread_join returns. */
static int threads_become(int want) {
  for (int i = 0; i < 2000 && count_threads() != want; ++i)
    sleep_ms(1);
  return count_threads() == want;
}

/* Counts visits per index, and chunks that break the contract. */
struct coverage {
  int64_t n, grain;
  _Atomic int *visits;
  _Atomic int bad_chunks;
};

static void cover(void *closure, int64_t begin, int64_t end) {
  struct coverage *c = closure;
  int64_t grain = c->grain < 1 ? 1 : c->grain;
  if (begin < 0 || end > c->n || begin >= end || (end - begin < grain && end != c->n))
    atomic_fetch_add(&c->bad_chunks, 1);
  for (int64_t i = begin; i < end && i >= 0 && i < c->n; ++i)
    atomic_fetch_add(&c->visits[i], 1);
}

/* Runs one loop; says whether every index was visited exactly once by well-formed chunks. */
static int covers_exactly_once(int64_t n, int64_t grain) {
  struct coverage c = {n, grain, calloc((size_t)n + 1, sizeof(_Atomic int)), 0};
  gradc_rt_parallel_for(n, grain, cover, &c);
  int ok = atomic_load(&c.bad_chunks) == 0;
  for (int64_t i = 0; i < n; ++i)
    ok &= atomic_load(&c.visits[i]) == 1;
  free(c.visits);
  return ok;
}

static int covers_all_shapes(void) {
  static const int64_t ns[] = {0, 1, 2, 3, 7, 63, 64, 65, 1000, 4097};
  static const int64_t grains[] = {-1, 0, 1, 2, 7, 64, 5000};
  int ok = 1;
  for (size_t i = 0; i < sizeof ns / sizeof *ns; ++i)
    for (size_t j = 0; j < sizeof grains / sizeof *grains; ++j)
      ok &= covers_exactly_once(ns[i], grains[j]);
  return ok;
}

static void add_length(void *closure, int64_t begin, int64_t end) {
  atomic_fetch_add((_Atomic int64_t *)closure, end - begin);
}

struct who_ran {
  pthread_t caller;
  _Atomic int caller_ran, others_ran;
};

static void note_thread(void *closure, int64_t begin, int64_t end) {
  struct who_ran *w = closure;
  sleep_ms(end - begin);
  atomic_fetch_add(pthread_equal(pthread_self(), w->caller) ? &w->caller_ran : &w->others_ran, 1);
}

static void *loop_many_times(void *arg) {
  intptr_t ok = 1;
  for (int64_t k = 0; k < 60; ++k)
    ok &= covers_exactly_once(500 + 37 * k + (intptr_t)arg, 1 + k % 9);
  return (void *)ok;
}

static _Atomic int stop_changing;

static void *change_thread_count(void *arg) {
  (void)arg;
  for (int32_t k = 0; !atomic_load(&stop_changing); ++k) {
    gradc_rt_set_num_threads(1 + k % 4);
    sleep_ms(1);
  }
  return NULL;
}

enum { OUTER = 9, INNER = 101 };

struct nested {
  _Atomic int visits[OUTER][INNER];
  _Atomic int inner_left_its_thread;
};

struct nested_row {
  struct nested *all;
  int64_t row;
  pthread_t thread;
};

static void inner_task(void *closure, int64_t begin, int64_t end) {
  struct nested_row *r = closure;
  if (!pthread_equal(pthread_self(), r->thread))
    atomic_fetch_add(&r->all->inner_left_its_thread, 1);
  for (int64_t j = begin; j < end; ++j)
    atomic_fetch_add(&r->all->visits[r->row][j], 1);
}

static void outer_task(void *closure, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    struct nested_row r = {closure, i, pthread_self()};
    gradc_rt_parallel_for(INNER, 1, inner_task, &r);
  }
}

static void *do_nothing(void *arg) { return arg; }

int main(void) {
  /* A sanitizer may start a helper thread with the first thread: have it in the baseline. */
  pthread_t first;
  pthread_create(&first, NULL, do_nothing, NULL);
  pthread_join(first, NULL);
  sleep_ms(50);
  const int base = count_threads();
  check(base >= 1, "threads are counted in /proc/self/task");

  gradc_rt_set_num_threads(1);
  check(gradc_rt_get_num_threads() == 1, "set_num_threads(1)");
  check(covers_all_shapes() && count_threads() == base, "1 thread: every index once, no thread started");

  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  gradc_rt_set_num_threads(0);
  check(gradc_rt_get_num_threads() == (cpus < 1 ? 1 : cpus), "0 selects the online CPUs");
  gradc_rt_set_num_threads(-3);
  check(gradc_rt_get_num_threads() == (cpus < 1 ? 1 : cpus), "a negative count selects the online CPUs");

  static const int32_t counts[] = {2, 3, 4, 8, 5, 2};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; ++i) {
    char name[96];
    gradc_rt_set_num_threads(counts[i]);
    int ok = covers_all_shapes();
    snprintf(name, sizeof name, "%d threads: every index once, chunks of at least grain", (int)counts[i]);
    check(ok, name);
    snprintf(name, sizeof name, "%d threads: %d worker(s) running", (int)counts[i], (int)counts[i] - 1);
    check(threads_become(base + counts[i] - 1), name);
  }

  gradc_rt_set_num_threads(1);
  check(covers_all_shapes() && count_threads() == base + 1, "back to 1 thread: inline, workers left asleep");

  gradc_rt_set_num_threads(3);
  _Atomic int64_t covered = 0;
  gradc_rt_parallel_for(INT64_MAX, INT64_MAX / 5, add_length, &covered);
  check(atomic_load(&covered) == INT64_MAX, "n = INT64_MAX: chunk bounds do not overflow");

  gradc_rt_set_num_threads(4);
  struct who_ran w = {pthread_self(), 0, 0};
  gradc_rt_parallel_for(64, 1, note_thread, &w);
  check(atomic_load(&w.caller_ran) > 0 && atomic_load(&w.others_ran) > 0, "the caller and the workers share a loop");

  static struct nested nest;
  gradc_rt_parallel_for(OUTER, 1, outer_task, &nest);
  int nested_ok = atomic_load(&nest.inner_left_its_thread) == 0;
  for (int i = 0; i < OUTER; ++i)
    for (int j = 0; j < INNER; ++j)
      nested_ok &= atomic_load(&nest.visits[i][j]) == 1;
  check(nested_ok, "a loop inside a task runs inline on that task's thread, every index once");

  gradc_rt_set_num_threads(3);
  pthread_t callers[4];
  for (intptr_t t = 0; t < 4; ++t)
    pthread_create(&callers[t], NULL, loop_many_times, (void *)t);
  int concurrent_ok = 1;
  for (int t = 0; t < 4; ++t) {
    void *ok;
    pthread_join(callers[t], &ok);
    concurrent_ok &= ok != NULL;
  }
  check(concurrent_ok, "4 application threads loop at once: every index once");

  pthread_t changer, caller;
  pthread_create(&changer, NULL, change_thread_count, NULL);
  pthread_create(&caller, NULL, loop_many_times, (void *)1);
  void *changing_ok;
  pthread_join(caller, &changing_ok);
  atomic_store(&stop_changing, 1);
  pthread_join(changer, NULL);
  check(changing_ok != NULL, "the thread count changes while another thread loops");

#ifndef UNDER_TSAN /* ThreadSanitizer does not support threads started after a fork */
  gradc_rt_set_num_threads(4);
  covers_exactly_once(1000, 1);
  pid_t child = fork();
  if (child == 0)
    _exit(covers_all_shapes() && threads_become(1 + 3) ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  check(child > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "a forked child starts a pool of its own: every index once, 3 workers");
  check(covers_exactly_once(1000, 1), "the parent's pool still works after the fork");
#endif

  return failures != 0;
}
