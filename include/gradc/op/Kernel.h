//===- Kernel.h - what an operator's lowering sees and builds with --------===//
//
// Part of the op layer: an injective operator contributes an element
// expression (ElementCtx); any other operator emits a loop nest (KernelCtx).
// Arguments of a kernel that are themselves injective calls (fused producers)
// are computed inline, element by element, through `in(...)`. The helpers
// below build index arithmetic and loop nests for both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"
#include "gradc/loops/LoopIR.h"
#include "gradc/loops/Target.h"
#include "gradc/op/Registry.h"

#include <functional>

namespace gradc {

using Index = std::vector<LExprPtr>;
/// The value of input `arg` of a call at element `idx`. Inputs are the
/// call's arguments with each tuple-typed argument flattened into its fields
/// (input_leaves): concatenate((%a, %b, %c), axis) reads inputs 0, 1 and 2;
/// for a call without tuple arguments, input i is argument i.
using InputFn = std::function<LExprPtr(size_t arg, const Index &idx)>;

/// The tensor leaves of `type`, depth first (a tensor is its own one leaf).
std::vector<Type> leaf_types(const Type &type);
/// The tensor types of a call's inputs (its arguments, tuples flattened).
std::vector<Type> input_leaves(const Expr &call);

struct ElementCtx {
  const Expr &call;
  const Index &index; // the output element being computed
  InputFn input;

  LExprPtr in(size_t arg, const Index &idx) const { return input(arg, idx); }
  /// Tensor argument `arg` at row-major element `flat`: one load at `flat`
  /// when the argument is in memory (no index split into axes and joined
  /// again: a reshape read by a matrix product's packing), else the fused
  /// producer at the unravelled index.
  LExprPtr in_flat(size_t arg, const LExprPtr &flat) const;
  /// Argument `arg` at the output index under numpy broadcasting.
  LExprPtr in(size_t arg) const;
  const Type &type() const { return call.type; }
  const Type &arg_type(size_t i) const { return call.args[i]->type; }
  const Attrs &attrs() const { return call.attrs; }
  template <class T> T attrs_as() const { return call_attrs<T>(call); }
};

struct KernelCtx {
  const Expr &call;
  std::vector<BufferPtr> outputs; // one per leaf of the call's result
  InputFn input;
  const Target &target; // what a strategy with a hand schedule reads (vector lanes, ...)
  /// The function's status buffer (LoweredFunction::status), created on first use.
  std::function<BufferPtr()> status_buffer;

  LExprPtr in(size_t arg, const Index &idx) const { return input(arg, idx); }
  /// Argument `arg`, an unfused operand (a buffer or a constant), at flat
  /// row-major element `flat`: for a kernel that computes flat offsets
  /// (a convolution's weight rows) without splitting them into indices.
  LExprPtr in_flat(size_t arg, const LExprPtr &flat) const;
  const BufferPtr &out(size_t i = 0) const { return outputs[i]; }
  const Type &arg_type(size_t i) const { return call.args[i]->type; }
  const Attrs &attrs() const { return call.attrs; }
  template <class T> T attrs_as() const { return call_attrs<T>(call); }
  /// `if (bad) status = {code, value, position, limit}`: the entry point then
  /// returns `code` (a nonzero ABI status, codegen/Codegen.h) instead of 0.
  /// Values are int64; the last report of a call wins.
  StmtPtr report_if(const LExprPtr &bad, int64_t code, const LExprPtr &value, const LExprPtr &position,
                    int64_t limit);
  /// A fresh scalar (or small array) Local buffer.
  BufferPtr local(const std::string &name, DType dtype, int64_t size = 1);
  /// Scratch memory of this kernel alone (a matrix product's packed rows and
  /// partial sums): an Arena buffer in the workspace, live only while the
  /// kernel runs, visible to every thread of its parallel loops (a Local is
  /// one thread's stack).
  std::function<BufferPtr(const std::string &name, DType dtype, int64_t size)> scratch;
  /// For an operator that fuses_epilogue: the value to store at output element
  /// `idx` (the index in the call's own shape) given the call's own value
  /// there; empty when no consumer is fused. The result has out()'s dtype.
  std::function<LExprPtr(const Index &idx, const LExprPtr &value)> epilogue;
  /// ... or, where the consumer is pointwise (OpDef::pointwise: an
  /// optimizer's update of the parameter the product is the gradient of),
  /// the stores of its results at element `idx`, flat `at` in each (they
  /// all have the call's shape).
  std::function<StmtPtr(const Index &idx, const LExprPtr &at, const LExprPtr &value)> epilogue_stores;
  /// Whether out() may hold partial sums before the last block of a sum
  /// (Gemm::store_raw). Not where the epilogue writes several results, nor
  /// where out() becomes a parameter updated in place: its old values are
  /// read until each element's final store.
  bool partials_in_output = true;
  /// Set by a kernel whose body is a sequence of independent loop nests (a
  /// concatenation's parts): each becomes a kernel of its own, so that the
  /// parts of every concatenation of one layout share a template
  /// (loops/Templates.h) whatever the number of parts.
  bool separate_parts = false;

