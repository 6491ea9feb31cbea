/* harness.c - runs one entry point of a gradc --target=cuda object on the GPU, for gpu_check.py.
 *
 *   cc -DENTRY=m_main_adjoint harness.c m.o -I/usr/local/cuda/include \
 *      -L/usr/local/cuda/lib64/stubs -lcuda -lm -o run
 *   run WORKSPACE_BYTES in:BYTES:FILE... inout:BYTES:FILE:RESULT_FILE... out:BYTES:FILE... [time:N]
 *
 * An input FILE of the form @float32, @float64, @int64:RANGE or @int32:RANGE is not read but
 * made here (a benchmark's inputs, too large to travel): element i is pattern(i) =
 * ((i * 2654435761) mod 2^32) / 2^32 - 0.5 in the float type, or i mod RANGE
 * (bench/gpu_peers.py makes the same values for PyTorch).
 *
 * Each input is read from a raw file into a device buffer (an inout one, a parameter the call
 * updates in place, is written back to RESULT_FILE after the call); every output and the workspace are
 * filled with 0xFF bytes first (NaN for floats, -1 for integers), so an element the kernels do
 * not write shows up as a difference rather than hiding behind zeroed memory. The entry point is
 * called once on the legacy default stream and its outputs are written back to their files. With
 * time:N it is then called N more times on a stream of its own (where the runtime replays the
 * call's CUDA graph, as an application's stream does) and "TIME median_ms min_ms" is printed (the
 * entry point waits for its kernels, so a call's wall time is its cost).
 * Exit status: 0 on success, 2 for bad arguments or I/O, 3 for a driver failure, 4 when the
 * entry point returns nonzero (its status is printed). */
#define _POSIX_C_SOURCE 200809L

#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The header's struct of inputs and of outputs are each a run of pointer fields, one per
 * parameter or result, so arrays of pointers have their layout. */
int32_t ENTRY(const void *inputs, void *outputs, void *workspace, CUstream stream);

#define MAX_BUFFERS 256

struct buffer {
  size_t bytes;
  const char *file;
  const char *result_file; /* inout: where its value after the call goes */
  CUdeviceptr device;
};

static int driver(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return 1;
  const char *name = "?";
  cuGetErrorName(r, &name);
  fprintf(stderr, "harness: %s failed: %s\n", what, name);
  return 0;
}

/* Device memory of at least one byte, so an empty tensor still has a distinct address. */
static int allocate(struct buffer *b) {
  return driver(cuMemAlloc(&b->device, b->bytes ? b->bytes : 1), "cuMemAlloc") &&
         driver(cuMemsetD8(b->device, 0xFF, b->bytes ? b->bytes : 1), "cuMemsetD8");
}

/* Fills `host` (bytes of it) with the pattern named by `spec` ("@float32", "@int64:10", ...). */
static int make_pattern(const char *spec, void *host, size_t bytes) {
  long range = 0;
  const char *colon = strchr(spec, ':');
  if (colon != NULL)
    range = strtol(colon + 1, NULL, 10);
  for (size_t i = 0;; ++i) {
    double v = (double)(uint32_t)((uint64_t)i * 2654435761u) / 4294967296.0 - 0.5;
    if (strncmp(spec, "@float32", 8) == 0 && (i + 1) * 4 <= bytes)
      ((float *)host)[i] = (float)v;
    else if (strncmp(spec, "@float64", 8) == 0 && (i + 1) * 8 <= bytes)
      ((double *)host)[i] = v;
    else if (strncmp(spec, "@int64", 6) == 0 && range > 0 && (i + 1) * 8 <= bytes)
      ((int64_t *)host)[i] = (int64_t)(i % (size_t)range);
    else if (strncmp(spec, "@int32", 6) == 0 && range > 0 && (i + 1) * 4 <= bytes)
      ((int32_t *)host)[i] = (int32_t)(i % (size_t)range);
    else
      return i > 0 || bytes == 0;
  }
}

static int load(struct buffer *b) {
  if (b->file[0] == '@') {
    void *host = malloc(b->bytes ? b->bytes : 1);
    int ok = host != NULL && make_pattern(b->file, host, b->bytes);
    if (!ok)
      fprintf(stderr, "harness: cannot make the input %s\n", b->file);
    else if (b->bytes)
      ok = driver(cuMemcpyHtoD(b->device, host, b->bytes), "cuMemcpyHtoD");
    free(host);
    return ok;
  }
  FILE *f = fopen(b->file, "rb");
  if (f == NULL) {
    fprintf(stderr, "harness: cannot open %s\n", b->file);
    return 0;
  }
  void *host = malloc(b->bytes ? b->bytes : 1);
  size_t got = fread(host, 1, b->bytes, f);
  fclose(f);
  int ok = got == b->bytes;
  if (!ok)
    fprintf(stderr, "harness: %s has %zu bytes, expected %zu\n", b->file, got, b->bytes);
  else if (b->bytes)
    ok = driver(cuMemcpyHtoD(b->device, host, b->bytes), "cuMemcpyHtoD");
  free(host);
  return ok;
}

