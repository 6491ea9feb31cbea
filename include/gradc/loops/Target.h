//===- Target.h - what the machine a module is compiled for can do --------===//
//
// Lowering and the loop-IR schedule passes decide from this description, not
// from a "gpu" flag: operator strategies are registered per TargetKind, the
// CPU schedule reads vector width and cores, GPU binding the launch limits.
// The codegen layer fills it from the command line and the host's actual CPU
// features (codegen/Codegen.h: describe_target), so an AVX2 host and an
// AVX-512 host get code for their own vector width.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Type.h"

#include <string>

namespace gradc {

enum class TargetKind { CPU, CUDA };

/// What the CPU's hand schedules (matrix-product blocking, reductions,
/// scans) size themselves by, resolved once from the Target: every guess
/// for a machine gradc is not running on is made here, not at each use.
struct CpuTuning {
  int64_t cores = 4;            // threads a parallel loop spreads over (4 where unknown: another machine)
  int64_t vector_bytes = 16;    // the widest vector register
  int64_t vector_registers = 16; // architectural vector registers
  int64_t accumulators = 12;    // vector accumulators a register tile may hold (the rest load operands)
  int64_t l1d_bytes = 32 << 10, l2_bytes = 512 << 10; // per-core data caches
  bool has_fma = false;
  /// Elements of `dt` in one vector register.
  int64_t lanes(DType dt) const;
};

struct Target {
  TargetKind kind = TargetKind::CPU;

  // CPU (for CUDA: the host that calls the kernels).
  std::string triple; // LLVM target triple
  std::string cpu;    // LLVM CPU name ("skylake-avx512", "znver3", "generic")
  int vector_bytes = 16; // widest vector register the CPU's features allow (16 SSE, 32 AVX2, 64 AVX-512)
  int cores = 0;         // online CPUs when compiling for the host; 0 = unknown (another machine)
  int vector_registers = 16; // architectural vector registers (32 with AVX-512, 16 with AVX2/SSE on x86-64)
  bool has_fma = false;      // fused multiply-add instructions (x86 FMA3, AArch64)
  int64_t l1d_bytes = 32 << 10;  // per-core data caches: the host's own, or a conservative
  int64_t l2_bytes = 512 << 10;  // guess for another machine (what matrix-product blocking reads)

  // GPU (CUDA only).
  std::string gpu_arch;                  // "sm_80"
  int warp_size = 32;                    //
  int64_t shared_memory_bytes = 48 << 10; // static shared memory per block
  int max_threads_per_block = 1024;      //
  /// --gpu-math=tf32: float32 products may round their operands to
  /// TensorFloat-32 and multiply on tensor cores (PyTorch's allow_tf32).
  bool tf32 = false;

  bool is_gpu() const { return kind == TargetKind::CUDA; }
  /// The CPU facts in one record, unknowns resolved (the host of a CUDA target).
  CpuTuning cpu_tuning() const;
  /// Elements of `dt` in one vector register of the CPU.
  int64_t vector_lanes(DType dt) const;
  /// One line for the -v log: "cpu x86_64-pc-linux-gnu skylake-avx512, 64-byte vectors (32), FMA, 48 KiB L1d,
  /// 2048 KiB L2, 2 cores" (CUDA adds the GPU's architecture and limits).
  std::string describe() const;
};

const char *target_kind_name(TargetKind kind);

} // namespace gradc
