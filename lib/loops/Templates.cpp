//===- Templates.cpp - kernels that share one function --------------------===//
//
// Each kernel is written as a flat sequence of numbers (its key) in which
// the constants that may differ between the kernels of a template are
// placeholders, their values listed apart in the order the placeholders
// come. Kernels with equal keys form a template; the placeholders whose
// values differ within it become the template's arguments.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Templates.h"

#include "gradc/loops/Lanes.h"
#include "gradc/support/Diagnostics.h"

#include <cstring>
#include <map>
#include <set>
#include <unordered_set>

namespace gradc {
namespace {

/// What a placeholder stands for in the kernel the key was made from.
struct Slot {
  enum Kind { Constant, Extent, Grain } kind;
  const void *node; // the LExpr (Constant) or the For statement
};

/// The key of one kernel, in prefix order: every node's kind and fields;
/// buffers numbered by their position in Kernel::buffers and then in
/// allocation order, loop variables in binding order. Names never enter it,
/// nor does the dump printer's formatting.
class KeyWriter {
public:
  KernelKey key;               // placeholders as kPlaceholder or kRepeat + slot
  std::vector<int64_t> values; // per slot
  std::vector<Slot> slots;

  explicit KeyWriter(const Kernel &kernel) {
    find_pinning_loops(*kernel.body);
    find_pinned(*kernel.body);
    for (const BufferPtr &b : kernel.buffers) {
      declare(*b, false);
      key.push_back(shares_bytes(kernel, *b)); // not noalias (codegen)
    }
    for (int d = 0; d < kMaxLaunchDims; ++d)
      key.insert(key.end(), {kernel.grid[d], kernel.block[d]});
    stmt(*kernel.body);
  }

private:
  static constexpr int64_t kPlaceholder = -0x7eadbeef, kRepeat = -0x7eadbeee;

  std::unordered_map<const Buffer *, int64_t> buffers_;
  std::unordered_map<const LVar *, int64_t> vars_;
  std::unordered_set<const LVar *> pinning_; // variables of Vectorized loops and transposing copies' rows
  std::unordered_set<const LVar *> copy_lanes_; // transposing copies' lanes
  std::unordered_map<const Stmt *, const LVar *> transposed_; // a transposing copy's store, its lane
  std::unordered_map<const LExpr *, bool> reads_pinning_;
  std::unordered_set<const LExpr *> pinned_; // constants that stay in the key
  std::unordered_map<const void *, int64_t> slot_of_;
  std::vector<const LVar *> lanes_; // the pinning loops around the statement being written

  void declare(const Buffer &b, bool local) {
    buffers_.emplace(&b, int64_t(buffers_.size()));
    // A kernel buffer's size never enters the code; a local's is its alloca.
    key.insert(key.end(), {int64_t(b.dtype), local ? b.numel() : -1});
  }
  int64_t buffer(const Buffer &b) const {
    auto it = buffers_.find(&b);
    GRADC_CHECK(it != buffers_.end(), "codegen", "kernel buffer " + b.name + " is neither listed nor allocated");
    return it->second;
  }
  int64_t var(const LVar &v) const {
    auto it = vars_.find(&v);
    GRADC_CHECK(it != vars_.end(), "codegen", "loop variable " + v.name + " used out of scope");
    return it->second;
  }

  /// A value the kernels of a template may differ in: a placeholder, or a
  /// reference to the earlier placeholder of the same node (a shared one).
  void placeholder(Slot::Kind kind, const void *node, int64_t value) {
    auto [it, fresh] = slot_of_.try_emplace(node, int64_t(slots.size()));
    if (!fresh) {
      key.insert(key.end(), {kRepeat, it->second});
      return;
    }
    key.push_back(kPlaceholder);
    slots.push_back({kind, node});
    values.push_back(value);
  }

  /// Whether a loop's extent may differ: a Serial or Parallel loop's, and a
  /// Vectorized loop's too long to be emitted lane-wise (Lanes.h; LLVM's loop
  /// vectorizer takes it, with any trip count).
  static bool may_vary(const Stmt &s) {
    return s.for_kind == ForKind::Serial || s.for_kind == ForKind::Parallel ||
           (s.for_kind == ForKind::Vectorized && s.extent > kMaxLanes);
  }