  bool has_epilogue() const { return epilogue || epilogue_stores; }
  /// Whether a sum accumulated in `acc` may keep its partial sums in out().
  bool output_holds_partials(DType acc) const { return partials_in_output && out()->dtype == acc; }
  /// `value` (of the call's dtype) through the epilogue, if any.
  LExprPtr finish(const Index &idx, const LExprPtr &value) const { return epilogue ? epilogue(idx, value) : value; }
  /// Stores the call's `value` at output element `idx`, flat `at` in out():
  /// through the epilogue, if any. Every kernel of an operator that
  /// fuses_epilogue stores its final values through this.
  StmtPtr put(const Index &idx, const LExprPtr &at, const LExprPtr &value) const {
    return epilogue_stores ? epilogue_stores(idx, at, value) : store(out(), at, finish(idx, value));
  }
  LVarPtr var(const std::string &name);
};

/// What an operator that lowers to a time loop (OpDef::lower_loop: scan)
/// builds with. The function lowering implements it with its own machinery,
/// so the operators of a body lower exactly as they do anywhere else.
class LoopLowerCtx {
public:
  LoopLowerCtx(const Expr &call, std::vector<BufferPtr> outputs) : call(call), outputs(std::move(outputs)) {}
  virtual ~LoopLowerCtx() = default;
  const Expr &call;
  std::vector<BufferPtr> outputs; // one per leaf of the call's result

