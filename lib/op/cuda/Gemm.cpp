//===- cuda/Gemm.cpp - matrix products tiled through shared memory --------===//
//
// See Cuda.h (gemm_cuda_tiled). A block of 256 threads (16 x 16) computes one
// tile of C: 128 x 128 where both M and N reach it, else 64 x 64; the grid's
// x and y are the tiles along N and M (a batch, GPU binding's z). Its
// threads walk K in slices (8 deep for the large tile, 16 for the small),
// each slice of A (tile rows x depth) and of B (depth x tile columns) copied
// into shared memory, four elements per thread and operand; a barrier; then
// each thread multiplies from shared memory into its register tile (8 x 8 or
// 4 x 4). The next slice's elements are loaded into registers before the
// current slice is multiplied, and stored into shared memory after the
// barrier that ends it: the global loads' latency overlaps the FMAs (double
// buffering through registers). Elements past M, N or K are zeros in shared
// memory and never stored.
//
// Vector accesses (LoopIR.h: a lane-wise Vectorized loop, 16-byte aligned
// where the index says so; ld.global.v4.f32 and friends):
//  * a thread's four elements of an operand's slice are adjacent along the
//    operand's contiguous axis, where that axis's extent is a multiple of 4
//    (then the four are in or out of range together) and the operand is a
//    plain read at unit stride (lane_wise): one vector load. Otherwise (an
//    implicit im2col's gather, an odd extent) element r of thread t is
//    thread + 256r, adjacent threads reading adjacent elements, each lane
//    clamped and guarded on its own.
//  * a thread's rows of the register tile are 4 adjacent rows in each 64-row
//    half of the block's tile (ty * 4 + 64h), its columns likewise (tx * 4 +
//    64h): each step of a slice reads the thread's A and B values as vectors
//    from shared memory, and the warp's stores of C are 16 threads x 4
//    adjacent columns (vectors where N is a multiple of 4).
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "gradc/loops/Lanes.h"

