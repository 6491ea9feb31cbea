//===- Scan.cpp - lower a scan to a serial time loop ----------------------===//
#include "gradc/op/Scan.h"

namespace gradc {

StmtPtr lower_scan(const BufferPtr &out, const ScanLoop &scan) {
  if (scan.steps <= 0)
    return seq({}); // an empty time axis: no step, not even the first, may be written
  StmtPtr first =
      loop_nest(scan.state, [&](const Index &s) { return store(out, scan.out_index(int_imm(0), s), scan.init(s)); });
  if (scan.steps <= 1)
    return first;
  auto t_var = std::make_shared<LVar>(LVar{"time"});
  LExprPtr t = binary(BinaryOp::Add, var_ref(t_var), int_imm(1)); // steps 1 .. T-1
  LExprPtr t_prev = var_ref(t_var);
  auto prev = [&](const Index &s) { return load(out, scan.out_index(t_prev, s)); };
  StmtPtr step =
      loop_nest(scan.state, [&](const Index &s) { return store(out, scan.out_index(t, s), scan.update(t, s, prev)); });
  return seq({first, for_loop(t_var, scan.steps - 1, ForKind::ScanTime, step)});
}

} // namespace gradc
