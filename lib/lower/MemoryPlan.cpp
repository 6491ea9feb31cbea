//===- MemoryPlan.cpp - plan the workspace arena --------------------------===//
//
// Runs after lowering. Lifetimes are kernel indices; two buffers may share
// bytes only if one's last reader runs before the other's writer, or is that
// writer and may write over it (below). The
// placement is loops/Memory.h's, shared with the estimate rematerialization
// plans with; the result is exactly what the code uses.
//
// A kernel that reads an intermediate for the last time may write its
// result over it, element by element (Kernel::overwrites, InPlace.h): a
// backward pass's elementwise kernels then take no new memory.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/InPlace.h"
#include "gradc/loops/Memory.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Log.h"

namespace gradc {
namespace {

/// Intermediates and results, which the function may place where it likes.
bool placeable(const LoweredFunction &fn, const Buffer &b) {
  return (b.scope == BufferScope::Arena || b.scope == BufferScope::Output) && &b != fn.status.get();
}

/// Every (stored, loaded) pair of one dtype and size that InPlace.h's
/// overwrite rule allows, whether or not the lifetimes make use of it: the
/// footprints the memory model reads from this lowering serve the plans of
/// rematerialized functions too, where other buffers die here.
void list_overwrites(LoweredFunction &fn) {
  for (Kernel &k : fn.kernels) {
    k.overwrites.clear();
    Accesses a = accesses(k.body);
    for (const BufferPtr &buf : a.stored)
      for (const BufferPtr &over : a.loaded)
        if (buf != over && placeable(fn, *buf) && placeable(fn, *over) && buf->dtype == over->dtype &&
            buf->numel() == over->numel() && overwrite_violation(k, *buf, *over).empty())
          k.overwrites.emplace_back(buf, over);
  }
}

} // namespace

void plan_memory(LoweredFunction &fn) {
  list_overwrites(fn);
  fn.workspace_bytes = plan_arena(fn);
  if (log_enabled(LogLevel::Info)) {
    log(LogLevel::Info, "memory",
        "@" + fn.name + ": workspace " + std::to_string(fn.workspace_bytes) + " bytes for " +
            std::to_string(fn.arena.size()) + " arena buffers");
    for (const BufferPtr &b : fn.arena)
      log(LogLevel::Debug, "memory",
          "  " + b->name + ": " + std::to_string(b->bytes()) + " bytes at offset " + std::to_string(b->offset));
  }
}

} // namespace gradc
