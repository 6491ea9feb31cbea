//===- Target.cpp - the target description --------------------------------===//
#include "gradc/loops/Target.h"

#include <algorithm>

namespace gradc {

const char *target_kind_name(TargetKind kind) { return kind == TargetKind::CUDA ? "cuda" : "cpu"; }

int64_t Target::vector_lanes(DType dt) const { return cpu_tuning().lanes(dt); }

int64_t CpuTuning::lanes(DType dt) const { return std::max<int64_t>(1, vector_bytes / int64_t(dtype_bytes(dt))); }

CpuTuning Target::cpu_tuning() const {
  CpuTuning t;
  t.cores = cores > 0 ? cores : 4;
  t.vector_bytes = vector_bytes;
  t.vector_registers = vector_registers;
  // A register tile keeps a quarter of the registers for operands (24 of 32 with AVX-512, 12 of 16).
  t.accumulators = vector_registers >= 32 ? 24 : 12;
  t.l1d_bytes = l1d_bytes;
  t.l2_bytes = l2_bytes;
  t.has_fma = has_fma;
  return t;
}

std::string Target::describe() const {
  std::string s = std::string(target_kind_name(kind)) + " " + triple + " " + (cpu.empty() ? "generic" : cpu) + ", " +
                  std::to_string(vector_bytes) + "-byte vectors (" + std::to_string(vector_registers) + ")" +
                  (has_fma ? ", FMA, " : ", no FMA, ") + std::to_string(l1d_bytes >> 10) + " KiB L1d, " +
                  std::to_string(l2_bytes >> 10) + " KiB L2, " +
                  (cores > 0 ? std::to_string(cores) + " cores" : std::string("cores unknown"));
  if (is_gpu())
    s += "; " + gpu_arch + ", warp " + std::to_string(warp_size) + ", " + std::to_string(shared_memory_bytes) +
         " bytes shared memory, " + std::to_string(max_threads_per_block) + " threads per block" +
         (tf32 ? ", tf32 products on tensor cores" : "");
  return s;
}

} // namespace gradc
