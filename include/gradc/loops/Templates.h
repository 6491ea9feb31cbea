//===- Templates.h - kernels that share one function ----------------------===//
//
// Codegen emits one function per *template*: kernels that compute the same
// thing on their buffers share it, and so do kernels that differ only in
// some constants (the layers of a DenseNet block, whose channel count grows
// by 32 from one layer to the next): the constants in which they differ
// become arguments of the function, read from a table that each call
// passes. Compile time then grows with the templates, not with the shapes.
//
// Which constants may differ: the extents of Serial and Parallel loops (and
// a Parallel loop's chunk size, parallel_grain) and of Vectorized loops too
// long to be emitted lane-wise, Int64 constants of index arithmetic, and
// float32/float64 constants. Which may not: anything the code's shape
// depends on or that codegen analyses: the extents of Unrolled and lane-wise
// Vectorized loops, a constant factor of at most kMaxLoadStride of a
// product that reads the variable of a Vectorized loop or the row index of
// a transposing copy (a small stride: what decides whether codegen accesses
// memory in whole vectors, Lanes.h; a larger one may differ, and the key
// holds every access's stride class so that no template mixes accesses
// codegen emits differently), integer divisors, Local buffer sizes, dtypes,
// and every other field of the IR. A register tile's row stride may differ
// (the K of a 1x1 convolution's weight): measured, the tile runs as fast
// with it in a register (densenet121's step 217 ms both ways, 2 cores).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

#include <unordered_map>

namespace gradc {

/// Where a template reads its arguments: slot i of the table is the value of
/// the constant node, loop extent or parallel chunk size mapped to i.
struct KernelParams {
  std::unordered_map<const LExpr *, int> constants; // IntImm (Int64) and FloatImm nodes
  std::unordered_map<const Stmt *, int> extents;    // loop extents
  std::unordered_map<const Stmt *, int> grains;     // Parallel loops' chunk sizes (parallel_grain)
  int count = 0;
};

/// A template's argument for a slot: an integer, or a float's double bits.
using KernelArgs = std::vector<int64_t>;

struct KernelTemplate {
  const Kernel *kernel = nullptr; // its first kernel, whose IR is emitted
  KernelParams params;
};

struct ModuleTemplates {
  std::vector<KernelTemplate> templates;     // in order of first use
  std::vector<std::vector<size_t>> use;      // [function][kernel]: its template
  std::vector<std::vector<KernelArgs>> args; // [function][kernel]: the template's arguments
  size_t identical = 0;                      // kernels that equal an earlier one exactly
  size_t shared = 0;                         // kernels that use an earlier kernel's template
};

/// Groups a module's kernels into templates (first use order). Two kernels
/// share a template when they are equal but for the constants listed above;
/// a slot whose value is the same in every kernel of a template stays a
/// constant.
ModuleTemplates kernel_templates(const LoweredModule &module);

/// What identifies a kernel exactly (names never count): equal for two
/// kernels exactly when they compute the same thing on their buffers, taken
/// in Kernel::buffers order, constants bit for bit.
using KernelKey = std::vector<int64_t>;
KernelKey structural_key(const Kernel &kernel);

} // namespace gradc