  void find_pinning_loops(const Stmt &s) {
    switch (s.kind) {
    case StmtKind::For:
      if (transposing_copy(s)) {
        // Codegen loads the rows along the unrolled index (its stride must
        // stay 1) and stores whole vectors along the lane (in the store's
        // index, the lane's stride must stay 1); where the rows start in the
        // source, the lane's stride there, may differ.
        pinning_.insert(s.var.get());
        copy_lanes_.insert(s.body->var.get());
        transposed_.emplace(s.body->body.get(), s.body->var.get());
        return;
      }
      if (s.for_kind == ForKind::Vectorized)
        pinning_.insert(s.var.get());
      return find_pinning_loops(*s.body);
    case StmtKind::Seq:
      for (const StmtPtr &c : s.seq)
        find_pinning_loops(*c);
      return;
    case StmtKind::If:
      find_pinning_loops(*s.body);
      if (s.else_body)
        find_pinning_loops(*s.else_body);
      return;
    case StmtKind::Alloc:
      return find_pinning_loops(*s.body);
    case StmtKind::Store:
    case StmtKind::Barrier:
    case StmtKind::Mma:
      return;
    }
  }

  bool reads_pinning(const LExprPtr &e) {
    auto it = reads_pinning_.find(e.get());
    if (it != reads_pinning_.end())
      return it->second;
    bool r = e->kind == LExprKind::Var && pinning_.count(e->var.get());
    for (const LExprPtr &o : e->operands)
      r = reads_pinning(o) || r;
    reads_pinning_[e.get()] = r;
    return r;
  }

  /// The constants that must stay: a small factor of an index product that
  /// reads a vector lane or the row index of a transposing copy (a stride of
  /// at most kMaxLoadStride, which decides how codegen accesses memory:
  /// Lanes.h), an integer divisor (a division by a constant is a multiply).
  /// A node shared between such a place and another stays everywhere. A
  /// larger stride may differ: codegen treats every stride above
  /// kMaxLoadStride alike, and the key holds each access's stride class
  /// (stride_classes), so that kernels whose accesses codegen would treat
  /// differently never share a template (the weight gradients of a DenseNet
  /// block's 1x1 convolutions store their columns C elements apart).
  void find_pinned(const Stmt &s) {
    switch (s.kind) {
    case StmtKind::For:
      return find_pinned(*s.body);
    case StmtKind::Store:
      if (auto t = transposed_.find(&s); t != transposed_.end())
        pin_factors(s.index, t->second);
      pin(s.index, Pin::No);
      return pin(s.value, Pin::No);
    case StmtKind::Seq:
      for (const StmtPtr &c : s.seq)
        find_pinned(*c);
      return;
    case StmtKind::If:
      pin(s.value, Pin::No);
      find_pinned(*s.body);
      if (s.else_body)
        find_pinned(*s.else_body);
      return;
    case StmtKind::Alloc:
      return find_pinned(*s.body);
    case StmtKind::Barrier:
      return;
    case StmtKind::Mma: // a GPU warp's: the same in every kernel of a template
      pin(s.index, Pin::Always);
      for (const LExprPtr &e : s.inputs)
        pin(e, Pin::Always);
      return;
    }
  }
  enum class Pin { No, Stride, Always };
  static bool small_stride(int64_t v) { return v >= -kMaxLoadStride && v <= kMaxLoadStride; }

