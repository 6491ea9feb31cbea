/* A stand-in libcuda.so.1 for nested_scan_checkpoint_slots.test: every driver call the CUDA
 * host stub makes succeeds, and each launch prints its kernel's name on a line of its own
 * (nothing runs: the test counts the launches of the loops with trip counts). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int cuInit(unsigned flags) { return (int)flags; }
int cuCtxGetCurrent(void **ctx) { *ctx = (void *)7; return 0; }
int cuPointerGetAttribute(void **data, int attribute, uint64_t ptr) {
  (void)data, (void)attribute, (void)ptr;
  return 0;
}
int cuCtxPushCurrent_v2(void *ctx) { (void)ctx; return 0; }
int cuCtxPopCurrent_v2(void **ctx) { (void)ctx; return 0; }
int cuModuleLoadData(void **module, const char *ptx) { (void)ptx; *module = (void *)2; return 0; }
int cuModuleGetFunction(void **f, void *module, const char *name) { (void)module; *f = (void *)name; return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **args, void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)args, (void)extra;
  printf("%s\n", (const char *)f);
  return 0;
}
int cuStreamSynchronize(void *stream) { (void)stream; return 0; }
int cuModuleUnload(void *module) { (void)module; return 0; }
int cuMemsetD8_v2(uint64_t address, unsigned char value, size_t bytes) {
  (void)address, (void)value, (void)bytes;
  return 0;
}
int cuMemcpyDtoH_v2(void *destination, uint64_t source, size_t bytes) {
  (void)destination, (void)source, (void)bytes;
  return 0;
}