  /// The buffers of argument `arg`, one per leaf (a constant is materialized).
  virtual std::vector<BufferPtr> input(size_t arg) = 0;
  /// A new workspace buffer of this call (`name` is a hint).
  virtual BufferPtr buffer(const std::string &name, const Type &type) = 0;
  virtual void kernel(const std::string &name, StmtPtr body) = 0;
  /// Lowers `fn`'s bindings as kernels, parameter i reading the buffers
  /// `params[i]` (one per leaf of its type) and captured Vars their own;
  /// returns the buffers of its result, one per leaf (a parameter's or a
  /// captured value's own buffer when the body returns it unchanged). With
  /// `offsets`, a leaf whose offset is not null is a view: the body reads
  /// it in place, element e at offsets[i][l] + e of the buffer (a step of a
  /// stacked buffer), and a result that is one is copied out.
  virtual std::vector<BufferPtr> body(const Function &fn, const std::vector<std::vector<BufferPtr>> &params,
                                      const std::vector<std::vector<LExprPtr>> &offsets = {}) = 0;
  /// The number of kernels emitted so far: where a time loop starts.
  virtual size_t next_kernel() const = 0;
  /// Kernels [first, next_kernel()) run `extent` times (loops/LoopIR.h: TimeLoop).
  virtual void time_loop(size_t first, int64_t extent) = 0;
  /// ... or trips[i] times the i-th time one run of the operator enters the
  /// loop (TimeLoop::trips: a loop around the operator runs the table again).
  virtual void time_loop(size_t first, std::vector<int64_t> trips) = 0;
  /// Makes kernels [first, next_kernel()) write (and read) `to` at element
  /// `offset` (null: 0) wherever they write `from`, a buffer that only they
  /// touch (a body's result, made by body()), so that no copy is needed; the
  /// caller sees to it that nothing they read lies there. Returns false, and
  /// changes nothing, for any other buffer: the caller then copies.
  virtual bool write_into(size_t first, const BufferPtr &from, const BufferPtr &to, const LExprPtr &offset) = 0;
};

/// Shorthands for the arithmetic kernels build, index or value alike.
inline LExprPtr add(LExprPtr a, LExprPtr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
inline LExprPtr sub(LExprPtr a, LExprPtr b) { return binary(BinaryOp::Sub, std::move(a), std::move(b)); }
inline LExprPtr mul(LExprPtr a, LExprPtr b) { return binary(BinaryOp::Mul, std::move(a), std::move(b)); }
inline LExprPtr both(LExprPtr a, LExprPtr b) { return binary(BinaryOp::And, std::move(a), std::move(b)); }
inline LExprPtr imm(int64_t v) { return int_imm(v); } // an Int64 index constant

/// A constant of any dtype (float_imm or int_imm); integers saturate at the
/// dtype's limits (the dtype table's int_min/int_max), NaN becomes 0.
LExprPtr constant_of(double value, DType dtype);
/// The smallest / largest value of `dtype` (-inf / +inf for floats, the
/// integer limits, False / True for bool): the identity of max / min.
LExprPtr lowest_of(DType dtype);
LExprPtr highest_of(DType dtype);

/// The sum of `count` terms, term(r) for r in [0, count), in a fixed order
/// that depends only on `count` (so a recomputed sum is bitwise identical):
/// Neumaier's step: s[slot] + x into s[slot], the rounding error of that
/// addition into c[slot]. Integer and bool sums are exact: no carry.
StmtPtr neumaier(const BufferPtr &s, const BufferPtr &c, const LExprPtr &slot, const LExprPtr &x);
/// s[slot] plus its carry; a non-finite sum is the plain one.
LExprPtr neumaier_total(const BufferPtr &s, const BufferPtr &c, const LExprPtr &slot);

/// kSumLanes interleaved compensated (Neumaier) accumulators in dtype `acc`,
/// a vectorized loop over the lanes, combined pairwise (lane i with lane
/// i + 8, then i + 4, ...; each step a vector operation). Accurate to a
/// few ulps at any length, where one sequential accumulator loses everything
/// past 2^24 float32 terms; inf and NaN propagate as in a plain sum. `then`
/// receives the total (of dtype `acc`) and emits what uses it; `also`, if
/// given, emits a statement beside each term's addition, given the term (in
/// dtype `acc`): softmax writes each exp in the pass that sums it. With
/// `group` > 1, each lane adds `group` consecutive terms plainly before one
/// compensated step: for terms of one sign (softmax's exponentials) the
/// error stays within a few ulps of the total, at a fraction of the cost
/// (the compensation's dependent chain bound softmax rows: AVX2 code 4.7 ->
/// 3.4 ms for 4096 x 1024 with group 2; 4 was no faster and compiled each
/// softmax kernel 20% slower); for terms of mixed signs, within a few ulps
/// of the sum of their magnitudes (sum, mean: op/reduce.cpp's kSumGroup).
constexpr int64_t kSumLanes = 16; // one AVX-512 vector of float32, two of AVX2
using TermFn = std::function<LExprPtr(const LExprPtr &r)>;
/// Term first + lane of a block of kSumLanes terms starting at `first` (a
/// multiple of kSumLanes): a caller whose terms lie contiguously within each
/// block (a reduction whose innermost reduced axis is a multiple of the
/// lanes long) splits the index per block, not per term, so the lanes load
/// one vector.
using LaneBlockTermFn = std::function<LExprPtr(const LExprPtr &first, const LExprPtr &lane)>;
StmtPtr compensated_sum(KernelCtx &k, int64_t count, DType acc, const TermFn &term,
                        const std::function<StmtPtr(const LExprPtr &total)> &then,
                        const std::function<StmtPtr(const LExprPtr &r, const LExprPtr &value)> &also = nullptr,
                        int64_t group = 1, const LaneBlockTermFn &block_term = nullptr);
/// Several sums of `count` terms each in one loop, each as compensated_sum's
/// (the same order, the same bits): a block's terms of every sum side by
/// side, so that what their terms share (a batch norm's gradient's Σ g and
/// Σ g·(x - mean) both read g) is read once. `then` receives the totals in
/// order; `also` only with one sum.
///
/// With `row` > 0, the terms are count / row rows of `row` terms each (row
/// at least kSumLanes): term j of row q is row_term(q, j), each row read in
/// whole blocks of lanes (j = b·kSumLanes + lane: contiguous loads where the
/// row is) and its last row % kSumLanes terms one at a time into lane 0,
/// rather than padded blocks whose clamped indices gather (a batch norm's
/// sums over 14 x 14 = 196 pixels a row).
using RowTermFn = std::function<LExprPtr(const LExprPtr &q, const LExprPtr &j)>;
struct SumTerms {
  TermFn term;
  LaneBlockTermFn block_term; // may be null
  RowTermFn row_term;         // with rows
};
StmtPtr compensated_sum(KernelCtx &k, int64_t count, DType acc, const std::vector<SumTerms> &sums,
                        const std::function<StmtPtr(const std::vector<LExprPtr> &totals)> &then,
                        const std::function<StmtPtr(const LExprPtr &r, const LExprPtr &value)> &also = nullptr,
                        int64_t group = 1, int64_t row = 0);

/// The maximum of `count` terms (of dtype `acc`; -inf, or the dtype's lowest,
/// for none) in kSumLanes interleaved lanes, a vectorized loop, combined
/// pairwise: the maximum does not depend on the order, and NaN propagates.
StmtPtr lane_max(KernelCtx &k, int64_t count, DType acc, const std::function<LExprPtr(const LExprPtr &r)> &term,
                 const std::function<StmtPtr(const LExprPtr &max)> &then);

/// Reductions side by side, one per vector lane: where the rows are short
/// (a sum of 10 classes) or the lanes read contiguously (a sum over the
/// batch, along its columns), `width` independent reductions of `count`
/// terms each, term(l, r) for lane l, each summed in order r = 0, 1, ... with
/// its own compensation: a fixed order that depends only on the shape.
/// over_lane_blocks splits `count` outputs into blocks of `block` (a
/// multiple of kSumLanes; the last may be narrower): body(first output, width).
StmtPtr over_lane_blocks(KernelCtx &k, int64_t count,
                         const std::function<StmtPtr(const LExprPtr &first, int64_t width)> &body,
                         int64_t block = kSumLanes);
using LaneTermFn = std::function<LExprPtr(const LExprPtr &l, const LExprPtr &r)>;
/// As compensated_sum, per lane: then(l, total of lane l), also(l, r, term).
StmtPtr compensated_sums(KernelCtx &k, int64_t width, int64_t count, DType acc, const LaneTermFn &term,
                         const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &total)> &then,
                         const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &r, const LExprPtr &value)> &also =
                             nullptr);
