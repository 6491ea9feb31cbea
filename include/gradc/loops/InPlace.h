//===- InPlace.h - what updating a parameter in place requires -----------===//
//
// A function may write a result leaf into one of its parameters (an InOut
// buffer, FunctionAttrs::inplace): the caller's buffer is read, then
// updated. Lowering writes a leaf straight into the parameter where the
// kernels that make it satisfy the rule below, and copies it there last
// otherwise; the verifier checks the rule after every loop pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

#include <string>
#include <vector>

namespace gradc {

/// Why the kernels of `fn` do not update `buf` safely in place, or "" if
/// they do: at most one kernel stores into it, outside every time loop; in
/// it each store into `buf` is under loops whose variables all appear in its
/// index (each element is written in one iteration), and every read of
/// `buf` is at a store's index (the same element in the same iteration: the
/// old value before the store, the new one after; never another element,
/// which another iteration or thread may have written already). Kernels
/// before the writer read the old value, kernels after it the new one:
/// which a binding wants is the lowering's to keep (Lower.cpp writes a
/// result in place only where no later kernel wants the old value).
std::string in_place_violation(const LoweredFunction &fn, const Buffer &buf);

/// The buffers a loop nest stores into and those it loads, each once, in
/// the order first met.
struct Accesses {
  std::vector<BufferPtr> stored, loaded;
};
Accesses accesses(const StmtPtr &body);

/// Why kernel `k` may not store `buf`'s values over the bytes of `over`
/// (an input it reads for the last time, of the same dtype and size; the
/// memory plan then gives both one place, Kernel::overwrites), or "" if it
/// may: each store into `buf` is under loops whose variables its index reads
/// (each element written in one iteration), `over` is read only inside the
/// values stored into `buf` and at their own index (the old element, read
/// before the store that replaces it: the store's value depends on it), no
/// two stores into `buf` are at one index and none that does not read `over`
/// stands beside stores that do (a fill, then a scatter that reads `over`:
/// the fill would erase it first), and the kernel neither reads `buf` nor
/// writes `over`.
std::string overwrite_violation(const Kernel &k, const Buffer &buf, const Buffer &over);

} // namespace gradc
