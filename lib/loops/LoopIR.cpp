//===- LoopIR.cpp - loop IR constructors and the `loops` dump printer -----===//
#include "gradc/loops/LoopIR.h"
#include "gradc/loops/Functor.h"
#include "gradc/loops/Random.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <unordered_map>

namespace gradc {

const char *for_kind_name(ForKind kind) {
  switch (kind) {
  case ForKind::Spatial:
    return "spatial";
  case ForKind::Reduce:
    return "reduce";
  case ForKind::Serial:
    return "serial";
  case ForKind::Parallel:
    return "parallel";
  case ForKind::Vectorized:
    return "vectorized";
  case ForKind::Unrolled:
    return "unrolled";
  case ForKind::ScanTime:
    return "scan_time";
  case ForKind::BlockIdx:
    return "blockIdx"; // the dimension is the loop's (bound_dim)
  case ForKind::ThreadIdx:
    return "threadIdx";
  }
  return "?";
}

int bound_dim(const Stmt &loop) {
  int d = 0;
  for (const Stmt *s = loop.body.get(); s && s->kind == StmtKind::For && s->for_kind == loop.for_kind; s = s->body.get())
    ++d;
  return d;
}

const Stmt &innermost_bound(const Stmt &loop) {
  const Stmt *s = &loop;
  while (s->body && s->body->kind == StmtKind::For && s->body->for_kind == loop.for_kind)
    s = s->body.get();
  return *s;
}

Dim3 bound_extents(const Stmt &loop) {
  Dim3 d;
  for (const Stmt *s = &loop; s && s->kind == StmtKind::For && s->for_kind == loop.for_kind; s = s->body.get()) {
    int dim = bound_dim(*s);
    if (dim < kMaxLaunchDims)
      d[dim] = s->extent;
  }
  return d;
}

/// "8", or "(8, 4)" / "(8, 4, 2)" where y or z is more than 1.
static std::string launch_dims(const Dim3 &d) {
  if (d.flat())
    return std::to_string(d.x);
  std::string s = "(" + std::to_string(d.x) + ", " + std::to_string(d.y);
  return s + (d.z > 1 ? ", " + std::to_string(d.z) : "") + ")";
}

static std::shared_ptr<LExpr> node(LExprKind kind, DType dt) {
  auto e = std::make_shared<LExpr>();
  e->kind = kind;
  e->dtype = dt;
  return e;
}

LExprPtr int_imm(int64_t v, DType dt) {
  auto e = node(LExprKind::IntImm, dt);
  e->ivalue = v;
  return e;
}

LExprPtr float_imm(double v, DType dt) {
  GRADC_CHECK(is_float(dt), "loop IR", "float_imm of a non-float dtype");
  auto e = node(LExprKind::FloatImm, dt);
  e->fvalue = v;
  return e;
}

LExprPtr var_ref(const LVarPtr &v) {
  auto e = node(LExprKind::Var, DType::Int64);
  e->var = v;
  return e;
}

LExprPtr load(const BufferPtr &buf, LExprPtr index) {
  GRADC_CHECK(index->dtype == DType::Int64, "loop IR", "load index must be int64");
  auto e = node(LExprKind::Load, buf->dtype);
  e->buffer = buf;
  e->operands = {std::move(index)};
  return e;
}

LExprPtr unary(UnaryOp op, LExprPtr a) {
  auto e = node(LExprKind::Unary, a->dtype);
  e->uop = op;
  e->operands = {std::move(a)};
  return e;
}

/// Index arithmetic folds as it is built (x*0, x*1, x+0, constants), so
/// dumps and generated code do not carry `(0*6) + i`. Only int64, the index
/// type: floating-point expressions are kept exactly as written.
static LExprPtr fold_index(BinaryOp op, const LExprPtr &a, const LExprPtr &b) {
  if (a->dtype != DType::Int64)
    return nullptr;
  auto imm = [](const LExprPtr &e, int64_t v) { return e->kind == LExprKind::IntImm && e->ivalue == v; };
  if (a->kind == LExprKind::IntImm && b->kind == LExprKind::IntImm) {
    if (op == BinaryOp::Philox)
      return int_imm(philox_bits(a->ivalue, b->ivalue));
    if (op == BinaryOp::Add)
      return int_imm(a->ivalue + b->ivalue);
    if (op == BinaryOp::Mul)
      return int_imm(a->ivalue * b->ivalue);
    if (op == BinaryOp::Sub)
      return int_imm(a->ivalue - b->ivalue);
  }
  // (x + c1) ± c2 -> x + (c1 ± c2)
  if ((op == BinaryOp::Add || op == BinaryOp::Sub) && b->kind == LExprKind::IntImm && a->kind == LExprKind::Binary &&
      a->bop == BinaryOp::Add && a->operands[1]->kind == LExprKind::IntImm) {
    int64_t c = a->operands[1]->ivalue + (op == BinaryOp::Add ? b->ivalue : -b->ivalue);
    return binary(BinaryOp::Add, a->operands[0], int_imm(c));
  }
  if (op == BinaryOp::Mul && (imm(a, 0) || imm(b, 0)))
    return int_imm(0);
  if ((op == BinaryOp::Mul && imm(a, 1)) || (op == BinaryOp::Add && imm(a, 0)))
    return b;
  if ((op == BinaryOp::Mul && imm(b, 1)) || ((op == BinaryOp::Add || op == BinaryOp::Sub) && imm(b, 0)))
    return a;
  return nullptr;
}

LExprPtr binary(BinaryOp op, LExprPtr a, LExprPtr b) {
  GRADC_CHECK(a->dtype == b->dtype, "loop IR",
              std::string("binary operands of different dtypes: ") + dtype_name(a->dtype) + " and " +
                  dtype_name(b->dtype));
  if (LExprPtr folded = fold_index(op, a, b))
    return folded;
  auto e = node(LExprKind::Binary, a->dtype);
  e->bop = op;
  e->operands = {std::move(a), std::move(b)};
  return e;
}

LExprPtr compare(CompareOp op, LExprPtr a, LExprPtr b) {
  GRADC_CHECK(a->dtype == b->dtype, "loop IR", "compare operands of different dtypes");
  auto e = node(LExprKind::Compare, DType::Bool);
  e->cop = op;
  e->operands = {std::move(a), std::move(b)};
  return e;
}

LExprPtr select(LExprPtr c, LExprPtr a, LExprPtr b) {
  GRADC_CHECK(c->dtype == DType::Bool && a->dtype == b->dtype, "loop IR", "ill-typed select");
  auto e = node(LExprKind::Select, a->dtype);
  e->operands = {std::move(c), std::move(a), std::move(b)};
  return e;
}

LExprPtr mul_add(LExprPtr a, LExprPtr b, LExprPtr c) {
  GRADC_CHECK(is_float(a->dtype) && a->dtype == b->dtype && a->dtype == c->dtype, "loop IR", "ill-typed mul_add");
  auto e = node(LExprKind::MulAdd, a->dtype);
  e->operands = {std::move(a), std::move(b), std::move(c)};
  return e;
}

LExprPtr cast(DType dt, LExprPtr a) {
  if (a->dtype == dt)
    return a;
  auto e = node(LExprKind::Cast, dt);
  e->operands = {std::move(a)};
  return e;
}

LExprPtr shuffle(LExprPtr value, LExprPtr lane) {
  GRADC_CHECK(lane->dtype == DType::Int64, "loop IR", "a shuffle's lane must be Int64");
  auto e = node(LExprKind::Shuffle, value->dtype);
  e->operands = {std::move(value), std::move(lane)};
  return e;
}

static std::shared_ptr<Stmt> snode(StmtKind kind) {
  auto s = std::make_shared<Stmt>();
  s->kind = kind;
  return s;
}

StmtPtr for_loop(LVarPtr var, int64_t extent, ForKind kind, StmtPtr body) {
  auto s = snode(StmtKind::For);
  s->var = std::move(var);
  s->extent = extent;
  s->for_kind = kind;
  s->body = std::move(body);
  return s;
}

StmtPtr store(const BufferPtr &buf, LExprPtr index, LExprPtr value) {
  GRADC_CHECK(value->dtype == buf->dtype, "loop IR",
              "store of " + std::string(dtype_name(value->dtype)) + " into " + dtype_name(buf->dtype) + " buffer " +
                  buf->name);
  auto s = snode(StmtKind::Store);
  s->buffer = buf;
  s->index = std::move(index);
  s->value = std::move(value);
  return s;
}

StmtPtr seq(std::vector<StmtPtr> stmts) {
  if (stmts.size() == 1)
    return stmts[0];
  auto s = snode(StmtKind::Seq);
  s->seq = std::move(stmts);
  return s;
}

StmtPtr if_then(LExprPtr cond, StmtPtr then_body, StmtPtr else_body) {
  GRADC_CHECK(cond->dtype == DType::Bool, "loop IR", "if condition must be bool");
  auto s = snode(StmtKind::If);
  s->value = std::move(cond);
  s->body = std::move(then_body);
  s->else_body = std::move(else_body);
  return s;
}

StmtPtr alloc(const BufferPtr &local, StmtPtr body) {
  GRADC_CHECK(local->scope == BufferScope::Local || local->scope == BufferScope::Shared, "loop IR",
              "alloc of a buffer that is neither local nor shared");
  auto s = snode(StmtKind::Alloc);
  s->buffer = local;
  s->body = std::move(body);
  return s;
}

StmtPtr barrier() { return snode(StmtKind::Barrier); }

StmtPtr mma_tf32(const BufferPtr &d, LExprPtr index, std::vector<LExprPtr> inputs) {
  GRADC_CHECK(d->dtype == DType::Float32 && index->dtype == DType::Int64 && inputs.size() == kMmaInputs,
              "loop IR", "a tensor-core product takes ten float32 inputs into a float32 buffer");
  for (const LExprPtr &e : inputs)
    GRADC_CHECK(e->dtype == DType::Float32, "loop IR", "a tensor-core product's input is not float32");
  auto s = std::make_shared<Stmt>(*snode(StmtKind::Mma));
  s->buffer = d;
  s->index = std::move(index);
  s->inputs = std::move(inputs);
  return s;
}

bool same_place(const Buffer &a, const Buffer &b) {
  if (a.host || b.host)
    return (a.host ? a.host.get() : &a) == (b.host ? b.host.get() : &b);
  return a.scope == BufferScope::Arena && b.scope == BufferScope::Arena && a.offset >= 0 && a.offset == b.offset;
}

bool shares_bytes(const Kernel &k, const Buffer &b) {
  for (const auto &[buf, over] : k.overwrites)
    if ((buf.get() == &b || over.get() == &b) && same_place(*buf, *over))
      return true;
  return false;
}

std::unordered_map<const Buffer *, std::pair<size_t, size_t>> buffer_lifetimes(const LoweredFunction &fn) {
  std::unordered_map<const Buffer *, std::pair<size_t, size_t>> life;
  for (size_t k = 0; k < fn.kernels.size(); ++k)
    for (const BufferPtr &b : fn.kernels[k].buffers) {
      auto [it, fresh] = life.try_emplace(b.get(), k, k);
      it->second.second = k;
    }
  if (fn.status)
    life[fn.status.get()] = {0, fn.kernels.empty() ? 0 : fn.kernels.size() - 1};
  // Innermost loops first (nested loops are shorter), so that a buffer
  // stretched to an inner loop is stretched again to the loop around it.
  std::vector<const TimeLoop *> loops;
  for (const TimeLoop &l : fn.time_loops)
    loops.push_back(&l);
  std::stable_sort(loops.begin(), loops.end(),
                   [](const TimeLoop *a, const TimeLoop *b) { return a->last - a->first < b->last - b->first; });
  for (const TimeLoop *l : loops) {
    if (l->first >= l->last)
      continue;
    for (auto &[buffer, range] : life)
      if (range.first < l->last && range.second >= l->first)
        range = {std::min(range.first, l->first), std::max(range.second, l->last - 1)};
  }
  return life;
}

void walk_schedule(const LoweredFunction &fn, const std::function<void(const TimeLoop &)> &enter,
                   const std::function<void(size_t kernel)> &kernel,
                   const std::function<void(const TimeLoop &)> &leave) {
  // Opened in order of first kernel, the longer (outer) loop first.
  std::vector<const TimeLoop *> loops;
  for (const TimeLoop &l : fn.time_loops)
    loops.push_back(&l);
  std::stable_sort(loops.begin(), loops.end(), [](const TimeLoop *a, const TimeLoop *b) {
    return a->first != b->first ? a->first < b->first : a->last > b->last;
  });
  std::vector<const TimeLoop *> open;
  size_t next = 0;
  for (size_t k = 0; k < fn.kernels.size(); ++k) {
    for (; next < loops.size() && loops[next]->first == k; ++next) {
      enter(*loops[next]);
      open.push_back(loops[next]);
    }
    kernel(k);
    while (!open.empty() && open.back()->last == k + 1) {
      leave(*open.back());
      open.pop_back();
    }
  }
}

namespace {

// What an element costs beyond its store, in operations: a math function
// is a polynomial of a dozen (a vector exp, tanh, log), a division a few.
constexpr double kMathWork = 8, kDivideWork = 4;

double element_work(const LExprPtr &e) {
  double w = 0;
  bool is_float = dtype_info(e->dtype).is_float;
  if (e->kind == LExprKind::Unary && e->uop != UnaryOp::Neg && e->uop != UnaryOp::Abs)
    w += kMathWork;
  if (e->kind == LExprKind::Binary && is_float)
    w += e->bop == BinaryOp::Pow ? kMathWork : e->bop == BinaryOp::Div ? kDivideWork : 0;
  if (e->kind == LExprKind::Binary && e->bop == BinaryOp::Philox)
    w += 4 * kMathWork; // ten rounds of two 32-bit products and four xors
  for (const LExprPtr &o : e->operands)
    w += element_work(o);
  return w;
}

class WorkEstimate : public StmtFunctor<double()> {
public:
  double of(const StmtPtr &s) { return s ? dispatch(s) : 0.0; }

private:
  double on_for(const StmtPtr &s) override { return double(s->extent) * of(s->body); }
  double on_store(const StmtPtr &s) override { return 1 + element_work(s->value); }
  double on_seq(const StmtPtr &s) override {
    double w = 0;
    for (const StmtPtr &c : s->seq)
      w += of(c);
    return w;
  }
  double on_if(const StmtPtr &s) override { return 1 + std::max(of(s->body), of(s->else_body)); }
  double on_alloc(const StmtPtr &s) override { return of(s->body); }
  double on_barrier(const StmtPtr &) override { return 1; }
  double on_mma(const StmtPtr &) override { return 64; } // 16 x 8 x 8 multiply-adds over 32 lanes, doubled
};
} // namespace

double estimated_work(const Stmt &s) {
  StmtPtr alias(std::shared_ptr<const Stmt>(), &s); // a non-owning handle for the functor
  return WorkEstimate().of(alias);
}

int64_t parallel_grain(const Stmt &loop) {
  constexpr double kChunkWork = 1 << 14;
  double per_iteration = std::max(1.0, estimated_work(loop) / double(std::max<int64_t>(1, loop.extent)));
  return std::max<int64_t>(1, int64_t(std::ceil(kChunkWork / per_iteration)));
}

namespace {

/// The sum of the buffers of one scope a statement allocates, however nested.
class AllocatedBytes : public LoopVisitor {
public:
  explicit AllocatedBytes(BufferScope scope) : scope_(scope) {}
  int64_t bytes = 0;

protected:
  BufferScope scope_;
  void on_alloc(const StmtPtr &s) override {
    if (s->buffer->scope == scope_)
      bytes += s->buffer->bytes();
    LoopVisitor::on_alloc(s);
  }
};

} // namespace

int64_t stack_bytes(const LoweredFunction &fn) {
  int64_t most = 0;
  for (const Kernel &k : fn.kernels) {
    AllocatedBytes locals(BufferScope::Local); // shared memory is not the stack's
    locals.visit(k.body);
    most = std::max(most, locals.bytes);
  }
  return most;
}

int64_t shared_bytes(const Kernel &k) {
  AllocatedBytes shared(BufferScope::Shared);
  shared.visit(k.body);
  return shared.bytes;
}

//===----------------------------------------------------------------------===//
// Printer
//===----------------------------------------------------------------------===//

namespace {

const char *unary_name(UnaryOp op) {
  switch (op) {
  case UnaryOp::Neg:
    return "neg";
  case UnaryOp::Exp:
    return "exp";
  case UnaryOp::Log:
    return "log";
  case UnaryOp::Sqrt:
    return "sqrt";
  case UnaryOp::Tanh:
    return "tanh";
  case UnaryOp::Abs:
    return "abs";
  case UnaryOp::Erf:
    return "erf";
  case UnaryOp::Sin:
    return "sin";
  case UnaryOp::Cos:
    return "cos";
  case UnaryOp::RoundTf32:
    return "round_tf32";
  }
  return "?";
}

const char *binary_infix(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return " + ";
  case BinaryOp::Sub:
    return " - ";
  case BinaryOp::Mul:
    return "*";
  case BinaryOp::Div:
    return " / ";
  case BinaryOp::FloorDiv:
    return " // ";
  case BinaryOp::FloorMod:
    return " % ";
  case BinaryOp::And:
    return " && ";
  case BinaryOp::Or:
    return " || ";
  default:
    return nullptr;
  }
}

const char *binary_call(BinaryOp op) {
  switch (op) {
  case BinaryOp::Min:
    return "min";
  case BinaryOp::Max:
    return "max";
  case BinaryOp::Pow:
    return "pow";
  case BinaryOp::Philox:
    return "philox";
  default:
    return "?";
  }
}

const char *compare_name(CompareOp op) {
  switch (op) {
  case CompareOp::LT:
    return " < ";
  case CompareOp::LE:
    return " <= ";
  case CompareOp::GT:
    return " > ";
  case CompareOp::GE:
    return " >= ";
  case CompareOp::EQ:
    return " == ";
  case CompareOp::NE:
    return " != ";
  }
  return "?";
}

const char *scope_name(BufferScope s) {
  switch (s) {
  case BufferScope::Input:
    return "input";
  case BufferScope::InOut:
    return "inout";
  case BufferScope::Output:
    return "output";
  case BufferScope::Arena:
    return "arena";
  case BufferScope::Local:
    return "local";
  case BufferScope::Shared:
    return "shared";
  }
  return "?";
}

/// Prints through the functors: a statement at an indentation depth, an
/// expression as a string.
class LoopPrinter : StmtFunctor<void(int)>, LExprFunctor<std::string()> {
public:
  std::ostringstream os;
  std::string buffer_name(const Buffer &b) { return b.name; }
  std::string var_name(const LVar &v) { return v.name; }

