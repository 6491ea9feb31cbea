/* object_harness.c - runs one entry point of a gradc CPU object on raw inputs, for the Python
 * checks that compare a linked object with a reference (torch_scan_check.py).
 *
 *   cc -DENTRY=m_main_adjoint object_harness.c m.o -lm -o run
 *   run WORKSPACE_BYTES in:BYTES:FILE... out:BYTES:FILE...
 *
 * Each input is read from a raw file; every output and the workspace are filled with 0xFF bytes
 * first (NaN for floats, -1 for integers), so an element the code does not write shows up as a
 * difference rather than hiding behind zeroed memory. The entry point is called once and its
 * outputs are written back to their files. Exit status: 0 on success, 2 for bad arguments or
 * I/O, 4 when the entry point returns nonzero (its status is printed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The header's struct of inputs and of outputs are each a run of pointer fields, one per
 * parameter or result, so arrays of pointers have their layout. */
int32_t ENTRY(const void *inputs, void *outputs, void *workspace);

#define MAX_BUFFERS 256
enum { ALIGN = 64 };

static void *buffer(size_t bytes) {
  size_t size = (bytes + ALIGN - 1) / ALIGN * ALIGN;
  void *p = aligned_alloc(ALIGN, size ? size : ALIGN);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  memset(p, 0xFF, size ? size : ALIGN);
  return p;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return fprintf(stderr, "usage: %s WORKSPACE_BYTES in:BYTES:FILE... out:BYTES:FILE...\n", argv[0]), 2;
  void *in[MAX_BUFFERS], *out[MAX_BUFFERS];
  size_t out_bytes[MAX_BUFFERS];
  const char *out_file[MAX_BUFFERS];
  int n_in = 0, n_out = 0;
  void *workspace = buffer(strtoull(argv[1], NULL, 10));
  for (int a = 2; a < argc; ++a) {
    int is_in = strncmp(argv[a], "in:", 3) == 0;
    if ((!is_in && strncmp(argv[a], "out:", 4) != 0) || n_in == MAX_BUFFERS || n_out == MAX_BUFFERS)
      return fprintf(stderr, "bad argument %s\n", argv[a]), 2;
    char *end;
    size_t bytes = strtoull(argv[a] + (is_in ? 3 : 4), &end, 10);
    if (*end != ':')
      return fprintf(stderr, "bad argument %s\n", argv[a]), 2;
    const char *file = end + 1;
    void *p = buffer(bytes);
    if (is_in) {
      FILE *f = fopen(file, "rb");
      if (!f || fread(p, 1, bytes, f) != bytes)
        return fprintf(stderr, "cannot read %zu bytes from %s\n", bytes, file), 2;
      fclose(f);
      in[n_in++] = p;
    } else {
      out_bytes[n_out] = bytes;
      out_file[n_out] = file;
      out[n_out++] = p;
    }
  }
  int32_t status = ENTRY(in, out, workspace);
  if (status != 0)
    return fprintf(stderr, "the entry point returned %d\n", (int)status), 4;
  for (int o = 0; o < n_out; ++o) {
    FILE *f = fopen(out_file[o], "wb");
    if (!f || fwrite(out[o], 1, out_bytes[o], f) != out_bytes[o])
      return fprintf(stderr, "cannot write %s\n", out_file[o]), 2;
    fclose(f);
  }
  return 0;
}
