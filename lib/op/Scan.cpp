//===- Scan.cpp - lower a scan to a serial time loop ----------------------===//
#include "gradc/op/Scan.h"

namespace gradc {

StmtPtr lower_scan(const ScanLoop &scan) {
  if (scan.steps <= 0)
    return seq({});
  StmtPtr first = loop_nest(scan.state, scan.first);
  if (scan.steps <= 1)
    return first;
  auto t_var = std::make_shared<LVar>(LVar{"time"});
  LExprPtr t = binary(BinaryOp::Add, var_ref(t_var), int_imm(1)); // steps 1 .. T-1
  StmtPtr step = loop_nest(scan.state, [&](const Index &s) { return scan.step(t, s); });
  return seq({first, for_loop(t_var, scan.steps - 1, ForKind::ScanTime, step)});
}

} // namespace gradc
