//===- Scan.h - the scan machinery of the loop IR (SPEC §7) ---------------===//
//
// A scan is a serial time loop (ForKind::ScanTime) with the state elements as
// a data-parallel (Spatial) loop nest inside it. Every recurrence (only cumsum
// so far) lowers through lower_scan, so all share one time-loop shape that
// later passes (GPU binding, the CPU schedule) handle in one place.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Kernel.h"

namespace gradc {

struct ScanLoop {
  int64_t steps = 0; // T: result[0] = init, result[t] = update(result[t-1], t)
  Shape state;       // the shape of one time step
  /// Flat index into the output buffer of step `t`, state element `s`.
  std::function<LExprPtr(const LExprPtr &t, const Index &s)> out_index;
  std::function<LExprPtr(const Index &s)> init;
  /// Step t >= 1; `prev(s')` reads element s' of step t-1.
  std::function<LExprPtr(const LExprPtr &t, const Index &s, const std::function<LExprPtr(const Index &)> &prev)> update;
};

StmtPtr lower_scan(const BufferPtr &out, const ScanLoop &scan);

} // namespace gradc
