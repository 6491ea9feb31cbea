//===- Emitter.cpp - loop IR to LLVM IR -----------------------------------===//
//
// Turns each Kernel into an LLVM function, for the CPU or for NVPTX, and emits
// the argument checks that the entry points of both targets share. No
// fast-math flags anywhere: a computation must give bit-identical results in
// every context it is compiled in (SPEC §6: remat never changes results).
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "VectorMath.h"
#include "gradc/loops/Lanes.h"

#include "gradc/loops/Functor.h"

#include "gradc/support/Diagnostics.h"
#include "gradc/support/Log.h"

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <llvm/IR/IntrinsicsNVPTX.h>

using namespace llvm;

namespace gradc::codegen {
namespace {

const char *const kPass = "codegen";

/// From the dtype table: an IEEE float or an integer of the dtype's size;
/// bool is an i8 in memory (numpy's layout) and an i1 in registers.
Type *memory_type(LLVMContext &ctx, DType dt) {
  const DTypeInfo &info = dtype_info(dt);
  if (info.is_float)
    return info.bytes == 2 ? Type::getHalfTy(ctx) : info.bytes == 4 ? Type::getFloatTy(ctx) : Type::getDoubleTy(ctx);
  return Type::getIntNTy(ctx, info.bytes * 8);
}

Type *register_type(LLVMContext &ctx, DType dt) {
  return dt == DType::Bool ? Type::getInt1Ty(ctx) : memory_type(ctx, dt);
}

enum class MathFn { Exp, Log, Sqrt, Fabs, Sin, Cos, Tanh, Erf, Pow, Floor };

/// Emits the body of one kernel function.

class KernelEmitter : StmtFunctor<void()>, LExprFunctor<Value *()> {
public:
  /// `constants`: the table of the template's arguments (KernelParams), or
  /// null where the kernel has none.
  KernelEmitter(Function *fn, const KernelOptions &opts, BufferValues buffers, Value *constants)
      : fn_(fn), device_(opts.device), opts_(opts), ctx_(fn->getContext()), b_(BasicBlock::Create(ctx_, "entry", fn)),
        buffers_(std::move(buffers)), constants_(constants) {}

  void emit(const StmtPtr &body) {
    stmt(body);
    b_.CreateRetVoid();
  }

  /// The body of an outlined parallel loop: `var` runs over [begin, end).
  void emit_task(const Stmt &loop, ScopeValues<LVar> vars, Value *begin, Value *end) {
    vars_ = std::move(vars);
    counted_loop(loop, begin, end);
    b_.CreateRetVoid();
  }

private:
  void stmt(const StmtPtr &s) { StmtFunctor<void()>::dispatch(s); }
  Value *expr(const LExprPtr &e) { return LExprFunctor<Value *()>::dispatch(e); }

  void on_for(const StmtPtr &s) override { emit_for(*s); }
  void on_store(const StmtPtr &s) override {
    Value *v = expr(s->value);
    if (s->buffer->dtype == DType::Bool)
      v = b_.CreateZExt(v, b_.getInt8Ty());
    b_.CreateStore(v, element_ptr(*s->buffer, s->index));
  }
  void on_seq(const StmtPtr &s) override {
    for (const StmtPtr &c : s->seq)
      stmt(c);
  }
  void on_if(const StmtPtr &s) override { emit_if(*s); }
  void on_alloc(const StmtPtr &s) override { emit_alloc(*s); }
  /// __syncthreads: bar.sync 0. A CPU kernel has none (a simulated GPU
  /// kernel is cut at its barriers: lower/SimulateGpu.cpp).
  void on_barrier(const StmtPtr &) override {
    GRADC_CHECK(device_ == Device::GPU, kPass, "a GPU barrier in CPU code");
    b_.CreateIntrinsic(Intrinsic::nvvm_barrier0, {}, {});
  }

