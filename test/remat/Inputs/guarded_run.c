/* Runs a compiled function with its workspace flush against inaccessible
 * pages on both sides: exactly WS bytes, so that any access past the planned
 * workspace faults (the object is not instrumented, so AddressSanitizer's
 * red zones would not see it). Inputs are filled from a fixed seed, outputs
 * and workspace with garbage first; the outputs are written to OUT, raw, in
 * order. Build with -DENTRY=<symbol>.
 * usage: guarded_run WS OUT in:BYTES:SCALE... out:BYTES... */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int32_t ENTRY(void *const *inputs, void *const *outputs, void *workspace);

int main(int argc, char **argv) {
  if (argc < 3)
    return 2;
  size_t ws = strtoull(argv[1], NULL, 10), page = (size_t)sysconf(_SC_PAGESIZE);
  size_t span = (ws + page - 1) / page * page;
  char *region = mmap(NULL, span + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED || mprotect(region, page, PROT_NONE) || mprotect(region + page + span, page, PROT_NONE))
    return 3;
  char *workspace = region + page + span - ws; /* ws is a multiple of 64: aligned, flush with the guard */
  memset(workspace, 0xAB, ws);
  void *inputs[512], *outputs[512];
  size_t out_bytes[512];
  int n_in = 0, n_out = 0;
  uint64_t state = 88172645463325252ull;
  for (int a = 3; a < argc; ++a) {
    size_t bytes = strtoull(argv[a] + (argv[a][0] == 'i' ? 3 : 4), NULL, 10);
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (argv[a][0] == 'i') {
      double scale = atof(strchr(argv[a] + 3, ':') + 1);
      float *f = p;
      for (size_t i = 0; i < bytes / 4; ++i) { /* xorshift, uniform in [-scale, scale) */
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        f[i] = (float)(((double)(state >> 11) / 9007199254740992.0 * 2 - 1) * scale);
      }
      inputs[n_in++] = p;
    } else {
      memset(p, 0xCD, bytes);
      out_bytes[n_out] = bytes;
      outputs[n_out++] = p;
    }
  }
  int32_t rc = ENTRY(inputs, outputs, workspace);
  FILE *out = fopen(argv[2], "wb");
  for (int i = 0; i < n_out; ++i)
    fwrite(outputs[i], 1, out_bytes[i], out);
  fclose(out);
  return rc;
}
