//===- DropMarkers.cpp - checkpoint markers are consumed by remat ---------===//
//
// The first pass of the `fused` stage. Rematerialization has turned every
// checkpoint segment into explicit `_remat` recomputations, so the markers
// (identities at run time) have nothing left to say: each use of a marker's
// value becomes a use of its input. Later passes and the `fused` dump see no
// markers, which dead-code elimination could otherwise leave unpaired (a
// start whose end nobody reads), so that the dump would not read back.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"

namespace gradc {
namespace {

class MarkerDropper : public ExprMutator {
protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    const Expr &v = *b.value;
    if (v.kind == ExprKind::Call && v.op->checkpoint != CheckpointMarker::None) {
      remap(b.var, mutate(v.args[0]));
      return;
    }
    ExprMutator::mutate_binding(b, out);
  }
};

} // namespace

FunctionPtr drop_checkpoint_markers(const Function &fn) { return MarkerDropper().mutate_function(fn); }

} // namespace gradc
