//===- MemoryPlan.cpp - plan the workspace arena --------------------------===//
//
// Runs after lowering. Lifetimes are kernel indices; two buffers may share
// bytes only if one's last reader runs before the other's writer. The
// placement is loops/Memory.h's, shared with the estimate rematerialization
// plans with; the result is exactly what the code uses.
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Log.h"
#include "gradc/loops/Memory.h"
#include "gradc/lower/Passes.h"

namespace gradc {

void plan_memory(LoweredFunction &fn) {
  fn.workspace_bytes = plan_arena(fn);
  if (log_enabled(LogLevel::Info)) {
    log(LogLevel::Info, "memory", "@" + fn.name + ": workspace " + std::to_string(fn.workspace_bytes) +
                                      " bytes for " + std::to_string(fn.arena.size()) + " arena buffers");
    for (const BufferPtr &b : fn.arena)
      log(LogLevel::Debug, "memory",
          "  " + b->name + ": " + std::to_string(b->bytes()) + " bytes at offset " + std::to_string(b->offset));
  }
}

} // namespace gradc