static int store(const struct buffer *b, const char *file) {
  void *host = malloc(b->bytes ? b->bytes : 1);
  int ok = b->bytes == 0 || driver(cuMemcpyDtoH(host, b->device, b->bytes), "cuMemcpyDtoH");
  FILE *f = ok ? fopen(file, "wb") : NULL;
  if (ok && (f == NULL || fwrite(host, 1, b->bytes, f) != b->bytes)) {
    fprintf(stderr, "harness: cannot write %s\n", file);
    ok = 0;
  }
  if (f != NULL)
    fclose(f);
  free(host);
  return ok;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s WORKSPACE_BYTES in:BYTES:FILE... inout:BYTES:FILE:RESULT_FILE... out:BYTES:FILE... [time:N]\n",
            argv[0]);
    return 2;
  }
  static struct buffer in[MAX_BUFFERS], out[MAX_BUFFERS];
  int num_in = 0, num_out = 0, repeats = 0;
  size_t workspace_bytes = strtoull(argv[1], NULL, 10);
  for (int i = 2; i < argc; ++i) {
    char *colon = strchr(argv[i], ':');
    if (colon == NULL)
      return fprintf(stderr, "harness: bad argument %s\n", argv[i]), 2;
    if (strncmp(argv[i], "time:", 5) == 0) {
      repeats = atoi(colon + 1);
      continue;
    }
    char *rest;
    size_t bytes = strtoull(colon + 1, &rest, 10);
    int is_inout = strncmp(argv[i], "inout:", 6) == 0, is_in = is_inout || strncmp(argv[i], "in:", 3) == 0;
    if (*rest != ':' || (!is_in && strncmp(argv[i], "out:", 4) != 0) || num_in == MAX_BUFFERS ||
        num_out == MAX_BUFFERS)
      return fprintf(stderr, "harness: bad argument %s\n", argv[i]), 2;
    struct buffer *b = is_in ? &in[num_in++] : &out[num_out++];
    b->bytes = bytes;
    b->file = rest + 1;
    if (is_inout) {
      char *result = strchr(rest + 1, ':');
      if (result == NULL)
        return fprintf(stderr, "harness: bad argument %s\n", argv[i]), 2;
      *result = '\0';
      b->result_file = result + 1;
    }
  }

  CUdevice device;
  CUcontext context;
  if (!driver(cuInit(0), "cuInit") || !driver(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !driver(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain") ||
      !driver(cuCtxSetCurrent(context), "cuCtxSetCurrent"))
    return 3;
  void *in_ptrs[MAX_BUFFERS], *out_ptrs[MAX_BUFFERS];
  for (int i = 0; i < num_in; ++i) {
    if (!allocate(&in[i]) || !load(&in[i]))
      return 3;
    in_ptrs[i] = (void *)(uintptr_t)in[i].device;
  }
  for (int i = 0; i < num_out; ++i) {
    if (!allocate(&out[i]))
      return 3;
    out_ptrs[i] = (void *)(uintptr_t)out[i].device;
  }
  struct buffer workspace = {workspace_bytes, NULL, NULL, 0};
  if (workspace_bytes && !allocate(&workspace))
    return 3;
  void *ws = workspace_bytes ? (void *)(uintptr_t)workspace.device : NULL;

  int32_t status = ENTRY(in_ptrs, out_ptrs, ws, NULL);
  if (status != 0) {
    fprintf(stderr, "harness: the entry point returned %d\n", (int)status);
    return 4;
  }
  for (int i = 0; i < num_out; ++i)
    if (!store(&out[i], out[i].file))
      return 2;
  for (int i = 0; i < num_in; ++i)
    if (in[i].result_file != NULL && !store(&in[i], in[i].result_file))
      return 2;

  if (repeats > 0) {
    CUstream stream;
    if (!driver(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
      return 3;
    if ((status = ENTRY(in_ptrs, out_ptrs, ws, stream)) != 0) /* the first on this stream: captured */
      return fprintf(stderr, "harness: a call on a stream returned %d\n", (int)status), 4;
    double *ms = malloc(sizeof(double) * (size_t)repeats);
    for (int r = 0; r < repeats; ++r) {
      double start = now_ms();
      status = ENTRY(in_ptrs, out_ptrs, ws, stream);
      ms[r] = now_ms() - start;
      if (status != 0)
        return fprintf(stderr, "harness: a timed call returned %d\n", (int)status), 4;
    }
    qsort(ms, (size_t)repeats, sizeof(double), by_value);
    printf("TIME %.4f %.4f\n", ms[repeats / 2], ms[0]);
    free(ms);
  }
  return 0;
}