  void emit_for(const Stmt &s) {
    const LVar *var = s.var.get();
    bool bound = s.for_kind == ForKind::BlockIdx || s.for_kind == ForKind::ThreadIdx;
    if (bound && device_ == Device::GPU) {
      // The launch shape is the loops: a chain of block (thread) loops is the
      // grid's (block's) dimensions, x the innermost (LoopIR.h).
      static const Intrinsic::ID block_ids[] = {Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                                Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                                Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
      static const Intrinsic::ID thread_ids[] = {Intrinsic::nvvm_read_ptx_sreg_tid_x, Intrinsic::nvvm_read_ptx_sreg_tid_y,
                                                 Intrinsic::nvvm_read_ptx_sreg_tid_z};
      const int dim = bound_dim(s);
      GRADC_CHECK(dim < kMaxLaunchDims, kPass, "loop " + var->name + " binds more than 3 dimensions");
      Intrinsic::ID id = s.for_kind == ForKind::BlockIdx ? block_ids[dim] : thread_ids[dim];
      vars_[var] = b_.CreateZExt(b_.CreateIntrinsic(id, {}, {}), b_.getInt64Ty(), var->name);
      stmt(s.body);
      vars_.erase(var);
      return;
    }
    Value *extent = extent_of(s);
    if (isa<Constant>(extent) && s.extent <= 0)
      return;
    if (s.for_kind == ForKind::Parallel && opts_.threads && device_ == Device::CPU && allocs_open_ == 0)
      return emit_parallel(s);
    // Other loops, ScanTime included, run serially on the CPU (a GPU-bound
    // kernel compiled for the CPU runs its block/thread loops serially too).
    // Vector instructions, one lane per iteration. On the GPU, where a
    // thread's lanes are its vector loads and stores (ld.global.v4: a tiled
    // product's fetches), not where a lane calls a libdevice function.
    if (lane_wise(s, device_ == Device::CPU) && (device_ == Device::CPU || !computes_transcendental(s.body)))
      return emit_lanes(s);
    if (device_ == Device::CPU && transposing_copy(s))
      return emit_transpose(s);
    // A thread's short Vectorized loop that is not lane-wise: unrolled, so
    // that what it indexes stays in registers.
    bool unrolled = s.for_kind == ForKind::Unrolled ||
                    (device_ == Device::GPU && s.for_kind == ForKind::Vectorized && s.extent <= kMaxLanes);
    if (unrolled) { // the body once per index, the index a constant
      for (int64_t i = 0; i < s.extent; ++i) {
        vars_[var] = b_.getInt64(i);
        stmt(s.body);
      }
      vars_.erase(var);
      return;
    }
    counted_loop(s, b_.getInt64(0), extent);
  }

  /// The value of a template's argument for `node` (Templates.h), read from
  /// the table once at the function's entry; null where `node` is a
  /// constant of the kernel.
  template <typename Node> Value *argument(const std::unordered_map<const Node *, int> *slots, const Node *node) {
    if (!slots || !constants_)
      return nullptr;
    auto it = slots->find(node);
    if (it == slots->end())
      return nullptr;
    Value *&v = arguments_[it->second];
    if (!v) {
      BasicBlock &entry = fn_->getEntryBlock();
      IRBuilder<> ab(&entry, entry.begin());
      Value *at = ab.CreateConstInBoundsGEP1_64(ab.getInt64Ty(), constants_, uint64_t(it->second));
      v = ab.CreateAlignedLoad(ab.getInt64Ty(), at, Align(8), "arg" + std::to_string(it->second));
    }
    return v;
  }
  /// A loop's extent: its template argument, or the constant.
  Value *extent_of(const Stmt &s) {
    Value *v = argument(opts_.params ? &opts_.params->extents : nullptr, &s);
    return v ? v : b_.getInt64(s.extent);
  }

  /// `for var in [begin, end)`; the caller guarantees begin < end when both
  /// are constants, and a runtime check guards the other case.
  void counted_loop(const Stmt &s, Value *begin, Value *end) {
    const LVar *var = s.var.get();
    BasicBlock *body = BasicBlock::Create(ctx_, "for." + var->name, fn_);
    BasicBlock *exit = BasicBlock::Create(ctx_, "for." + var->name + ".end", fn_);
    if (isa<Constant>(begin) && isa<Constant>(end))
      b_.CreateBr(body);
    else
      b_.CreateCondBr(b_.CreateICmpSLT(begin, end), body, exit);
    BasicBlock *preheader = b_.GetInsertBlock();
    b_.SetInsertPoint(body);
    PHINode *index = b_.CreatePHI(b_.getInt64Ty(), 2, var->name);
    index->addIncoming(begin, preheader);
    vars_[var] = index;
    stmt(s.body);
    vars_.erase(var);
    Value *next = b_.CreateAdd(index, b_.getInt64(1), var->name + ".next", true, true);
    BranchInst *latch = b_.CreateCondBr(b_.CreateICmpEQ(next, end), exit, body);
    index->addIncoming(next, b_.GetInsertBlock());
    if (s.for_kind == ForKind::Vectorized) {
      // Vectorize, and keep the loop from being fully unrolled first: an
      // unrolled loop over a local accumulator is scalarized by SROA and
      // never reaches the loop vectorizer.
      // A body of exp/log/tanh/erf arithmetic is one long dependent chain
      // per vector, and the cost model interleaves none: two vectors at a
      // time keep the FMA units fed (GELU's 1 + erf(x / sqrt 2) over
      // 512 x 512 on AVX2 code: 0.39 -> 0.31 ms; four were no faster).
      Metadata *enable[] = {MDString::get(ctx_, "llvm.loop.vectorize.enable"), ConstantAsMetadata::get(b_.getTrue())};
      std::vector<Metadata *> properties{MDNode::get(ctx_, enable), unroll_disable()};
      // Its iterations are independent (LoopIR.h), which the vectorizer
      // cannot see where two buffers share bytes (an in-place kernel, not
      // noalias): it vectorized behind a run-time overlap check that an
      // in-place kernel always fails, so GELU's gradient over swin_t's MLPs
      // ran scalar (8.5% of its step). Its memory accesses go in an access
      // group that the loop declares parallel, as `omp simd` does.
      Metadata *parallel[] = {MDString::get(ctx_, "llvm.loop.parallel_accesses"), access_group(body, exit)};
      properties.push_back(MDNode::get(ctx_, parallel));
      if (computes_transcendental(s.body)) {
        Metadata *two[] = {MDString::get(ctx_, "llvm.loop.interleave.count"), ConstantAsMetadata::get(b_.getInt32(2))};
        properties.push_back(MDNode::get(ctx_, two));
      }
      set_loop_metadata(latch, properties);
    } else if (computes_transcendental(s.body) || contains_loop(s.body, ForKind::Unrolled)) {
      // Unrolling a scalar loop of exp/log/tanh (libm calls or inline
      // arithmetic) only multiplies a large body: it made -O2 time grow with
      // the extents (500 softmax kernels: 9 s with it, 2.6 s without) and
      // buys nothing at run time. A loop around a schedule's unrolled body
      // (a register tile's k loop) is unrolled enough: LLVM unrolling it
      // again cost a third of the MLP's compile time.
      set_loop_metadata(latch, {unroll_disable()});
    }
    b_.SetInsertPoint(exit);
  }

  MDNode *unroll_disable() { return MDNode::get(ctx_, {MDString::get(ctx_, "llvm.loop.unroll.disable")}); }

  /// A new access group holding every instruction that touches memory in
  /// the loop whose body starts at block `body`: the blocks from it to the
  /// function's end but `exit` (created right after it; the body's own
  /// blocks are appended after both). An instruction of an inner loop's
  /// group is in both.
  MDNode *access_group(BasicBlock *body, BasicBlock *exit) {
    MDNode *group = MDNode::getDistinct(ctx_, {});
    Function &f = *body->getParent();
    for (auto bb = body->getIterator(); bb != f.end(); ++bb) {
      if (&*bb == exit)
        continue;
      for (Instruction &i : *bb)
        if (i.mayReadOrWriteMemory()) {
          MDNode *old = i.getMetadata(LLVMContext::MD_access_group);
          i.setMetadata(LLVMContext::MD_access_group, old ? uniteAccessGroups(old, group) : group);
        }
    }
    return group;
  }

  void set_loop_metadata(BranchInst *latch, std::vector<Metadata *> properties) {
    properties.insert(properties.begin(), nullptr);
    MDNode *loop_id = MDNode::getDistinct(ctx_, properties);
    loop_id->replaceOperandWith(0, loop_id);
    latch->setMetadata(LLVMContext::MD_loop, loop_id);
  }

  void emit_if(const Stmt &s) {
    Value *cond = expr(s.value);
    BasicBlock *then_bb = BasicBlock::Create(ctx_, "if.then", fn_);
    BasicBlock *else_bb = s.else_body ? BasicBlock::Create(ctx_, "if.else", fn_) : nullptr;
    BasicBlock *end_bb = BasicBlock::Create(ctx_, "if.end", fn_);
    b_.CreateCondBr(cond, then_bb, else_bb ? else_bb : end_bb);
    b_.SetInsertPoint(then_bb);
    stmt(s.body);
    b_.CreateBr(end_bb);
    if (else_bb) {
      b_.SetInsertPoint(else_bb);
      stmt(s.else_body);
      b_.CreateBr(end_bb);
    }
    b_.SetInsertPoint(end_bb);
  }

  /// Splits the loop across the runtime's thread pool. Its body becomes a
  /// function of every buffer (noalias, as in a kernel) and enclosing loop
  /// variable plus the [begin, end) chunk (and the template's arguments
  /// where it has any); a trampoline of the runtime's task type unpacks a
  /// closure struct built here and calls it. Iterations of a Parallel loop
  /// are independent, so results do not depend on the split.
  void emit_parallel(const Stmt &s) {
    Module &m = *fn_->getParent();
    std::vector<const Buffer *> bufs;
    std::vector<Value *> buf_values;
    for (const auto &[buf, value] : buffers_.in_order()) {
      bufs.push_back(buf);
      buf_values.push_back(value);
    }
    if (constants_) // the table travels as one more pointer, after the buffers
      buf_values.push_back(constants_);
    std::vector<const LVar *> outer;
    std::vector<Value *> outer_values;
    for (const auto &[var, value] : vars_.in_order()) {
      outer.push_back(var);
      outer_values.push_back(value);
    }
    Type *ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty();

    // The chunk function.
    std::vector<Type *> params(buf_values.size(), ptr);
    params.insert(params.end(), outer.size() + 2, i64);
    std::string base = unique_symbol(m, fn_->getName().str() + ".par");
    Function *chunk =
        Function::Create(FunctionType::get(b_.getVoidTy(), params, false), GlobalValue::InternalLinkage, base, m);
    chunk->addFnAttr(Attribute::NoUnwind);
    BufferValues chunk_buffers;
    for (size_t i = 0; i < bufs.size(); ++i) {
      Argument *arg = chunk->getArg(i);
      arg->setName(bufs[i]->name);
      if (!opts_.shared || !opts_.shared->count(bufs[i]))
        arg->addAttr(Attribute::NoAlias);
      arg->addAttr(Attribute::getWithAlignment(ctx_, Align(64)));
      chunk_buffers[bufs[i]] = arg;
    }
    Value *chunk_constants = nullptr;
    if (constants_) {
      chunk_constants = chunk->getArg(bufs.size());
      chunk_constants->setName("constants");
    }
    ScopeValues<LVar> chunk_vars;
    for (size_t i = 0; i < outer.size(); ++i)
      chunk_vars[outer[i]] = chunk->getArg(buf_values.size() + i);
    KernelOptions inner = opts_;
    inner.threads = false; // nested parallel loops run serially inside a chunk
    KernelEmitter(chunk, inner, std::move(chunk_buffers), chunk_constants)
        .emit_task(s, std::move(chunk_vars), chunk->getArg(params.size() - 2), chunk->getArg(params.size() - 1));

    // The closure and the trampoline `void task(ptr closure, i64 begin, i64 end)`.
    std::vector<Type *> fields(buf_values.size(), ptr);
    fields.insert(fields.end(), outer.size(), i64);
    StructType *closure_ty = StructType::get(ctx_, fields);
    Function *task = Function::Create(FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false),
                                      GlobalValue::InternalLinkage, base + ".task", m);
    task->addFnAttr(Attribute::NoUnwind);
    IRBuilder<> tb(BasicBlock::Create(ctx_, "entry", task));
    std::vector<Value *> args;
    for (size_t i = 0; i < fields.size(); ++i)
      args.push_back(tb.CreateLoad(fields[i], tb.CreateStructGEP(closure_ty, task->getArg(0), i)));
    args.push_back(task->getArg(1));
    args.push_back(task->getArg(2));
    tb.CreateCall(chunk, args);
    tb.CreateRetVoid();

    BasicBlock &entry = fn_->getEntryBlock();
    Value *closure = IRBuilder<>(&entry, entry.begin()).CreateAlloca(closure_ty, nullptr, "closure");
    std::vector<Value *> values = buf_values;
    values.insert(values.end(), outer_values.begin(), outer_values.end());
    for (size_t i = 0; i < values.size(); ++i)
      b_.CreateStore(values[i], b_.CreateStructGEP(closure_ty, closure, i));
    Value *grain = argument(opts_.params ? &opts_.params->grains : nullptr, &s);
    int64_t least = parallel_grain(s);
    b_.CreateCall(runtime_function(m, RuntimeFn::ParallelFor),
                  {extent_of(s), grain ? grain : b_.getInt64(least), task, closure});
    log(LogLevel::Info, "schedule",
        fn_->getName().str() + ": loop " + s.var->name + " over " + std::to_string(s.extent) +
            " iterations runs on the thread pool in chunks of at least " + std::to_string(least) +
            (grain ? " (for this kernel of its template)" : ""));
  }

