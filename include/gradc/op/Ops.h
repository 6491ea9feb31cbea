//===- Ops.h - typed handles of the operators -----------------------------===//
//
// Passes and gradient rules name operators through these handles
// (`b.call(ops::add, {x, y})`, `{Tok::Plus, 2, ops::add}` in the parser's
// operator table), never through strings: a misspelt handle does not compile,
// and a handle whose operator is not registered fails the registry's unit
// test, as does an operator without a handle. A handle is resolved against
// the global registry on first use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <atomic>
#include <vector>

namespace gradc {

struct OpDef;

class OpRef {
public:
  explicit constexpr OpRef(const char *name) : name_(name) {}
  OpRef(const OpRef &) = delete;
  const OpDef *get() const;
  operator const OpDef *() const { return get(); }
  const char *name() const { return name_; }

private:
  const char *name_;
  mutable std::atomic<const OpDef *> def_{nullptr};
};

namespace ops {
#define GRADC_OP(handle, name) inline const OpRef handle{name};
#include "gradc/op/Ops.def"
#undef GRADC_OP
} // namespace ops

/// Every handle above, for the registry test.
std::vector<const OpRef *> all_op_refs();

} // namespace gradc