namespace gradc {
namespace {

constexpr int64_t kThreads = 256, kThreadRows = 16, kThreadCols = 16; // 16 x 16 threads
constexpr int64_t kPerThread = 4; // elements of each operand's slice a thread copies
constexpr int64_t kVec = 4;       // lanes of a vector access (16 bytes of float32)

/// A tile configuration: the block's tile of C and the depth of a K slice.
struct Tiles {
  int64_t m, n, k;
  constexpr int64_t reg_m() const { return m / kThreadRows; }
  constexpr int64_t reg_n() const { return n / kThreadCols; }
};
constexpr Tiles kLarge{128, 128, 8}, kSmall{64, 64, 16};
static_assert(kLarge.m * kLarge.k == kPerThread * kThreads && kLarge.k * kLarge.n == kPerThread * kThreads);
static_assert(kSmall.m * kSmall.k == kPerThread * kThreads && kSmall.k * kSmall.n == kPerThread * kThreads);
static_assert(kPerThread == kVec && kSmall.k % kVec == 0 && kLarge.k % kVec == 0 && kSmall.reg_m() % kVec == 0 &&
              kSmall.reg_n() % kVec == 0);

LExprPtr lt(LExprPtr a, int64_t b) { return compare(CompareOp::LT, std::move(a), int_imm(b)); }
LExprPtr clamp(LExprPtr a, int64_t extent) { return binary(BinaryOp::Min, std::move(a), int_imm(extent - 1)); }
LExprPtr div(LExprPtr a, int64_t b) { return binary(BinaryOp::FloorDiv, std::move(a), int_imm(b)); }
LExprPtr mod(LExprPtr a, int64_t b) { return binary(BinaryOp::FloorMod, std::move(a), int_imm(b)); }

/// Whether a product has enough outputs for a tile.
bool tiles(const Gemm &g) { return g.M >= 32 && g.N >= 32 && g.K >= 1; }

/// One operand's slice as the threads copy it: `width` positions (of M for
/// A, of N for B) by the slice's depth, its fastest axis the operand's
/// contiguous one (k_fastest: K).
struct Operand {
  int64_t width, depth;
  bool k_fastest;
  int64_t extent_m, extent_k; // the operand's extents: M (or N) and K
  /// value(i, kk): the operand's element at position i, depth kk, in range.
  std::function<LExprPtr(const LExprPtr &i, const LExprPtr &kk)> value;
};

/// The slice's element of thread `th`, lane r (a vector group: 4th + r;
/// else th + 256r): its position and depth within the slice.
struct Place {
  LExprPtr i, kk;
};
Place place(const Operand &o, const LExprPtr &th, const LExprPtr &r, bool grouped) {
  if (!grouped) {
    LExprPtr e = add(th, mul(r, int_imm(kThreads)));
    return o.k_fastest ? Place{div(e, o.depth), mod(e, o.depth)} : Place{mod(e, o.width), div(e, o.width)};
  }
  // The group's first element is 4th, then the lane along the fastest axis
  // (written so that interval arithmetic sees the group end inside the row).
  const int64_t groups = (o.k_fastest ? o.depth : o.width) / kVec; // per row of the fastest axis
  LExprPtr along = add(mul(mod(th, groups), int_imm(kVec)), r), across = div(th, groups);
  return o.k_fastest ? Place{across, along} : Place{along, across};
}

/// The statement that loads thread `th`'s elements of an operand's slice at
/// (i0, k0) into regs[at + r]: one lane-wise vector loop where the operand
/// allows (`grouped` set), else a lane per element, each guarded.
StmtPtr fetch_operand(KernelCtx &k, const Operand &o, const LExprPtr &th, const LExprPtr &i0, const LExprPtr &k0,
                      const BufferPtr &regs, int64_t at, DType acc, bool &grouped) {
  LExprPtr zero = constant_of(0, acc);
  const int64_t fast = o.k_fastest ? o.extent_k : o.extent_m;
  if (fast % kVec == 0) {
    LVarPtr lane = k.var("lane");
    LExprPtr r = var_ref(lane);
    Place base = place(o, th, int_imm(0), true);
    LExprPtr i = add(i0, base.i), kk = add(k0, base.kk);
    // In or out of range together: the group starts at a multiple of 4 of an
    // extent that is one. The group's start clamped, so that lanes stay in.
    LExprPtr in = both(lt(i, o.extent_m), lt(kk, o.extent_k));
    LExprPtr vi = o.k_fastest ? clamp(i, o.extent_m) : add(binary(BinaryOp::Min, i, int_imm(fast - kVec)), r);
    LExprPtr vk = o.k_fastest ? add(binary(BinaryOp::Min, kk, int_imm(fast - kVec)), r) : clamp(kk, o.extent_k);
    StmtPtr loop = for_loop(lane, kVec, ForKind::Vectorized,
                            store(regs, add(int_imm(at), r), select(in, o.value(vi, vk), zero)));
    if (lane_wise(*loop)) {
      grouped = true;
      return loop;
    }
  }
  grouped = false;
  std::vector<StmtPtr> out;
  for (int64_t r = 0; r < kPerThread; ++r) {
    Place p = place(o, th, int_imm(r), false);
    LExprPtr i = add(i0, p.i), kk = add(k0, p.kk);
    out.push_back(store(regs, int_imm(at + r), select(both(lt(i, o.extent_m), lt(kk, o.extent_k)),
                                                     o.value(clamp(i, o.extent_m), clamp(kk, o.extent_k)), zero)));
  }
  return seq(std::move(out));
}

/// Thread `th`'s elements regs[at + r] into the slice in shared memory, at
/// [kk * width + i]: a vector store where the group runs along i.
StmtPtr deposit_operand(KernelCtx &k, const Operand &o, const LExprPtr &th, const BufferPtr &tile,
                        const BufferPtr &regs, int64_t at, bool grouped) {
  LVarPtr lane = k.var("lane");
  LExprPtr r = var_ref(lane);
  Place p = place(o, th, r, grouped);
  ForKind kind = grouped && !o.k_fastest ? ForKind::Vectorized : ForKind::Unrolled;
  return for_loop(lane, kPerThread, kind,
                  store(tile, add(mul(p.kk, int_imm(o.width)), p.i), load(regs, add(int_imm(at), r))));
}

/// Of a thread's registers h * 4 + lane along one axis: the tile's row (or
/// column) 64h + 4 t_axis + lane.
LExprPtr tile_offset(const LExprPtr &h, const LExprPtr &t_axis, const LExprPtr &lane) {
  return add(add(mul(h, int_imm(kThreadRows * kVec)), mul(t_axis, int_imm(kVec))), lane);
}

/// The register tile c (reg_m x reg_n) into C where it lies inside: each
/// row's 4 adjacent columns a vector store where N is a multiple of 4 and
/// the output is written at unit stride, else a column at a time.
StmtPtr store_tile(KernelCtx &k, const Gemm &g, int64_t reg_m, int64_t reg_n, const BufferPtr &c, const LExprPtr &m0,
                   const LExprPtr &n0, const LExprPtr &ty, const LExprPtr &tx) {
  LVarPtr i = k.var("i"), h = k.var("h"), lane = k.var("lane");
  LExprPtr iv = var_ref(i), hv = var_ref(h), r = var_ref(lane);
  LExprPtr m = add(m0, tile_offset(div(iv, kVec), ty, mod(iv, kVec)));
  LExprPtr nb = add(n0, tile_offset(hv, tx, int_imm(0)));
  LExprPtr value = cast(g.dtype, load(c, add(mul(iv, int_imm(reg_n)), add(mul(hv, int_imm(kVec)), r))));
  // The position clamped too (a no-op under the guard): in bounds by the
  // verifier's interval arithmetic, which knows no guard of a sum.
  StmtPtr row;
  if (g.N % kVec == 0) {
    LExprPtr n = add(binary(BinaryOp::Min, nb, int_imm(g.N - kVec)), r);
    StmtPtr lanes = for_loop(lane, kVec, ForKind::Vectorized, g.store(clamp(m, g.M), n, value));
    if (lane_wise(*lanes))
      row = if_then(both(lt(m, g.M), lt(nb, g.N)), lanes);
  }
  if (!row) {
    LExprPtr n = add(nb, r);
    row = for_loop(lane, kVec, ForKind::Unrolled,
                   if_then(both(lt(m, g.M), lt(n, g.N)), g.store(clamp(m, g.M), clamp(n, g.N), value)));
  }
  return for_loop(i, reg_m, ForKind::Unrolled, for_loop(h, reg_n / kVec, ForKind::Unrolled, row));
}

} // namespace

StmtPtr gemm_cuda_tiled(KernelCtx &k, const Gemm &g) {
  if (!tiles(g))
    return gemm_nest(k, g);
  const Tiles t = g.M >= kLarge.m && g.N >= kLarge.n ? kLarge : kSmall;
  const DType acc = g.acc();
  const int64_t tiles_n = (g.N + t.n - 1) / t.n, tiles_m = (g.M + t.m - 1) / t.m;
  const int64_t steps = (g.K + t.k - 1) / t.k;
  GRADC_CHECK(t.k * (t.m + t.n) * dtype_bytes(acc) <= k.target.shared_memory_bytes, "cuda gemm",
              "the product's tiles exceed the target's shared memory");

  auto a_tile = std::make_shared<Buffer>(Buffer{"a_tile", acc, {t.k * t.m}, BufferScope::Shared});
  auto b_tile = std::make_shared<Buffer>(Buffer{"b_tile", acc, {t.k * t.n}, BufferScope::Shared});
  BufferPtr c = k.local("c_tile", acc, t.reg_m() * t.reg_n());
  BufferPtr next = k.local("next_slices", acc, 2 * kPerThread); // A's four, then B's
  BufferPtr a_frag = k.local("a_frag", acc, t.reg_m()), b_frag = k.local("b_frag", acc, t.reg_n());
  // A grid of tiles_n x tiles_m blocks of 16 x 16 threads; th, the
  // thread's linear index, decides what it copies.
  LVarPtr tile_m = k.var("tile_m"), tile_n = k.var("tile_n"), thread_y = k.var("ty"), thread_x = k.var("tx");
  LVarPtr step = k.var("step");
  LExprPtr s = var_ref(step), ty = var_ref(thread_y), tx = var_ref(thread_x);
  LExprPtr m0 = mul(var_ref(tile_m), int_imm(t.m)), n0 = mul(var_ref(tile_n), int_imm(t.n));
  LExprPtr th = add(mul(ty, int_imm(kThreadCols)), tx);

  Operand a_op{t.m, t.k, g.a_contiguous_in_k, g.M, g.K,
               [&](const LExprPtr &m, const LExprPtr &kk) { return g.a_acc(m, kk); }};
  Operand b_op{t.n, t.k, g.b_contiguous_in_k, g.N, g.K,
               [&](const LExprPtr &n, const LExprPtr &kk) { return g.b_acc(kk, n); }};
  bool a_grouped = false, b_grouped = false;
  // Loads the slice starting at k0 into the registers; stores them into shared memory.
  auto fetch = [&](const LExprPtr &k0) {
    return seq({fetch_operand(k, a_op, th, m0, k0, next, 0, acc, a_grouped),
                fetch_operand(k, b_op, th, n0, k0, next, kPerThread, acc, b_grouped)});
  };
  StmtPtr first = fetch(int_imm(0)); // decides a_grouped and b_grouped
  auto deposit = [&]() {
    return seq({deposit_operand(k, a_op, th, a_tile, next, 0, a_grouped),
                deposit_operand(k, b_op, th, b_tile, next, kPerThread, b_grouped)});
  };

  // The thread's A and B values of depth kk as vectors from shared memory:
  // register h * 4 + lane is row (column) 64h + 4 ty (tx) + lane of the tile.
  auto fragment = [&](const BufferPtr &frag, const BufferPtr &tile, int64_t width, int64_t regs,
                      const LExprPtr &t_axis, const LExprPtr &kk) {
    LVarPtr h = k.var("h"), lane = k.var("lane");
    LExprPtr hv = var_ref(h), r = var_ref(lane);
    LExprPtr at = add(mul(kk, int_imm(width)), tile_offset(hv, t_axis, r));
    return for_loop(h, regs / kVec, ForKind::Unrolled,
                    for_loop(lane, kVec, ForKind::Vectorized, store(frag, add(mul(hv, int_imm(kVec)), r), load(tile, at))));
  };
  LVarPtr kk = k.var("kk"), i = k.var("i"), j = k.var("j");
  LExprPtr kv = var_ref(kk), iv = var_ref(i), jv = var_ref(j);
  LExprPtr at = add(mul(iv, int_imm(t.reg_n())), jv);
  LExprPtr av = load(a_frag, iv), bv = load(b_frag, jv);
  LExprPtr sum = is_float(acc) ? mul_add(av, bv, load(c, at)) : add(load(c, at), mul(av, bv));
  StmtPtr multiply = for_loop(
      kk, t.k, ForKind::Serial,
      seq({fragment(a_frag, a_tile, t.m, t.reg_m(), ty, kv), fragment(b_frag, b_tile, t.n, t.reg_n(), tx, kv),
           for_loop(i, t.reg_m(), ForKind::Unrolled, for_loop(j, t.reg_n(), ForKind::Unrolled, store(c, at, sum)))}));
  // Step s: the next slice into registers (the branch is the same for every
  // thread), this one multiplied, a barrier, the next one into shared memory.
  LExprPtr more = lt(add(s, int_imm(1)), steps);
  StmtPtr body = seq({if_then(more, fetch(mul(add(s, int_imm(1)), int_imm(t.k)))), multiply, barrier(),
                      if_then(more, deposit()), barrier()});

  // Zero the register tile, the first slice, the steps, then store what lies inside C.
  LVarPtr i0 = k.var("i");
  StmtPtr init = for_loop(i0, t.reg_m() * t.reg_n(), ForKind::Unrolled, store(c, var_ref(i0), constant_of(0, acc)));
  StmtPtr per_thread = alloc(
      c, alloc(next, alloc(a_frag, alloc(b_frag, seq({init, first, deposit(), barrier(),
                                                        for_loop(step, steps, ForKind::Serial, body),
                                                        store_tile(k, g, t.reg_m(), t.reg_n(), c, m0, n0, ty, tx)})))));
  StmtPtr threads = for_loop(thread_y, kThreadRows, ForKind::ThreadIdx,
                             for_loop(thread_x, kThreadCols, ForKind::ThreadIdx, per_thread));
  return for_loop(tile_m, tiles_m, ForKind::BlockIdx,
                  for_loop(tile_n, tiles_n, ForKind::BlockIdx, alloc(a_tile, alloc(b_tile, threads))));
}

} // namespace gradc