  /// Pins the small constant factors of the index products in `e` that read `var`.
  void pin_factors(const LExprPtr &e, const LVar *var) {
    if (e->kind == LExprKind::Binary && e->bop == BinaryOp::Mul && e->dtype == DType::Int64 && uses_var(e, var))
      for (const LExprPtr &o : e->operands)
        if (o->kind == LExprKind::IntImm && small_stride(o->ivalue))
          pinned_.insert(o.get());
    for (const LExprPtr &o : e->operands)
      pin_factors(o, var);
  }
  void pin(const LExprPtr &e, Pin how) {
    if (e->kind == LExprKind::IntImm || e->kind == LExprKind::FloatImm) {
      if (how == Pin::Always || (how == Pin::Stride && e->kind == LExprKind::IntImm && small_stride(e->ivalue)))
        pinned_.insert(e.get());
      return;
    }
    bool stride =
        e->kind == LExprKind::Binary && e->bop == BinaryOp::Mul && e->dtype == DType::Int64 && reads_pinning(e);
    bool int_division = e->kind == LExprKind::Binary && !is_float(e->dtype) &&
                        (e->bop == BinaryOp::Div || e->bop == BinaryOp::FloorDiv || e->bop == BinaryOp::FloorMod);
    for (size_t i = 0; i < e->operands.size(); ++i)
      pin(e->operands[i], int_division && i == 1 ? Pin::Always : stride ? Pin::Stride : Pin::No);
  }

  /// What codegen's analyses see of an access's step along each enclosing
  /// vector lane or transposing copy's row (Lanes.h): the step itself where
  /// it is small, else only whether it is large, negative or not affine.
  void stride_classes(const LExprPtr &index) {
    static constexpr int64_t kLarge = -0x7eadbef0, kNegativeLarge = -0x7eadbef1, kNotAffine = -0x7eadbef2;
    for (const LVar *v : lanes_) {
      std::optional<int64_t> step = index_stride(index, v);
      key.push_back(!step ? kNotAffine : small_stride(*step) ? *step : *step > 0 ? kLarge : kNegativeLarge);
    }
  }

  void stmt(const Stmt &s) {
    switch (s.kind) {
    case StmtKind::For:
      vars_.emplace(s.var.get(), int64_t(vars_.size()));
      key.insert(key.end(), {int64_t(StmtKind::For), int64_t(s.for_kind)});
      if (may_vary(s))
        placeholder(Slot::Extent, &s, s.extent);
      else
        key.push_back(s.extent);
      if (s.for_kind == ForKind::Parallel)
        placeholder(Slot::Grain, &s, parallel_grain(s));
      if (pinning_.count(s.var.get()) || copy_lanes_.count(s.var.get())) {
        lanes_.push_back(s.var.get());
        stmt(*s.body);
        lanes_.pop_back();
        return;
      }
      return stmt(*s.body);
    case StmtKind::Store:
      key.insert(key.end(), {int64_t(StmtKind::Store), buffer(*s.buffer)});
      stride_classes(s.index);
      expr(s.index);
      return expr(s.value);
    case StmtKind::Seq:
      key.insert(key.end(), {int64_t(StmtKind::Seq), int64_t(s.seq.size())});
      for (const StmtPtr &c : s.seq)
        stmt(*c);
      return;
    case StmtKind::If:
      key.insert(key.end(), {int64_t(StmtKind::If), s.else_body ? 1 : 0});
      expr(s.value);
      stmt(*s.body);
      if (s.else_body)
        stmt(*s.else_body);
      return;
    case StmtKind::Alloc:
      key.push_back(int64_t(StmtKind::Alloc));
      declare(*s.buffer, true);
      return stmt(*s.body);
    case StmtKind::Barrier:
      key.push_back(int64_t(StmtKind::Barrier));
      return;
    case StmtKind::Mma:
      key.insert(key.end(), {int64_t(StmtKind::Mma), buffer(*s.buffer)});
      expr(s.index);
      for (const LExprPtr &e : s.inputs)
        expr(e);
      return;
    }
  }