  std::string expr(const LExprPtr &e) { return LExprFunctor<std::string()>::dispatch(e); }
  void stmt(const StmtPtr &s, int depth) { StmtFunctor<void(int)>::dispatch(s, depth); }

private:
  std::string on_int_imm(const LExprPtr &e) override {
    if (e->dtype == DType::Bool)
      return e->ivalue ? "True" : "False";
    return std::to_string(e->ivalue) + (e->dtype == DType::Int64 ? "" : std::string("i32"));
  }
  std::string on_float_imm(const LExprPtr &e) override {
    std::ostringstream s;
    s.precision(17);
    s << e->fvalue << (e->dtype == DType::Float32 ? "f" : e->dtype == DType::Float16 ? "f16" : "f64");
    return s.str();
  }
  std::string on_var(const LExprPtr &e) override { return var_name(*e->var); }
  std::string on_load(const LExprPtr &e) override { return buffer_name(*e->buffer) + "[" + expr(e->operands[0]) + "]"; }
  std::string on_unary(const LExprPtr &e) override {
    return std::string(unary_name(e->uop)) + "(" + expr(e->operands[0]) + ")";
  }
  std::string on_binary(const LExprPtr &e) override {
    if (const char *infix = binary_infix(e->bop))
      return "(" + expr(e->operands[0]) + infix + expr(e->operands[1]) + ")";
    return std::string(binary_call(e->bop)) + "(" + expr(e->operands[0]) + ", " + expr(e->operands[1]) + ")";
  }
  std::string on_compare(const LExprPtr &e) override {
    return "(" + expr(e->operands[0]) + compare_name(e->cop) + expr(e->operands[1]) + ")";
  }
  std::string on_select(const LExprPtr &e) override {
    return "select(" + expr(e->operands[0]) + ", " + expr(e->operands[1]) + ", " + expr(e->operands[2]) + ")";
  }
  std::string on_cast(const LExprPtr &e) override {
    return std::string(dtype_name(e->dtype)) + "(" + expr(e->operands[0]) + ")";
  }
  std::string on_mul_add(const LExprPtr &e) override {
    return "fma(" + expr(e->operands[0]) + ", " + expr(e->operands[1]) + ", " + expr(e->operands[2]) + ")";
  }
  std::string on_shuffle(const LExprPtr &e) override {
    return "shuffle(" + expr(e->operands[0]) + ", lane " + expr(e->operands[1]) + ")";
  }

