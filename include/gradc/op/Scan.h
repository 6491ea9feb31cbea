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
  int64_t steps = 0; // T
  Shape state;       // the shape of one time step
  /// Writes step 0 of state element `s`.
  std::function<StmtPtr(const Index &s)> first;
  /// Writes step `t` >= 1 of state element `s`; step t-1 is written.
  std::function<StmtPtr(const LExprPtr &t, const Index &s)> step;
};

/// for s: first(s); for t in [1, T) (ScanTime): for s: step(t, s). Nothing
/// at all for T = 0: no step, not even the first, may be written.
StmtPtr lower_scan(const ScanLoop &scan);

} // namespace gradc