  /// A lane-wise Vectorized loop (loops/Lanes.h) as `extent`-lane vector
  /// instructions: a unit-stride access is one vector load or store at the
  /// address of lane 0, a value that does not depend on the lane is computed
  /// once and broadcast. A register tile's accumulators are then whole-vector
  /// accesses at constant offsets of an alloca, which SROA keeps in registers.
  void emit_lanes(const Stmt &s) {
    LaneValues lanes(*this, s);
    std::vector<const Stmt *> stores;
    std::function<void(const StmtPtr &)> collect = [&](const StmtPtr &st) {
      if (st->kind == StmtKind::Seq)
        for (const StmtPtr &c : st->seq)
          collect(c);
      else
        stores.push_back(st.get());
    };
    collect(s.body);
    for (const Stmt *st : stores) {
      Value *v = lanes.vector(st->value);
      int64_t step = index_stride(st->index, s.var.get()).value_or(1);
      if (step == 1) {
        b_.CreateAlignedStore(v, lanes.address(*st->buffer, st->index), lane_align(*st->buffer, st->index, s));
        continue;
      }
      // lane i to element i·step of the span, every other element masked off
      unsigned n = unsigned(s.extent), span = unsigned(step) * (n - 1) + 1;
      SmallVector<int, 256> place(span, PoisonMaskElem);
      SmallVector<Constant *, 256> mask(span, b_.getFalse());
      for (unsigned i = 0; i < n; ++i) {
        place[i * unsigned(step)] = int(i);
        mask[i * unsigned(step)] = b_.getTrue();
      }
      b_.CreateMaskedStore(b_.CreateShuffleVector(v, place), lanes.address(*st->buffer, st->index),
                           Align(dtype_bytes(st->buffer->dtype)), ConstantVector::get(mask));
    }
  }

  /// The alignment of a lane-wise access at `index` (lane 0 of `loop`): the
  /// element size times the index's known power of two, as far as the
  /// buffer's base is aligned (an argument or the workspace: 64 bytes, the
  /// ABI's; a local or shared buffer: kLocalAlign). An aligned vector is one
  /// instruction where the target has it (ld.global.v4.f32 on the GPU).
  Align lane_align(const Buffer &buf, const LExprPtr &index, const Stmt &loop) {
    auto fixed = [&](const LExpr &c) { return !opts_.params || !opts_.params->constants.count(&c); };
    int zeros = std::min(index_zero_bits(index, loop.var.get(), fixed), 6);
    uint64_t base = buf.scope == BufferScope::Local || buf.scope == BufferScope::Shared ? kLocalAlign : 64;
    return Align(std::min(base, uint64_t(dtype_bytes(buf.dtype)) << zeros));
  }
  static constexpr uint64_t kLocalAlign = 16;