  void on_for(const StmtPtr &s, int depth) override {
    std::string pad(depth * 2, ' ');
    os << pad << "for (" << var_name(*s->var) << ", 0, " << s->extent << ") " << for_kind_name(s->for_kind);
    if (s->for_kind == ForKind::BlockIdx || s->for_kind == ForKind::ThreadIdx)
      os << '.' << "xyz"[bound_dim(*s)];
    os << " {\n";
    stmt(s->body, depth + 1);
    os << pad << "}\n";
  }
  void on_store(const StmtPtr &s, int depth) override {
    os << std::string(depth * 2, ' ') << buffer_name(*s->buffer) << "[" << expr(s->index) << "] = " << expr(s->value)
       << "\n";
  }
  void on_seq(const StmtPtr &s, int depth) override {
    for (const StmtPtr &c : s->seq)
      stmt(c, depth);
  }
  void on_if(const StmtPtr &s, int depth) override {
    std::string pad(depth * 2, ' ');
    os << pad << "if " << expr(s->value) << " {\n";
    stmt(s->body, depth + 1);
    if (s->else_body) {
      os << pad << "} else {\n";
      stmt(s->else_body, depth + 1);
    }
    os << pad << "}\n";
  }
  void on_alloc(const StmtPtr &s, int depth) override {
    os << std::string(depth * 2, ' ') << "allocate " << buffer_name(*s->buffer) << ": " << dtype_name(s->buffer->dtype)
       << "[" << s->buffer->numel() << "], " << scope_name(s->buffer->scope) << "\n";
    stmt(s->body, depth);
  }
  void on_barrier(const StmtPtr &, int depth) override { os << std::string(depth * 2, ' ') << "barrier\n"; }
  void on_mma(const StmtPtr &s, int depth) override {
    os << std::string(depth * 2, ' ') << buffer_name(*s->buffer) << "[" << expr(s->index) << " .. +4] = mma_m16n8k8_tf32(";
    for (size_t i = 0; i < s->inputs.size(); ++i)
      os << (i ? ", " : "") << expr(s->inputs[i]);
    os << ")\n";
  }

public:
  void buffer(const BufferPtr &b) {
    os << "  " << (b->host ? "hosted" : scope_name(b->scope)) << " " << b->name << ": Buffer(" << dtype_name(b->dtype)
       << ", " << shape_str(b->shape) << ", " << b->bytes() << " bytes";
    if (b->host)
      os << ", in " << b->host->name;
    else if (b->scope == BufferScope::Arena)
      os << ", offset " << b->offset;
    os << ")";
    if (b->origin.set() && b->scope != BufferScope::Input && b->scope != BufferScope::InOut && b->name != "status")
      os << "  // %" << b->origin.var;
    os << "\n";
  }