/// Several such sums in one loop over the terms, each lane's terms of every
/// sum side by side: then(l, totals of lane l, in order).
StmtPtr compensated_sums(KernelCtx &k, int64_t width, int64_t count, DType acc, const std::vector<LaneTermFn> &terms,
                         const std::function<StmtPtr(const LExprPtr &l, const std::vector<LExprPtr> &totals)> &then);
/// As lane_max, per lane: then(l, maximum of lane l).
StmtPtr lanes_max(KernelCtx &k, int64_t width, int64_t count, DType acc, const LaneTermFn &term,
                  const std::function<StmtPtr(const LExprPtr &l, const LExprPtr &max)> &then);
/// Whether index `i` lies in [lo, hi) (a Bool).
LExprPtr in_range(const LExprPtr &i, int64_t lo, int64_t hi);
/// `i` clamped into [0, n): what a guarded load reads where a select then
/// takes the padding value, so that no load is out of bounds (and the loop
/// verifier can bound every index).
LExprPtr clamp_index(const LExprPtr &i, int64_t n);
/// The outputs o in [0, out) whose reads o·s + first through o·s + last
/// (first <= last, s > 0) all lie in [0, n): a run [begin, end), begin ==
/// end where none does; what the rows of a window or a tap split into
/// guarded ends and an unguarded middle.
std::pair<int64_t, int64_t> outputs_reading_inside(int64_t s, int64_t first, int64_t last, int64_t n, int64_t out);

/// Unravels a flat element index into the indices of `shape`.
Index unravel_index(const LExprPtr &flat, const Shape &shape);

/// The row-major flat index of `idx` in a dense tensor of `shape`.
LExprPtr flat_index(const Shape &shape, const Index &idx);
/// The index into an input of `in_shape` broadcast to an output index.
Index broadcast_index(const Shape &in_shape, const Shape &out_shape, const Index &idx);
/// `for` loops over every element of `shape`, each of kind `axis` (Spatial
/// for a data-parallel nest, Reduce for a reduction's); `body` receives the
/// indices.
StmtPtr loop_nest(const Shape &shape, const std::function<StmtPtr(const Index &)> &body,
                  ForKind axis = ForKind::Spatial, const std::string &prefix = "i");
/// The kernel of a pointwise operator (OpDef::pointwise): its stores at
/// every element of its first argument's shape.
StmtPtr pointwise_kernel(KernelCtx &k);

} // namespace gradc