  /// A transposing copy (loops/Lanes.h) of an n × n block: row r (lane r,
  /// the unrolled index 0..n-1) loaded as one vector, then rounds h = n/2,
  /// n/4, ..., 1 that pair rows a and a + h (a without bit h) and swap their
  /// off-diagonal h-blocks, then row r stored as the lanes of unrolled index r.
  void emit_transpose(const Stmt &s) {
    const Stmt &lanes = *s.body, &st = *lanes.body;
    const LVar *i = s.var.get(), *l = lanes.var.get();
    const unsigned n = unsigned(s.extent);
    const Buffer &from = *st.value->buffer;
    Align align(dtype_bytes(from.dtype));
    auto *row_type = FixedVectorType::get(memory_type(ctx_, from.dtype), n);
    auto at = [&](const Buffer &buf, const LExprPtr &index, unsigned index_i, unsigned index_l) {
      vars_[i] = b_.getInt64(index_i);
      vars_[l] = b_.getInt64(index_l);
      return element_ptr(buf, index);
    };
    std::vector<Value *> rows(n);
    for (unsigned r = 0; r < n; ++r)
      rows[r] = b_.CreateAlignedLoad(row_type, at(from, st.value->operands[0], 0, r), align);
    for (unsigned h = n / 2; h >= 1; h /= 2)
      for (unsigned a = 0; a < n; ++a) {
        if (a & h)
          continue;
        SmallVector<int, kMaxLanes> keep(n), swap(n);
        for (unsigned c = 0; c < n; ++c) {
          keep[c] = int(c & h ? n + c - h : c); // row a's own h-blocks, then row a+h's
          swap[c] = int(c & h ? n + c : c + h);
        }
        Value *lo = b_.CreateShuffleVector(rows[a], rows[a + h], keep);
        rows[a + h] = b_.CreateShuffleVector(rows[a], rows[a + h], swap);
        rows[a] = lo;
      }
    for (unsigned r = 0; r < n; ++r)
      b_.CreateAlignedStore(rows[r], at(*st.buffer, st.index, r, 0), Align(dtype_bytes(st.buffer->dtype)));
    vars_.erase(i);
    vars_.erase(l);
  }

  class LaneValues : LExprFunctor<Value *()> {
  public:
    LaneValues(KernelEmitter &outer, const Stmt &loop)
        : k_(outer), loop_(loop), lane_(loop.var.get()), count_(unsigned(loop.extent)) {}

    /// The lanes of `e`, broadcast when it does not depend on the lane.
    Value *vector(const LExprPtr &e) {
      Value *v = value(e);
      return v->getType()->isVectorTy() ? v : k_.b_.CreateVectorSplat(count_, v);
    }
    /// The address of lane 0 of a unit-stride access.
    Value *address(const Buffer &buf, const LExprPtr &index) {
      k_.vars_[lane_] = k_.b_.getInt64(0);
      Value *p = k_.element_ptr(buf, index);
      k_.vars_.erase(lane_);
      return p;
    }

  private:
    KernelEmitter &k_;
    const Stmt &loop_;
    const LVar *lane_;
    unsigned count_;

    /// A scalar where `e` does not depend on the lane, else a vector.
    Value *value(const LExprPtr &e) { return uses_var(e, lane_) ? dispatch(e) : k_.expr(e); }
    Value *on_int_imm(const LExprPtr &e) override { return k_.expr(e); }
    Value *on_float_imm(const LExprPtr &e) override { return k_.expr(e); }
    Value *on_var(const LExprPtr &) override {
      std::vector<Constant *> iota;
      for (unsigned i = 0; i < count_; ++i)
        iota.push_back(k_.b_.getInt64(i));
      return ConstantVector::get(iota);
    }
    Value *on_load(const LExprPtr &e) override {
      Type *element = memory_type(k_.ctx_, e->dtype);
      int64_t step = index_stride(e->operands[0], lane_).value_or(1);
      if (step > 1) { // the span from lane 0 to the last lane, then every step-th element of it
        Type *span = FixedVectorType::get(element, unsigned(step) * (count_ - 1) + 1);
        Value *all = k_.b_.CreateAlignedLoad(span, address(*e->buffer, e->operands[0]),
                                             k_.lane_align(*e->buffer, e->operands[0], loop_));
        SmallVector<int, kMaxLanes> pick;
        for (unsigned i = 0; i < count_; ++i)
          pick.push_back(int(i * unsigned(step)));
        return k_.b_.CreateShuffleVector(all, pick);
      }
      Type *ty = FixedVectorType::get(element, count_);
      return k_.b_.CreateAlignedLoad(ty, address(*e->buffer, e->operands[0]),
                                     k_.lane_align(*e->buffer, e->operands[0], loop_));
    }
    Value *on_unary(const LExprPtr &e) override { return k_.unary(e->uop, e->dtype, vector(e->operands[0])); }
    Value *on_binary(const LExprPtr &e) override {
      return k_.binary(e->bop, e->dtype, vector(e->operands[0]), vector(e->operands[1]));
    }
    Value *on_compare(const LExprPtr &e) override {
      return k_.compare(e->cop, e->operands[0]->dtype, vector(e->operands[0]), vector(e->operands[1]));
    }
    Value *on_select(const LExprPtr &e) override {
      return k_.b_.CreateSelect(vector(e->operands[0]), vector(e->operands[1]), vector(e->operands[2]));
    }
    Value *on_cast(const LExprPtr &e) override {
      return k_.cast(vector(e->operands[0]), e->operands[0]->dtype, e->dtype);
    }
    Value *on_mul_add(const LExprPtr &e) override {
      return k_.fused_multiply_add(vector(e->operands[0]), vector(e->operands[1]), vector(e->operands[2]));
    }
    Value *on_shuffle(const LExprPtr &e) override { return k_.expr(e); } // never lane-wise (Lanes.h): an error there
  };

  /// Locals live in entry-block allocas, where mem2reg/SROA can promote them.
  void emit_alloc(const Stmt &s) {
    const Buffer &local = *s.buffer;
    if (local.scope == BufferScope::Shared && device_ == Device::GPU) { // a block's: .shared (address space 3)
      Module &m = *fn_->getParent();
      auto *ty = ArrayType::get(memory_type(ctx_, local.dtype), uint64_t(local.numel()));
      auto *gv = new GlobalVariable(m, ty, false, GlobalValue::InternalLinkage, UndefValue::get(ty),
                                    fn_->getName().str() + "." + local.name, nullptr,
                                    GlobalValue::NotThreadLocal, 3);
      gv->setAlignment(Align(kLocalAlign));
      buffers_[&local] = gv;
      stmt(s.body);
      buffers_.erase(&local);
      return;
    }
    BasicBlock &entry = fn_->getEntryBlock();
    IRBuilder<> ab(&entry, entry.begin());
    AllocaInst *a = ab.CreateAlloca(ArrayType::get(memory_type(ctx_, local.dtype), local.numel()), nullptr, local.name);
    a->setAlignment(std::max(a->getAlign(), Align(kLocalAlign)));
    buffers_[&local] = a;
    ++allocs_open_; // a local shared by the iterations keeps its loops serial
    stmt(s.body);
    --allocs_open_;
    buffers_.erase(&local);
  }

  Value *element_ptr(const Buffer &buf, const LExprPtr &index) {
    Value *base = buffers_.lookup(&buf);
    GRADC_CHECK(base, kPass, "buffer " + buf.name + " is neither a kernel buffer nor allocated");
    return b_.CreateInBoundsGEP(memory_type(ctx_, buf.dtype), base, expr(index));
  }