  void function(const LoweredFunction &fn) {
    os << "@" << fn.name << " = primfn(workspace: " << fn.workspace_bytes << " bytes) {\n";
    for (const BufferPtr &b : fn.inputs)
      buffer(b);
    for (const BufferPtr &b : fn.outputs)
      buffer(b);
    for (const BufferPtr &b : fn.arena)
      buffer(b);
    for (const BufferPtr &b : fn.hosted)
      buffer(b);
    // A time loop is a `for` over kernels; each level indents its kernels.
    int depth = 1;
    walk_schedule(
        fn,
        [&](const TimeLoop &l) {
          os << std::string(size_t(2 * depth), ' ') << "for (step, 0, ";
          if (l.streamed()) { // the trip counts, the first few of them
            os << "trips[" << l.trips.size() << "]:";
            for (size_t i = 0; i < std::min<size_t>(l.trips.size(), 8); ++i)
              os << " " << l.trips[i];
            os << (l.trips.size() > 8 ? " ..." : "");
          } else {
            os << l.extent;
          }
          os << ") time {\n";
          ++depth;
        },
        [&](size_t index) {
          const Kernel &k = fn.kernels[index];
          const std::string pad(size_t(2 * depth), ' ');
          os << pad << "kernel " << k.name << "(";
          for (size_t i = 0; i < k.buffers.size(); ++i)
            os << (i ? ", " : "") << k.buffers[i]->name;
          os << ")";
          if (k.grid.count() > 1 || k.block.count() > 1)
            os << " launch(grid=" << launch_dims(k.grid) << ", block=" << launch_dims(k.block)
               << (shared_bytes(k) ? ", shared=" + std::to_string(shared_bytes(k)) + " bytes" : "") << ")";
          os << " {";
          if (k.origin.set())
            os << "  // %" << k.origin.var;
          for (const auto &[buf, over] : k.overwrites)
            if (same_place(*buf, *over))
              os << (k.origin.set() ? ", " : "  // ") << buf->name << " written over " << over->name;
          os << "\n";
          stmt(k.body, depth + 1);
          os << pad << "}\n";
        },
        [&](const TimeLoop &) {
          --depth;
          os << std::string(size_t(2 * depth), ' ') << "}\n";
        });
    os << "}\n";
  }
};

} // namespace

std::string print_loops(const LoweredModule &module) {
  LoopPrinter p;
  for (const LoweredFunction &fn : module.functions)
    p.function(fn);
  return p.os.str();
}

bool same_expr(const LExprPtr &a, const LExprPtr &b) {
  if (a == b)
    return true;
  if (a->kind != b->kind || a->dtype != b->dtype || a->ivalue != b->ivalue || a->fvalue != b->fvalue ||
      a->var != b->var || a->buffer != b->buffer || a->uop != b->uop || a->bop != b->bop || a->cop != b->cop ||
      a->operands.size() != b->operands.size())
    return false;
  for (size_t i = 0; i < a->operands.size(); ++i)
    if (!same_expr(a->operands[i], b->operands[i]))
      return false;
  return true;
}

} // namespace gradc
