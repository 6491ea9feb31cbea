//===- LoopIR.h - the loop-level IR that codegen consumes -----------------===//
//
// After fusion every kernel of a function is lowered to a loop nest over flat,
// dense, row-major buffers. This is the IR a person reads with
// `--dump-ir=loops` and the only input of the LLVM code generators.
//
// Semantics:
//  * Buffers never alias. Input/InOut/Output buffers come from the caller; Arena
//    buffers live at `offset` inside the caller's workspace (planned by
//    plan_memory, lower/Passes.h); Local buffers are per-iteration scratch
//    (registers or stack) declared by an Alloc statement; Shared buffers are
//    a GPU block's scratch (CUDA shared memory), declared by an Alloc right
//    inside a BlockIdx loop, one copy per block. The one exception:
//    two buffers a kernel lists in Kernel::overwrites may share bytes, the
//    one's last reader being the other's first writer, element by element:
//    two arena buffers at one offset, or an arena buffer in an Output's bytes
//    (Buffer::host).
//  * Index arithmetic is Int64. Loads and stores take a flat element index.
//  * Loop kinds. Operators emit schedule-neutral nests: a Spatial loop's
//    iterations are independent (a data-parallel axis), a Reduce loop's are
//    not (a reduction axis, or a scatter whose order matters). The schedule
//    passes (schedule_cpu and bind_gpu_threads, lower/Passes.h) turn them into
//    what the machine runs: a Parallel loop is split across the thread pool;
//    a Vectorized loop is the innermost loop of a nest and is vectorized; an
//    Unrolled loop is emitted once per index; Serial runs in order;
//    BlockIdx/ThreadIdx loops are bound to CUDA blocks/threads (the extent is
//    the grid/block size). A ScanTime loop is the serial time loop of a scan
//    (iteration t reads what t-1 wrote). Strategies with a hand schedule
//    (matrix products) emit the scheduled kinds directly.
//  * GPU kernels. A bound kernel is `for b in grid (BlockIdx)`, then the
//    block's Shared allocations, then `for t in block (ThreadIdx)`: every
//    thread t of every block b runs the thread loop's body once. A Barrier
//    statement waits until every thread of the block has reached it (and
//    makes their stores to shared and global memory visible); a Shuffle
//    expression is `value` as evaluated by another thread of the same warp
//    (lane `lane` mod the warp size), every thread of the warp evaluating it
//    together. Both must be reached by every thread alike: never under a
//    condition or loop that depends on the thread (loops/Verify.h checks).
//    lower/SimulateGpu.cpp runs such a kernel on the CPU by these rules.
//    A grid of 2 or 3 dimensions is a chain of nested BlockIdx loops, each
//    the whole body of the one around it, the innermost blockIdx.x, the one
//    around it .y, then .z; a block's threads likewise a chain of ThreadIdx
//    loops (bound_dim). A thread's linear index, which decides its warp and
//    lane, runs x fastest. A lane-wise Vectorized loop (Lanes.h) in a thread
//    is its vector loads and stores (ld.global.v4: 16 bytes where the index
//    and the buffer are aligned so).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Type.h"

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace gradc {

enum class BufferScope {
  Input,  // a parameter of the function, read-only
  InOut,  // a parameter the function updates in place: read, then one kernel writes a result leaf into it (InPlace.h)
  Output, // a leaf of the result, written by the function
  Arena,  // an intermediate at `offset` in the workspace
  Local,  // scratch declared by an Alloc statement
  Shared, // a GPU block's scratch, declared by an Alloc in a BlockIdx loop (CUDA shared memory)
};

/// Provenance: the top-level binding of the tensor function whose lowering
/// made a kernel or a buffer (its index in the body, and its Var's name);
/// the status word's is the binding that asked for it first. Unset (-1, "")
/// for the parameters and for what the function's result makes.
struct Origin {
  int binding = -1;
  std::string var;
  bool set() const { return binding >= 0; }
};

struct Buffer {
  std::string name;
  DType dtype;
  Shape shape;
  BufferScope scope;
  int64_t offset = -1; // Arena: byte offset in the workspace (64-aligned)
  int io_index = -1;   // Input: parameter index; Output: leaf index
  Origin origin;       // the binding whose value (or kernel's scratch) this holds
  /// An Arena buffer the plan placed in an Output's bytes instead of the
  /// workspace (LoweredFunction::hosted): its last reader writes that output
  /// over it (Kernel::overwrites), and nothing touches the output before.
  std::shared_ptr<Buffer> host;
  int64_t numel() const { return num_elements(shape); }
  int64_t bytes() const { return numel() * dtype_bytes(dtype); }
};
using BufferPtr = std::shared_ptr<Buffer>;

struct LVar {
  std::string name;
};
using LVarPtr = std::shared_ptr<LVar>;

enum class LExprKind {
  IntImm,   // integer or bool constant of `dtype`
  FloatImm, // floating-point constant of `dtype`
  Var,      // a loop variable (Int64)
  Load,     // buffer[operands[0]]
  Unary,    // uop(operands[0])
  Binary,   // bop(operands[0], operands[1]), equal dtypes
  Compare,  // cop(operands[0], operands[1]) -> Bool
  Select,   // operands[0] ? operands[1] : operands[2]
  Cast,     // operands[0] converted to dtype
  MulAdd,   // operands[0] * operands[1] + operands[2], equal float dtypes, rounded once (fused)
  Shuffle,  // operands[0] as evaluated by lane operands[1] (Int64, mod the warp size) of this warp
};

/// RoundTf32: a float32 rounded to TensorFloat-32 (10 mantissa bits, the low
/// 13 of float32's zero), to nearest with ties away from zero (cvt.rna.tf32);
/// infinities and NaNs as they are. What tensor cores multiply (Mma).
enum class UnaryOp { Neg, Exp, Log, Sqrt, Tanh, Abs, Erf, Sin, Cos, RoundTf32 };
/// Philox: random bits, word 0 of Philox-4x32-10 with key operands[0] and
/// counter operands[1] (Int64 each, split into 32-bit halves, low first),
/// an Int64 in [0, 2^32) (loops/Random.h).
enum class BinaryOp { Add, Sub, Mul, Div, Min, Max, Pow, FloorDiv, FloorMod, And, Or, Philox };
enum class CompareOp { LT, LE, GT, GE, EQ, NE };

struct LExpr;
using LExprPtr = std::shared_ptr<const LExpr>;

struct LExpr {
  LExprKind kind;
  DType dtype;
  int64_t ivalue = 0;
  double fvalue = 0;
  LVarPtr var;
  BufferPtr buffer;
  UnaryOp uop = UnaryOp::Neg;
  BinaryOp bop = BinaryOp::Add;
  CompareOp cop = CompareOp::LT;
  std::vector<LExprPtr> operands;
};

enum class ForKind {
  Spatial, // unscheduled: independent iterations
  Reduce,  // unscheduled: iterations in order
  Serial,
  Parallel,
  Vectorized,
  Unrolled,
  ScanTime,
  BlockIdx,
  ThreadIdx,
};
/// Whether a schedule pass has yet to decide this loop's kind.
inline bool unscheduled(ForKind k) { return k == ForKind::Spatial || k == ForKind::Reduce; }
const char *for_kind_name(ForKind kind);

enum class StmtKind {
  For,   // for var in [0, extent): body
  Store, // buffer[index] = value
  Seq,   // stmts in order
  If,    // if cond: then_body else else_body (else may be null)
  Alloc, // declare Local or Shared `buffer` for the scope of body
  Barrier, // wait for every thread of the GPU block (__syncthreads)
  /// A warp's tensor-core product (mma.sync m16n8k8, tf32 operands, float32
  /// accumulators; sm_80 and later): the warp's 32 lanes together compute
  /// D = A B + C for A 16 x 8, B 8 x 8, C and D 16 x 8, each lane holding
  /// its fragment as PTX lays it out, with g = lane / 4, q = lane mod 4:
  /// inputs a0..a3 = A[g][q], A[g+8][q], A[g][q+4], A[g+8][q+4] (tf32 values:
  /// RoundTf32), b0, b1 = B[q][g], B[q+4][g], c0..c3 = C[g][2q], C[g][2q+1],
  /// C[g+8][2q], C[g+8][2q+1]; the lane's D (the same places as its C) is
  /// stored at buffer[index + 0..3] (a Local float32 buffer). Reached by
  /// every thread alike, as a barrier is.
  Mma,
};

struct Stmt;
using StmtPtr = std::shared_ptr<const Stmt>;

struct Stmt {
  StmtKind kind;
  LVarPtr var;        // For
  int64_t extent = 0; // For
  ForKind for_kind = ForKind::Serial;
  StmtPtr body;             // For, If (then), Alloc
  StmtPtr else_body;        // If
  BufferPtr buffer;         // Store, Alloc
  LExprPtr index;           // Store
  LExprPtr value;           // Store; If condition
  std::vector<StmtPtr> seq; // Seq
  std::vector<LExprPtr> inputs; // Mma: a0..a3, b0, b1, c0..c3
};

/// A CUDA launch's grid or block extents: x, y, z (x the innermost bound loop).
struct Dim3 {
  int64_t x = 1, y = 1, z = 1;
  int64_t count() const { return x * y * z; }
  /// The extent of dimension d (0 = x, 1 = y, 2 = z).
  int64_t &operator[](int d) { return d == 0 ? x : d == 1 ? y : z; }
  int64_t operator[](int d) const { return d == 0 ? x : d == 1 ? y : z; }
  /// Only x is more than 1.
  bool flat() const { return y == 1 && z == 1; }
  bool operator==(const Dim3 &) const = default;
};
/// The dimensions of a chain of nested launches: at most 3.
constexpr int kMaxLaunchDims = 3;

/// Of a BlockIdx or ThreadIdx loop: which dimension it binds (0 = x, 1 = y,
/// 2 = z): how many loops of its kind are nested directly inside it, each
/// the whole body of the one before.
int bound_dim(const Stmt &loop);
/// The extents of the chain of loops of `loop`'s kind that starts at `loop`
/// (outermost first in the IR, x the innermost).
Dim3 bound_extents(const Stmt &loop);
/// The innermost loop of that chain.
const Stmt &innermost_bound(const Stmt &loop);

/// One kernel: a loop nest reading and writing the listed buffers.
struct Kernel {
  std::string name;
  std::vector<BufferPtr> buffers; // every non-Local buffer the body touches
  StmtPtr body;
  // GPU launch shape, set by GPU binding (1 x 1 x 1 when the kernel is not bound).
  Dim3 grid;
  Dim3 block;
  Origin origin; // the binding it computes (a scan's binding: all of its kernels)
  /// (buf, over): this kernel may store buf's values over over's bytes
  /// (InPlace.h's overwrite_violation holds). Memory planning lists every
  /// such pair and gives the two one place where over's last reader and
  /// buf's first writer is this kernel.
  std::vector<std::pair<BufferPtr, BufferPtr>> overwrites;
};

/// Whether the memory plan gave `a` and `b` the same bytes: arena buffers at
/// one offset, or buffers in one output (Buffer::host; the output itself).
bool same_place(const Buffer &a, const Buffer &b);
/// Whether `b` shares its bytes with another buffer of `k`: a pair of
/// k.overwrites that the memory plan placed in the same bytes.
bool shares_bytes(const Kernel &k, const Buffer &b);

/// The largest workspace a function may plan (2^50 bytes). Memory planning
/// saturates just past it, and the pipeline reports a located error.
constexpr int64_t kMaxWorkspaceBytes = int64_t(1) << 50;

/// A kernel-level loop (the serial time loop of a scan): kernels [first,
/// last) of the function run `extent` times, in order, before the kernel
/// after them runs. The kernels inside keep their state in buffers, so every
/// buffer a loop's kernels touch is live for the whole loop (buffer_lifetimes)
/// and a per-step buffer is the same memory each step; a kernel reads the
/// step from a buffer that kernels of the loop maintain (one sets it before
/// the loop, one advances it last in the loop). Loops of a function are
/// disjoint or nested, and none is empty (the verifier checks).
///
/// A loop with `trips` runs a different number of times each time it is
/// entered: trips[i % n] (0 included) the i-th time over the whole call, n =
/// trips.size(); `extent` is then the largest. What a schedule fixed at
/// compile time needs (binomial checkpointing: how far each reverse step
/// recomputes). The table is one run of the operator that made the loop,
/// which enters it n times; a loop around that operator (a scan in a scan's
/// body) runs it again, and the table restarts with it. Codegen reads the
/// table from a constant, through a cursor that wraps around.
struct TimeLoop {
  size_t first = 0, last = 0;
  int64_t extent = 1;
  std::vector<int64_t> trips;
  bool streamed() const { return !trips.empty(); }
};

/// A lowered function: what the ABI entry point `PREFIX_NAME` executes.
struct LoweredFunction {
  std::string name;
  std::vector<BufferPtr> inputs;  // in parameter order
  std::vector<BufferPtr> outputs; // the result leaves written into buffers of their own (Output), depth-first
  /// Every result leaf, depth-first: its Output buffer, or the InOut input
  /// it is written into (FunctionAttrs::inplace).
  std::vector<BufferPtr> results;
  std::vector<BufferPtr> arena; // intermediates with planned offsets
  /// Intermediates that memory planning placed in a result's bytes (Buffer::host).
  std::vector<BufferPtr> hosted;
  int64_t workspace_bytes = 0; // the planned peak: arena size
  /// An arena buffer of kStatusWords int64 that kernels may set when an input
  /// is invalid (an out-of-range class index): zeroed by the entry point
  /// first, live throughout, and if status[0] != 0 the entry returns it.
  /// Null when no kernel reports.
  BufferPtr status;
  std::vector<Kernel> kernels; // executed in order, the ranges of time loops repeated
  std::vector<TimeLoop> time_loops;
  /// Provenance: per top-level binding of the tensor function, the buffers
  /// of its Var's leaves (a tuple's aliases included).
  std::vector<std::vector<BufferPtr>> binding_leaves;
};

/// Walks a function's execution structure: enter(loop) before the first
/// kernel of each time loop (an outer loop before the loops it holds),
/// kernel(k) for each kernel in order, leave(loop) after the last kernel of
/// each loop (an inner loop first). Pre: the loops are well nested.
void walk_schedule(const LoweredFunction &fn, const std::function<void(const TimeLoop &)> &enter,
                   const std::function<void(size_t kernel)> &kernel,
                   const std::function<void(const TimeLoop &)> &leave);

/// status = {code, offending value, its flat position, the limit it broke}.
constexpr int64_t kStatusWords = 4;
/// The ABI status of an index input outside its range (codegen/Codegen.h).
constexpr int32_t kStatusIndexOutOfRange = 5;
/// Only in a simulated GPU program (lower/Passes.h: simulate_gpu): two
/// threads of a block raced on shared memory, a bug of the schedule.
constexpr int32_t kStatusGpuRace = 6;

struct LoweredModule {
  std::vector<LoweredFunction> functions;
};

// Constructors (checked: operand dtypes must agree).
/// Whether two expressions are the same tree (the same variables and buffers).
bool same_expr(const LExprPtr &a, const LExprPtr &b);

LExprPtr int_imm(int64_t v, DType dt = DType::Int64);
LExprPtr float_imm(double v, DType dt);
LExprPtr var_ref(const LVarPtr &v);
LExprPtr load(const BufferPtr &buf, LExprPtr index);
LExprPtr unary(UnaryOp op, LExprPtr a);
LExprPtr binary(BinaryOp op, LExprPtr a, LExprPtr b);
LExprPtr compare(CompareOp op, LExprPtr a, LExprPtr b);
LExprPtr select(LExprPtr c, LExprPtr a, LExprPtr b);
/// a * b + c with a single rounding (an FMA instruction): floats only.
LExprPtr mul_add(LExprPtr a, LExprPtr b, LExprPtr c);
LExprPtr cast(DType dt, LExprPtr a);
/// `value` as lane `lane` of the warp evaluates it (GPU kernels only).
LExprPtr shuffle(LExprPtr value, LExprPtr lane);
StmtPtr for_loop(LVarPtr var, int64_t extent, ForKind kind, StmtPtr body);
StmtPtr store(const BufferPtr &buf, LExprPtr index, LExprPtr value);
StmtPtr seq(std::vector<StmtPtr> stmts);
StmtPtr if_then(LExprPtr cond, StmtPtr then_body, StmtPtr else_body = nullptr);
StmtPtr alloc(const BufferPtr &local, StmtPtr body);
StmtPtr barrier();
/// The warp's tensor-core product (StmtKind::Mma): inputs a0..a3, b0, b1, c0..c3 (float32 each).
StmtPtr mma_tf32(const BufferPtr &d, LExprPtr index, std::vector<LExprPtr> inputs);
/// The number of inputs of an Mma statement.
constexpr size_t kMmaInputs = 10;

/// The first and last kernel (indices into fn.kernels) that uses each
/// buffer; the status buffer is live throughout (the entry point zeroes it
/// before the first kernel and reads it after the last). A buffer that a
/// time loop's kernels touch is live from the loop's first kernel to its
/// last at least: the next step runs them again.
std::unordered_map<const Buffer *, std::pair<size_t, size_t>> buffer_lifetimes(const LoweredFunction &fn);

/// A static estimate of the scalar operations `s` performs (loop extents
/// times stores and branches, a store's math functions and divisions
/// weighing several), for cost rules.
double estimated_work(const Stmt &s);

/// The fewest iterations of Parallel loop `loop` that a chunk of the thread
/// pool runs: enough for about 16 thousand operations (estimated_work).
int64_t parallel_grain(const Stmt &loop);

/// The bytes of Local buffers a function's kernels put on the stack of the
/// thread that runs them (the caller, and each pool worker): every Alloc of
/// a kernel at once (codegen places them all in the entry block), for the
/// kernel that needs most. Frames and spills come on top.
int64_t stack_bytes(const LoweredFunction &fn);

/// The bytes of the Shared buffers a GPU kernel allocates (its static shared
/// memory per block).
int64_t shared_bytes(const Kernel &k);

/// `tvm.lower(simple_mode=True)`-style text of a module (SPEC §9 `loops`).
std::string print_loops(const LoweredModule &module);

} // namespace gradc