  Value *on_int_imm(const LExprPtr &e) override {
    GRADC_CHECK(!is_float(e->dtype), kPass, "integer constant of a float dtype");
    if (Value *v = argument(opts_.params ? &opts_.params->constants : nullptr, e.get())) {
      GRADC_CHECK(e->dtype == DType::Int64, kPass, "a template argument for a constant that is not Int64");
      return v;
    }
    if (e->dtype == DType::Bool)
      return b_.getInt1(e->ivalue != 0);
    return ConstantInt::get(register_type(ctx_, e->dtype), e->ivalue, true);
  }
  Value *on_float_imm(const LExprPtr &e) override {
    if (Value *v = argument(opts_.params ? &opts_.params->constants : nullptr, e.get())) {
      // The bits of a double, rounded to the dtype as the constant would be.
      Value *d = b_.CreateBitCast(v, b_.getDoubleTy());
      return e->dtype == DType::Float64 ? d : b_.CreateFPTrunc(d, register_type(ctx_, e->dtype));
    }
    return ConstantFP::get(register_type(ctx_, e->dtype), e->fvalue);
  }
  Value *on_var(const LExprPtr &e) override {
    Value *index = vars_.lookup(e->var.get());
    GRADC_CHECK(index, kPass, "loop variable " + e->var->name + " used out of scope");
    return index;
  }
  Value *on_load(const LExprPtr &e) override {
    Value *v = b_.CreateLoad(memory_type(ctx_, e->dtype), element_ptr(*e->buffer, e->operands[0]));
    return e->dtype == DType::Bool ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
  }
  Value *on_unary(const LExprPtr &e) override { return unary(e->uop, e->dtype, expr(e->operands[0])); }
  Value *on_binary(const LExprPtr &e) override {
    return binary(e->bop, e->dtype, expr(e->operands[0]), expr(e->operands[1]));
  }
  Value *on_compare(const LExprPtr &e) override {
    return compare(e->cop, e->operands[0]->dtype, expr(e->operands[0]), expr(e->operands[1]));
  }
  Value *on_select(const LExprPtr &e) override {
    return b_.CreateSelect(expr(e->operands[0]), expr(e->operands[1]), expr(e->operands[2]));
  }
  Value *on_cast(const LExprPtr &e) override { return cast(expr(e->operands[0]), e->operands[0]->dtype, e->dtype); }
  Value *on_mul_add(const LExprPtr &e) override {
    return fused_multiply_add(expr(e->operands[0]), expr(e->operands[1]), expr(e->operands[2]));
  }
  /// shfl.sync.idx over the whole warp, lane mod 32 (c = 0x1f): a 32-bit
  /// value in one, a 64-bit one as two halves, a narrower one widened.
  Value *on_shuffle(const LExprPtr &e) override {
    GRADC_CHECK(device_ == Device::GPU, kPass, "a GPU shuffle in CPU code");
    Value *v = expr(e->operands[0]);
    Value *lane = b_.CreateTrunc(expr(e->operands[1]), b_.getInt32Ty());
    auto shfl = [&](Value *word) {
      bool f = word->getType()->isFloatTy();
      return b_.CreateIntrinsic(f ? Intrinsic::nvvm_shfl_sync_idx_f32 : Intrinsic::nvvm_shfl_sync_idx_i32, {},
                                {b_.getInt32(~0u), word, lane, b_.getInt32(0x1f)});
    };
    Type *ty = v->getType();
    if (ty->isFloatTy() || ty->isIntegerTy(32))
      return shfl(v);
    unsigned bits = ty->getPrimitiveSizeInBits();
    Type *int_ty = b_.getIntNTy(bits);
    Value *w = ty->isIntegerTy() ? v : b_.CreateBitCast(v, int_ty);
    Value *out;
    if (bits == 64) {
      Value *lo = shfl(b_.CreateTrunc(w, b_.getInt32Ty()));
      Value *hi = shfl(b_.CreateTrunc(b_.CreateLShr(w, 32), b_.getInt32Ty()));
      out = b_.CreateOr(b_.CreateZExt(lo, int_ty), b_.CreateShl(b_.CreateZExt(hi, int_ty), 32));
    } else {
      out = b_.CreateTrunc(shfl(b_.CreateZExt(w, b_.getInt32Ty())), int_ty);
    }
    return ty->isIntegerTy() ? out : b_.CreateBitCast(out, ty);
  }
  /// a * b + c rounded once, for scalars and vectors alike.
  Value *fused_multiply_add(Value *a, Value *b, Value *c) {
    return b_.CreateIntrinsic(Intrinsic::fma, {a->getType()}, {a, b, c});
  }

  Value *unary(UnaryOp op, DType dt, Value *a) {
    bool fp = is_float(dt);
    switch (op) {
    case UnaryOp::Neg:
      GRADC_CHECK(dt != DType::Bool, kPass, "negation of a bool");
      return fp ? b_.CreateFNeg(a) : b_.CreateNeg(a);
    case UnaryOp::Abs:
      if (fp)
        return math(MathFn::Fabs, a);
      if (dt == DType::Bool)
        return a;
      return b_.CreateBinaryIntrinsic(Intrinsic::abs, a, b_.getFalse()); // abs(INT_MIN) wraps
    default:
      break;
    }
    GRADC_CHECK(fp, kPass, "math function of a non-float dtype");
    switch (op) {
    case UnaryOp::Exp:
      return math(MathFn::Exp, a);
    case UnaryOp::Log:
      return math(MathFn::Log, a);
    case UnaryOp::Sqrt:
      return math(MathFn::Sqrt, a);
    case UnaryOp::Tanh:
      return math(MathFn::Tanh, a);
    case UnaryOp::Erf:
      return math(MathFn::Erf, a);
    case UnaryOp::Sin:
      return math(MathFn::Sin, a);
    case UnaryOp::Cos:
      return math(MathFn::Cos, a);
    case UnaryOp::RoundTf32:
      return round_tf32(a);
    default:
      internal_error(kPass, "unknown unary op");
    }
  }

  /// A float32 rounded to TensorFloat-32 (LoopIR.h: UnaryOp::RoundTf32):
  /// cvt.rna.tf32.f32 on the GPU; on the CPU the same in integer arithmetic,
  /// half an ulp of tf32 added to the magnitude's bits, the low 13 cleared,
  /// infinities and NaNs kept.
  Value *round_tf32(Value *a) {
    GRADC_CHECK(a->getType()->isFloatTy(), kPass, "tf32 rounding of a value that is not float32");
    if (device_ == Device::GPU)
      return b_.CreateBitCast(b_.CreateIntrinsic(Intrinsic::nvvm_f2tf32_rna, {}, {a}), b_.getFloatTy());
    Value *bits = b_.CreateBitCast(a, b_.getInt32Ty());
    Value *finite = b_.CreateICmpNE(b_.CreateAnd(bits, 0x7f800000), b_.getInt32(0x7f800000));
    Value *rounded = b_.CreateAnd(b_.CreateAdd(bits, b_.getInt32(0x1000)), b_.getInt32(int32_t(0xffffe000)));
    return b_.CreateBitCast(b_.CreateSelect(finite, rounded, bits), b_.getFloatTy());
  }