  void expr(const LExprPtr &e) {
    key.insert(key.end(), {int64_t(e->kind), int64_t(e->dtype), int64_t(e->operands.size())});
    bool pinned = pinned_.count(e.get()) > 0;
    switch (e->kind) {
    case LExprKind::IntImm:
      if (!pinned && e->dtype == DType::Int64)
        return placeholder(Slot::Constant, e.get(), e->ivalue);
      return key.push_back(e->ivalue);
    case LExprKind::FloatImm: {
      int64_t bits;
      static_assert(sizeof bits == sizeof e->fvalue);
      std::memcpy(&bits, &e->fvalue, sizeof bits);
      if (!pinned && (e->dtype == DType::Float32 || e->dtype == DType::Float64))
        return placeholder(Slot::Constant, e.get(), bits);
      return key.push_back(bits);
    }
    case LExprKind::Var:
      return key.push_back(var(*e->var));
    case LExprKind::Load:
      key.push_back(buffer(*e->buffer));
      stride_classes(e->operands[0]);
      break;
    case LExprKind::Unary:
      key.push_back(int64_t(e->uop));
      break;
    case LExprKind::Binary:
      key.push_back(int64_t(e->bop));
      break;
    case LExprKind::Compare:
      key.push_back(int64_t(e->cop));
      break;
    case LExprKind::Select:
    case LExprKind::Cast:
    case LExprKind::MulAdd:
    case LExprKind::Shuffle:
      break;
    }
    for (const LExprPtr &o : e->operands)
      expr(o);
  }
};

} // namespace

KernelKey structural_key(const Kernel &kernel) {
  KeyWriter w(kernel);
  w.key.insert(w.key.end(), w.values.begin(), w.values.end());
  return w.key;
}

ModuleTemplates kernel_templates(const LoweredModule &module) {
  ModuleTemplates out;
  struct Group {
    size_t index;
    std::vector<Slot> slots; // of the first kernel
    std::vector<const std::vector<int64_t> *> members;
  };
  std::map<KernelKey, Group> groups;
  std::set<KernelKey> exact;
  // Every kernel's values, kept until the templates know their arguments.
  std::vector<std::vector<std::vector<int64_t>>> values(module.functions.size());
  std::vector<std::vector<Group *>> group_of(module.functions.size());
  for (size_t f = 0; f < module.functions.size(); ++f) {
    const LoweredFunction &fn = module.functions[f];
    values[f].reserve(fn.kernels.size());
    for (const Kernel &kernel : fn.kernels) {
      KeyWriter w(kernel);
      KernelKey full = w.key;
      full.insert(full.end(), w.values.begin(), w.values.end());
      out.identical += !exact.insert(std::move(full)).second;
      auto [it, fresh] = groups.try_emplace(std::move(w.key), Group{out.templates.size(), {}, {}});
      if (fresh) {
        it->second.slots = std::move(w.slots);
        out.templates.push_back({&kernel, {}});
      } else {
        ++out.shared;
      }
      values[f].push_back(std::move(w.values));
      group_of[f].push_back(&it->second);
    }
  }
  for (size_t f = 0; f < module.functions.size(); ++f)
    for (size_t k = 0; k < values[f].size(); ++k)
      group_of[f][k]->members.push_back(&values[f][k]);

  // A slot whose value differs within a template becomes an argument.
  std::vector<std::vector<int>> param_of(out.templates.size());
  for (auto &[key, g] : groups) {
    KernelParams &params = out.templates[g.index].params;
    std::vector<int> &param = param_of[g.index];
    param.assign(g.slots.size(), -1);
    const std::vector<int64_t> &first = *g.members.front();
    for (size_t s = 0; s < g.slots.size(); ++s) {
      bool varies = false;
      for (const std::vector<int64_t> *m : g.members)
        varies = varies || (*m)[s] != first[s];
      if (!varies)
        continue;
      param[s] = params.count++;
      const Slot &slot = g.slots[s];
      switch (slot.kind) {
      case Slot::Constant:
        params.constants[static_cast<const LExpr *>(slot.node)] = param[s];
        break;
      case Slot::Extent:
        params.extents[static_cast<const Stmt *>(slot.node)] = param[s];
        break;
      case Slot::Grain:
        params.grains[static_cast<const Stmt *>(slot.node)] = param[s];
        break;
      }
    }
  }
  out.use.resize(module.functions.size());
  out.args.resize(module.functions.size());
  for (size_t f = 0; f < module.functions.size(); ++f)
    for (size_t k = 0; k < values[f].size(); ++k) {
      size_t t = group_of[f][k]->index;
      out.use[f].push_back(t);
      KernelArgs &args = out.args[f].emplace_back(size_t(out.templates[t].params.count));
      const std::vector<int> &param = param_of[t];
      for (size_t s = 0; s < param.size(); ++s)
        if (param[s] >= 0)
          args[size_t(param[s])] = values[f][k][s];
    }
  return out;
}

} // namespace gradc