  /// A warp's tensor-core product (StmtKind::Mma): mma.sync.aligned.m16n8k8
  /// .row.col.f32.tf32.tf32.f32, the lane's four results stored in order. A
  /// CPU program has none (a simulated one computes it: SimulateGpu.cpp).
  void on_mma(const StmtPtr &s) override {
    GRADC_CHECK(device_ == Device::GPU, kPass, "a tensor-core product in CPU code");
    std::vector<Value *> args;
    for (size_t i = 0; i < kMmaInputs; ++i) {
      Value *v = expr(s->inputs[i]);
      args.push_back(i < 6 ? b_.CreateBitCast(v, b_.getInt32Ty()) : v); // A and B as tf32 bits
    }
    Value *d = b_.CreateIntrinsic(Intrinsic::nvvm_mma_m16n8k8_row_col_tf32, {}, args);
    for (unsigned j = 0; j < 4; ++j) {
      LExprPtr at = gradc::binary(BinaryOp::Add, s->index, int_imm(j));
      b_.CreateStore(b_.CreateExtractValue(d, {j}), element_ptr(*s->buffer, at));
    }
  }

  Value *binary(BinaryOp op, DType dt, Value *a, Value *c) {
    if (is_float(dt)) {
      switch (op) {
      case BinaryOp::Add:
        return b_.CreateFAdd(a, c);
      case BinaryOp::Sub:
        return b_.CreateFSub(a, c);
      case BinaryOp::Mul:
        return b_.CreateFMul(a, c);
      case BinaryOp::Div:
        return b_.CreateFDiv(a, c);
      // numpy: minimum(a, b) = (a <= b || isnan(a)) ? a : b, so a NaN in either
      // operand propagates; of -0.0 and +0.0 the first operand is returned.
      case BinaryOp::Min:
        return b_.CreateSelect(b_.CreateOr(b_.CreateFCmpOLE(a, c), b_.CreateFCmpUNO(a, a)), a, c);
      case BinaryOp::Max:
        return b_.CreateSelect(b_.CreateOr(b_.CreateFCmpOGE(a, c), b_.CreateFCmpUNO(a, a)), a, c);
      case BinaryOp::Pow:
        return math(MathFn::Pow, a, c);
      case BinaryOp::FloorDiv:
        return math(MathFn::Floor, b_.CreateFDiv(a, c));
      // TVM's floormod: a - floor(a / b) * b.
      case BinaryOp::FloorMod:
        return b_.CreateFSub(a, b_.CreateFMul(math(MathFn::Floor, b_.CreateFDiv(a, c)), c));
      case BinaryOp::And:
      case BinaryOp::Or:
      case BinaryOp::Philox:
        internal_error(kPass, "logical op on floats");
      }
    }
    if (dt == DType::Bool) {
      switch (op) {
      case BinaryOp::Add:
      case BinaryOp::Max:
      case BinaryOp::Or:
        return b_.CreateOr(a, c);
      case BinaryOp::Mul:
      case BinaryOp::Min:
      case BinaryOp::And:
        return b_.CreateAnd(a, c);
      default:
        internal_error(kPass, "arithmetic op on bools");
      }
    }
    switch (op) {
    // Integer arithmetic wraps like numpy's: no nsw/nuw flags.
    case BinaryOp::Add:
      return b_.CreateAdd(a, c);
    case BinaryOp::Sub:
      return b_.CreateSub(a, c);
    case BinaryOp::Mul:
      return b_.CreateMul(a, c);
    case BinaryOp::Div:
      return int_divide(a, c, false).first;
    case BinaryOp::FloorDiv:
      return int_divide(a, c, true).first;
    case BinaryOp::FloorMod:
      return int_divide(a, c, true).second;
    case BinaryOp::Min:
      return b_.CreateSelect(b_.CreateICmpSLE(a, c), a, c);
    case BinaryOp::Max:
      return b_.CreateSelect(b_.CreateICmpSGE(a, c), a, c);
    // Through double: exact while the result fits in 53 bits.
    case BinaryOp::Pow: {
      Type *f64 = b_.getDoubleTy();
      Value *p = math(MathFn::Pow, b_.CreateSIToFP(a, f64), b_.CreateSIToFP(c, f64));
      return b_.CreateIntrinsic(Intrinsic::fptosi_sat, {a->getType(), f64}, {p});
    }
    case BinaryOp::And:
      return b_.CreateAnd(a, c);
    case BinaryOp::Or:
      return b_.CreateOr(a, c);
    case BinaryOp::Philox:
      return philox(a, c);
    }
    internal_error(kPass, "unknown binary op");
  }

  /// Word 0 of Philox-4x32-10 (loops/Random.h, whose philox4x32_10 is the
  /// reference): key and counter are i64 (or vectors of them) split into
  /// 32-bit halves, low first; counter words 2 and 3 are 0.
  Value *philox(Value *key, Value *counter) {
    Type *t64 = key->getType(), *t32 = t64->getWithNewBitWidth(32);
    auto lo = [&](Value *v) { return b_.CreateTrunc(v, t32); };
    auto hi = [&](Value *v) { return b_.CreateTrunc(b_.CreateLShr(v, 32), t32); };
    auto k32 = [&](uint32_t v) { return ConstantInt::get(t32, v); };
    Value *c[4] = {lo(counter), hi(counter), k32(0), k32(0)}, *k[2] = {lo(key), hi(key)};
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k[0] = b_.CreateAdd(k[0], k32(0x9E3779B9));
        k[1] = b_.CreateAdd(k[1], k32(0xBB67AE85));
      }
      Value *p0 = b_.CreateMul(b_.CreateZExt(c[0], t64), ConstantInt::get(t64, 0xD2511F53));
      Value *p1 = b_.CreateMul(b_.CreateZExt(c[2], t64), ConstantInt::get(t64, 0xCD9E8D57));
      Value *next[4] = {b_.CreateXor(b_.CreateXor(hi(p1), c[1]), k[0]), lo(p1),
                        b_.CreateXor(b_.CreateXor(hi(p0), c[3]), k[1]), lo(p0)};
      std::copy(next, next + 4, c);
    }
    return b_.CreateZExt(c[0], t64);
  }

  /// Quotient and remainder, truncated (C) or floored (Python). Division by 0
  /// gives 0 and 0 as numpy does, and MIN / -1 wraps, where sdiv would trap.
  std::pair<Value *, Value *> int_divide(Value *a, Value *c, bool floor) {
    Type *ty = a->getType();
    Value *zero = ConstantInt::get(ty, 0), *one = ConstantInt::get(ty, 1);
    Value *by_zero = b_.CreateICmpEQ(c, zero);
    Value *by_minus_one = b_.CreateICmpEQ(c, ConstantInt::getSigned(ty, -1));
    Value *divisor = b_.CreateSelect(b_.CreateOr(by_zero, by_minus_one), one, c);
    Value *q = b_.CreateSDiv(a, divisor);
    Value *r = b_.CreateSRem(a, divisor);
    if (floor) {
      // A nonzero remainder whose sign differs from the divisor's rounds toward -inf.
      Value *adjust = b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, c), zero));
      q = b_.CreateSub(q, b_.CreateZExt(adjust, ty));
      r = b_.CreateSelect(adjust, b_.CreateAdd(r, c), r);
    }
    q = b_.CreateSelect(by_minus_one, b_.CreateNeg(a), q);
    return {b_.CreateSelect(by_zero, zero, q), r};
  }

  /// Floats compare ordered (false on NaN) except `!=`, which is true on NaN.
  Value *compare(CompareOp op, DType operand_dt, Value *a, Value *c) {
    using P = CmpInst::Predicate;
    static const P kFloat[] = {P::FCMP_OLT, P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE, P::FCMP_OEQ, P::FCMP_UNE};
    static const P kSigned[] = {P::ICMP_SLT, P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE, P::ICMP_EQ, P::ICMP_NE};
    static const P kBool[] = {P::ICMP_ULT, P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE, P::ICMP_EQ, P::ICMP_NE};
    const P *table = is_float(operand_dt) ? kFloat : operand_dt == DType::Bool ? kBool : kSigned;
    return b_.CreateCmp(table[int(op)], a, c);
  }

  Value *cast(Value *v, DType from, DType to) {
    if (from == to)
      return v;
    Type *ty = register_type(ctx_, to);
    if (auto *lanes = dyn_cast<VectorType>(v->getType())) // emit_lanes
      ty = VectorType::get(ty, lanes->getElementCount());
    // Nonzero is true; so is NaN, as in numpy.
    if (to == DType::Bool)
      return is_float(from) ? b_.CreateFCmpUNE(v, ConstantFP::get(v->getType(), 0.0))
                            : b_.CreateICmpNE(v, ConstantInt::get(v->getType(), 0));
    if (from == DType::Bool)
      return is_float(to) ? b_.CreateUIToFP(v, ty) : b_.CreateZExt(v, ty);
    if (is_float(from) && is_float(to))
      return b_.CreateFPCast(v, ty);
    if (is_int(from) && is_int(to))
      return b_.CreateSExtOrTrunc(v, ty);
    if (is_int(from))
      return b_.CreateSIToFP(v, ty);
    // Truncates toward zero; saturating (NaN gives 0) where fptosi would be poison.
    return b_.CreateIntrinsic(Intrinsic::fptosi_sat, {ty, v->getType()}, {v});
  }

  /// A math function through an LLVM intrinsic, libm (CPU) or libdevice (GPU).
  Value *math(MathFn f, Value *x, Value *y = nullptr) {
    Type *ty = x->getType();
    if (ty->getScalarType()->isHalfTy()) { // Float16 math is computed in float and rounded once.
      Type *f32 = ty->getWithNewType(b_.getFloatTy());
      Value *r = math(f, b_.CreateFPExt(x, f32), y ? b_.CreateFPExt(y, f32) : nullptr);
      return b_.CreateFPTrunc(r, ty);
    }
    if (device_ == Device::CPU && ty->getScalarType()->isFloatTy()) { // arithmetic that vectorizes
      if (f == MathFn::Exp)
        return inline_expf(b_, x, opts_.fma);
      if (f == MathFn::Log)
        return inline_logf(b_, x, opts_.fma);
      if (f == MathFn::Tanh)
        return inline_tanhf(b_, x, opts_.fma);
      if (f == MathFn::Erf)
        return inline_erff(b_, x, opts_.fma);
    }
    Intrinsic::ID id = Intrinsic::not_intrinsic;
    const char *name = nullptr;
    switch (f) {
    case MathFn::Exp:
      id = Intrinsic::exp, name = "exp";
      break;
    case MathFn::Log:
      id = Intrinsic::log, name = "log";
      break;
    case MathFn::Sin:
      id = Intrinsic::sin, name = "sin";
      break;
    case MathFn::Cos:
      id = Intrinsic::cos, name = "cos";
      break;
    case MathFn::Pow:
      id = Intrinsic::pow, name = "pow";
      break;
    case MathFn::Tanh:
      name = "tanh";
      break;
    case MathFn::Erf:
      name = "erf";
      break;
    // Single instructions on both targets (sqrt is correctly rounded on both).
    case MathFn::Sqrt:
      return b_.CreateUnaryIntrinsic(Intrinsic::sqrt, x);
    case MathFn::Fabs:
      return b_.CreateUnaryIntrinsic(Intrinsic::fabs, x);
    case MathFn::Floor:
      return b_.CreateUnaryIntrinsic(Intrinsic::floor, x);
    }
    if (device_ == Device::CPU && id != Intrinsic::not_intrinsic)
      return y ? b_.CreateBinaryIntrinsic(id, x, y) : b_.CreateUnaryIntrinsic(id, x);
    std::string symbol = std::string(device_ == Device::GPU ? "__nv_" : "") + name + (ty->isFloatTy() ? "f" : "");
    SmallVector<Type *, 2> params(y ? 2 : 1, ty);
    FunctionCallee callee = fn_->getParent()->getOrInsertFunction(symbol, FunctionType::get(ty, params, false));
    return y ? b_.CreateCall(callee, {x, y}) : b_.CreateCall(callee, {x});
  }

  Function *fn_;
  Device device_;
  KernelOptions opts_;
  int allocs_open_ = 0;
  LLVMContext &ctx_;
  IRBuilder<> b_;
  BufferValues buffers_;
  ScopeValues<LVar> vars_;
  Value *constants_;                           // the template's argument table, or null
  std::unordered_map<int, Value *> arguments_; // loaded at the entry, by slot
};

} // namespace

Function *emit_kernel(Module &m, const Kernel &kernel, const std::string &symbol, const KernelOptions &opts) {
  Device device = opts.device;
  LLVMContext &ctx = m.getContext();
  // GPU buffers are in global memory (address space 1): ld.global/st.global.
  PointerType *ptr = PointerType::get(ctx, device == Device::GPU ? 1 : 0);
  SmallVector<Type *, 8> params(kernel.buffers.size(), ptr);
  bool has_arguments = opts.params && opts.params->count > 0;
  GRADC_CHECK(!has_arguments || device == Device::CPU, kPass, "template arguments for a GPU kernel");
  if (has_arguments) // the table of the template's arguments, last
    params.push_back(ptr);
  Function *fn =
      Function::Create(FunctionType::get(Type::getVoidTy(ctx), params, false),
                       device == Device::GPU ? GlobalValue::ExternalLinkage : GlobalValue::InternalLinkage, symbol, m);
  GRADC_CHECK(fn->getName() == symbol, kPass, "kernel symbol " + symbol + " is taken");
  fn->addFnAttr(Attribute::NoUnwind);
  // Each kernel is optimized as a function of its own: inlined into the entry
  // point, thousands of kernels made one function whose optimization time
  // grows faster than linearly.
  if (device == Device::CPU)
    fn->addFnAttr(Attribute::NoInline);
  // A template's function stays one function: LLVM's function specializer
  // (IPSCCP) clones a function for the constant tables its calls pass where
  // the calls are in its module (a module compiled whole, as small ones and
  // --emit's are), undoing the sharing (loops/Templates.h). It leaves a function
  // whose calls may not be duplicated alone; the callers, entry points, are
  // not optimized anyway.
  if (has_arguments)
    fn->addFnAttr(Attribute::NoDuplicate);
  BufferValues buffers;
  std::unordered_set<const Buffer *> shared;
  for (size_t i = 0; i < kernel.buffers.size(); ++i) {
    const Buffer &buf = *kernel.buffers[i];
    GRADC_CHECK(buf.scope != BufferScope::Local && buf.scope != BufferScope::Shared, kPass, "allocated buffer " + buf.name + " passed to kernel");
    Argument *arg = fn->getArg(i);
    arg->setName(buf.name);
    // Buffers never alias (LoopIR.h), but a pair the plan let share bytes,
    // and the entry point checked their alignment.
    if (!shares_bytes(kernel, buf))
      arg->addAttr(Attribute::NoAlias);
    else
      shared.insert(&buf);
    arg->addAttr(Attribute::getWithAlignment(ctx, Align(64)));
    GRADC_CHECK(buffers.emplace(&buf, arg), kPass, "kernel " + kernel.name + " lists buffer " + buf.name + " twice");
  }
  Value *constants = nullptr;
  if (has_arguments) {
    Argument *arg = fn->getArg(unsigned(kernel.buffers.size()));
    arg->setName("constants");
    arg->addAttr(Attribute::NoAlias);
    arg->addAttr(Attribute::ReadOnly);
    constants = arg;
  }
  KernelOptions with_shared = opts;
  with_shared.shared = &shared;
  KernelEmitter(fn, with_shared, std::move(buffers), constants).emit(kernel.body);
  return fn;
}

namespace {

/// Declares the exported `int32_t symbol(void *const *inputs, void *const
/// *outputs, void *workspace[, void *stream])` of the ABI (SPEC §8).
Function *create_entry(Module &m, const std::string &symbol, bool with_stream) {
  LLVMContext &ctx = m.getContext();
  SmallVector<Type *, 4> params(with_stream ? 4 : 3, PointerType::get(ctx, 0));
  Function *fn = Function::Create(FunctionType::get(Type::getInt32Ty(ctx), params, false), GlobalValue::ExternalLinkage,
                                  symbol, m);
  GRADC_CHECK(fn->getName() == symbol, kPass, "two functions export the symbol " + symbol);
  fn->addFnAttr(Attribute::NoUnwind);
  // The entry point only checks arguments and calls the kernels (which are
  // functions of their own): optimizing its straight-line code bought
  // nothing and cost most of -O2's time on models with thousands of
  // parameters and kernels (the SLP vectorizer is superlinear in it).
  fn->addFnAttr(Attribute::OptimizeNone);
  fn->addFnAttr(Attribute::NoInline);
  const char *names[] = {"inputs", "outputs", "workspace", "stream"};
  for (unsigned i = 0; i < params.size(); ++i)
    fn->getArg(i)->setName(names[i]);
  return fn;
}

} // namespace

HostModule create_host_module(const LoweredModule &module, const std::string &prefix, LLVMContext &ctx,
                              const TargetMachine &tm, bool with_stream) {
  HostModule host{std::make_unique<Module>(prefix, ctx), {}};
  host.module->setTargetTriple(tm.getTargetTriple().str());
  host.module->setDataLayout(tm.createDataLayout());
  for (const LoweredFunction &fn : module.functions)
    host.entries.push_back(create_entry(*host.module, prefix + "_" + fn.name, with_stream));
  return host;
}

BufferValues emit_entry_prologue(IRBuilder<> &b, const LoweredFunction &fn) {
  Function *entry = b.GetInsertBlock()->getParent();
  LLVMContext &ctx = entry->getContext();
  Type *ptr = b.getPtrTy();
  auto return_block = [&](int32_t code, const char *name) {
    BasicBlock *bb = BasicBlock::Create(ctx, name, entry);
    IRBuilder<>(bb).CreateRet(b.getInt32(code));
    return bb;
  };
  BasicBlock *null_bb = return_block(1, "null_argument");
  BasicBlock *misaligned_bb = return_block(2, "misaligned_argument");
  auto leave_if = [&](Value *cond, BasicBlock *target) {
    BasicBlock *next = BasicBlock::Create(ctx, "checked", entry);
    b.CreateCondBr(cond, target, next);
    b.SetInsertPoint(next);
  };

  Value *inputs = entry->getArg(0), *outputs = entry->getArg(1), *workspace = entry->getArg(2);
  // The pointer arrays themselves are checked before they are read.
  Value *arrays_null = b.getFalse();
  if (!fn.inputs.empty())
    arrays_null = b.CreateOr(arrays_null, b.CreateIsNull(inputs));
  if (!fn.outputs.empty())
    arrays_null = b.CreateOr(arrays_null, b.CreateIsNull(outputs));
  leave_if(arrays_null, null_bb);

  BufferValues values;
  std::vector<Value *> checked;
  auto load_io = [&](const BufferPtr &buf, Value *array) {
    GRADC_CHECK(buf->io_index >= 0, kPass, "buffer " + buf->name + " has no io_index");
    Value *p = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, array, buf->io_index), buf->name);
    values[buf.get()] = p;
    if (buf->bytes() > 0) // a tensor with no elements may be NULL (nothing reads it)
      checked.push_back(p);
  };
  for (const BufferPtr &buf : fn.inputs)
    load_io(buf, inputs);
  for (const BufferPtr &buf : fn.outputs)
    load_io(buf, outputs);
  // The workspace may be null only when the function needs none.
  if (fn.workspace_bytes > 0)
    checked.push_back(workspace);
  for (const BufferPtr &buf : fn.arena) {
    GRADC_CHECK(buf->offset >= 0 && buf->offset % 64 == 0 && buf->offset + buf->bytes() <= fn.workspace_bytes, kPass,
                "arena buffer " + buf->name + " has a bad offset");
    values[buf.get()] = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), workspace, buf->offset, buf->name);
  }
  for (const BufferPtr &buf : fn.hosted) { // in a result's bytes
    Value *host = buf->host ? values.lookup(buf->host.get()) : nullptr;
    GRADC_CHECK(host && buf->host->bytes() == buf->bytes(), kPass,
                "buffer " + buf->name + " is placed in no result of its size");
    values[buf.get()] = host;
  }

  Value *any_null = b.getFalse(), *any_misaligned = b.getFalse();
  for (Value *p : checked) {
    any_null = b.CreateOr(any_null, b.CreateIsNull(p));
    Value *low_bits = b.CreateAnd(b.CreatePtrToInt(p, b.getInt64Ty()), 63);
    any_misaligned = b.CreateOr(any_misaligned, b.CreateICmpNE(low_bits, b.getInt64(0)));
  }
  leave_if(any_null, null_bb);
  leave_if(any_misaligned, misaligned_bb);
  return values;
}

std::vector<Value *> kernel_arguments(const BufferValues &buffers, const Kernel &kernel) {
  std::vector<Value *> args;
  for (const BufferPtr &buf : kernel.buffers) {
    Value *p = buffers.lookup(buf.get());
    GRADC_CHECK(p, kPass, "kernel " + kernel.name + " uses buffer " + buf->name + " its function lacks");
    args.push_back(p);
  }
  return args;
}

std::string unique_symbol(const Module &m, const std::string &symbol) {
  std::string name = symbol;
  for (int n = 1; m.getNamedValue(name); ++n)
    name = symbol + "_" + std::to_string(n);
  return name;
}

} // namespace gradc::codegen
