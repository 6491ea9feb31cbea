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
// The multiplication inside is one of two inner schedules (Inner): the FMA
// register tile above, or with --gpu-math=tf32 the warps' tensor-core
// products (mma_inner). gemm_cuda_split_k runs the same kernel over chunks
// of K into partial products, summed after, where the tiles alone would
// leave the device idle.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "gradc/loops/Lanes.h"

#include <algorithm>

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
  int64_t stride;    // of a depth's row in shared memory: width, or more (padding against bank conflicts)
  bool tf32 = false; // rounded to TensorFloat-32 on the way into shared memory
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
/// [kk * stride + i]: a vector store where the group runs along i.
StmtPtr deposit_operand(KernelCtx &k, const Operand &o, const LExprPtr &th, const BufferPtr &tile,
                        const BufferPtr &regs, int64_t at, bool grouped) {
  LVarPtr lane = k.var("lane");
  LExprPtr r = var_ref(lane);
  Place p = place(o, th, r, grouped);
  LExprPtr value = load(regs, add(int_imm(at), r));
  if (o.tf32)
    value = unary(UnaryOp::RoundTf32, value);
  ForKind kind = grouped && !o.k_fastest && !o.tf32 ? ForKind::Vectorized : ForKind::Unrolled;
  return for_loop(lane, kPerThread, kind, store(tile, add(mul(p.kk, int_imm(o.stride)), p.i), value));
}

/// Of a thread's registers h * 4 + lane along one axis: the tile's row (or
/// column) 64h + 4 t_axis + lane.
LExprPtr tile_offset(const LExprPtr &h, const LExprPtr &t_axis, const LExprPtr &lane) {
  return add(add(mul(h, int_imm(kThreadRows * kVec)), mul(t_axis, int_imm(kVec))), lane);
}

/// value (reading `lane`) into C[m][nb + lane] for lane < lanes, where it
/// lies inside C: one guarded vector store where N is a multiple of `lanes`
/// (the group in or out together) and the output is written at unit stride,
/// else a guarded store per column.
StmtPtr store_columns(const Gemm &g, const LExprPtr &m, const LExprPtr &nb, const LVarPtr &lane, int64_t lanes,
                      const LExprPtr &value) {
  LExprPtr r = var_ref(lane);
  // The position clamped too (a no-op under the guard): in bounds by the
  // verifier's interval arithmetic, which knows no guard of a sum.
  if (g.N % lanes == 0) {
    LExprPtr n = add(binary(BinaryOp::Min, nb, int_imm(g.N - lanes)), r);
    StmtPtr vector = for_loop(lane, lanes, ForKind::Vectorized, g.store(clamp(m, g.M), n, value));
    if (lane_wise(*vector))
      return if_then(both(lt(m, g.M), lt(nb, g.N)), vector);
  }
  LExprPtr n = add(nb, r);
  return for_loop(lane, lanes, ForKind::Unrolled,
                  if_then(both(lt(m, g.M), lt(n, g.N)), g.store(clamp(m, g.M), clamp(n, g.N), value)));
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
  return for_loop(i, reg_m, ForKind::Unrolled,
                  for_loop(h, reg_n / kVec, ForKind::Unrolled, store_columns(g, m, nb, lane, kVec, value)));
}

/// A block's view of its tile, shared by the two inner schedules: the tiles
/// in shared memory, the block's corner of C, the thread's indices.
struct Block {
  Tiles t;
  BufferPtr a_tile, b_tile;
  int64_t a_stride, b_stride; // of a depth's row in a_tile, b_tile
  LExprPtr m0, n0, ty, tx, th;
};

/// What the FMA and tensor-core schedules differ in: the thread's registers,
/// their zeroing, one slice's products from shared memory into them, and
/// their store into C.
struct Inner {
  std::vector<BufferPtr> registers;
  StmtPtr init, multiply, store;
};

/// The kernel around an inner schedule (the file comment): a grid of
/// tiles_n x tiles_m blocks of 16 x 16 threads; the slices of A and B copied
/// through registers into shared memory, double-buffered.
StmtPtr tiled_kernel(KernelCtx &k, const Gemm &g, const Block &blk, const LVarPtr &tile_m, const LVarPtr &tile_n,
                     const LVarPtr &thread_y, const LVarPtr &thread_x, bool tf32, const Inner &inner) {
  const Tiles &t = blk.t;
  const DType acc = g.acc();
  const int64_t tiles_n = (g.N + t.n - 1) / t.n, tiles_m = (g.M + t.m - 1) / t.m;
  const int64_t steps = (g.K + t.k - 1) / t.k;
  GRADC_CHECK(blk.a_tile->bytes() + blk.b_tile->bytes() <= k.target.shared_memory_bytes, "cuda gemm",
              "the product's tiles exceed the target's shared memory");
  BufferPtr next = k.local("next_slices", acc, 2 * kPerThread); // A's four, then B's
  LVarPtr step = k.var("step");
  LExprPtr s = var_ref(step);
  Operand a_op{t.m, t.k, g.a_contiguous_in_k, g.M, g.K,
               [&](const LExprPtr &m, const LExprPtr &kk) { return g.a_acc(m, kk); }, blk.a_stride, tf32};
  Operand b_op{t.n, t.k, g.b_contiguous_in_k, g.N, g.K,
               [&](const LExprPtr &n, const LExprPtr &kk) { return g.b_acc(kk, n); }, blk.b_stride, tf32};
  bool a_grouped = false, b_grouped = false;
  // Loads the slice starting at k0 into the registers; stores them into shared memory.
  auto fetch = [&](const LExprPtr &k0) {
    return seq({fetch_operand(k, a_op, blk.th, blk.m0, k0, next, 0, acc, a_grouped),
                fetch_operand(k, b_op, blk.th, blk.n0, k0, next, kPerThread, acc, b_grouped)});
  };
  StmtPtr first = fetch(int_imm(0)); // decides a_grouped and b_grouped
  auto deposit = [&]() {
    return seq({deposit_operand(k, a_op, blk.th, blk.a_tile, next, 0, a_grouped),
                deposit_operand(k, b_op, blk.th, blk.b_tile, next, kPerThread, b_grouped)});
  };
  // Step s: the next slice into registers (the branch is the same for every
  // thread), this one multiplied, a barrier, the next one into shared memory.
  LExprPtr more = lt(add(s, int_imm(1)), steps);
  StmtPtr body = seq({if_then(more, fetch(mul(add(s, int_imm(1)), int_imm(t.k)))), inner.multiply, barrier(),
                      if_then(more, deposit()), barrier()});
  // Zero the registers, the first slice, the steps, then store what lies inside C.
  StmtPtr per_thread = seq({inner.init, first, deposit(), barrier(), for_loop(step, steps, ForKind::Serial, body),
                            inner.store});
  for (auto it = inner.registers.rbegin(); it != inner.registers.rend(); ++it)
    per_thread = alloc(*it, per_thread);
  per_thread = alloc(next, per_thread);
  StmtPtr threads = for_loop(thread_y, kThreadRows, ForKind::ThreadIdx,
                             for_loop(thread_x, kThreadCols, ForKind::ThreadIdx, per_thread));
  return for_loop(tile_m, tiles_m, ForKind::BlockIdx,
                  for_loop(tile_n, tiles_n, ForKind::BlockIdx, alloc(blk.a_tile, alloc(blk.b_tile, threads))));
}

/// The FMA schedule: an 8 x 8 (4 x 4) register tile per thread, its values
/// of A and B read as vectors from shared memory each step of the slice.
Inner fma_inner(KernelCtx &k, const Gemm &g, const Block &blk) {
  const Tiles &t = blk.t;
  const DType acc = g.acc();
  BufferPtr c = k.local("c_tile", acc, t.reg_m() * t.reg_n());
  BufferPtr a_frag = k.local("a_frag", acc, t.reg_m()), b_frag = k.local("b_frag", acc, t.reg_n());
  // The thread's A and B values of depth kk as vectors from shared memory:
  // register h * 4 + lane is row (column) 64h + 4 ty (tx) + lane of the tile.
  auto fragment = [&](const BufferPtr &frag, const BufferPtr &tile, int64_t stride, int64_t regs,
                      const LExprPtr &t_axis, const LExprPtr &kk) {
    LVarPtr h = k.var("h"), lane = k.var("lane");
    LExprPtr hv = var_ref(h), r = var_ref(lane);
    LExprPtr at = add(mul(kk, int_imm(stride)), tile_offset(hv, t_axis, r));
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
      seq({fragment(a_frag, blk.a_tile, blk.a_stride, t.reg_m(), blk.ty, kv),
           fragment(b_frag, blk.b_tile, blk.b_stride, t.reg_n(), blk.tx, kv),
           for_loop(i, t.reg_m(), ForKind::Unrolled, for_loop(j, t.reg_n(), ForKind::Unrolled, store(c, at, sum)))}));
  LVarPtr i0 = k.var("i");
  StmtPtr init = for_loop(i0, t.reg_m() * t.reg_n(), ForKind::Unrolled, store(c, var_ref(i0), constant_of(0, acc)));
  return {{c, a_frag, b_frag}, init, multiply,
          store_tile(k, g, t.reg_m(), t.reg_n(), c, blk.m0, blk.n0, blk.ty, blk.tx)};
}

/// The tensor-core schedule (--gpu-math=tf32): the block's 8 warps as 2 x 4,
/// each computing a (tile m / 2) x (tile n / 4) part of the tile as m16n8k8
/// products (LoopIR.h: StmtKind::Mma), 4 x 4 of them for the large tile;
/// the slices in shared memory hold tf32 values, rows padded by 8 so that a
/// warp's fragment loads hit 32 different banks.
Inner mma_inner(KernelCtx &k, const Gemm &g, const Block &blk) {
  const Tiles &t = blk.t;
  const int64_t warp_m = t.m / 2, warp_n = t.n / 4, mt_n = warp_m / 16, nt_n = warp_n / 8;
  BufferPtr c = k.local("c_frags", DType::Float32, mt_n * nt_n * 4);
  BufferPtr a_frag = k.local("a_frag", DType::Float32, mt_n * 4), b_frag = k.local("b_frag", DType::Float32, nt_n * 2);
  LExprPtr warp = div(blk.th, kWarpSize), lane = mod(blk.th, kWarpSize);
  LExprPtr g4 = div(lane, 4), q = mod(lane, 4);
  LExprPtr wm0 = mul(div(warp, 4), int_imm(warp_m)), wn0 = mul(mod(warp, 4), int_imm(warp_n));
  LVarPtr kk = k.var("kk"), mt = k.var("mt"), nt = k.var("nt"), ra = k.var("r"), rb = k.var("r");
  LExprPtr k0 = mul(var_ref(kk), int_imm(8)), mv = var_ref(mt), nv = var_ref(nt), rav = var_ref(ra), rbv = var_ref(rb);
  // a_r: A[g + 8 (r mod 2)][q + 4 (r / 2)] of m-tile mt; b_r: B[q + 4r][g] of n-tile nt.
  LExprPtr a_at = add(mul(add(k0, add(q, mul(div(rav, 2), int_imm(4)))), int_imm(blk.a_stride)),
                      add(add(wm0, mul(mv, int_imm(16))), add(g4, mul(mod(rav, 2), int_imm(8)))));
  LExprPtr b_at = add(mul(add(k0, add(q, mul(rbv, int_imm(4)))), int_imm(blk.b_stride)),
                      add(add(wn0, mul(nv, int_imm(8))), g4));
  StmtPtr a_load = for_loop(mt, mt_n, ForKind::Unrolled,
                            for_loop(ra, 4, ForKind::Unrolled, store(a_frag, add(mul(mv, int_imm(4)), rav), load(blk.a_tile, a_at))));
  StmtPtr b_load = for_loop(nt, nt_n, ForKind::Unrolled,
                            for_loop(rb, 2, ForKind::Unrolled, store(b_frag, add(mul(nv, int_imm(2)), rbv), load(blk.b_tile, b_at))));
  LVarPtr mt3 = k.var("mt"), nt3 = k.var("nt");
  LExprPtr m3 = var_ref(mt3), n3 = var_ref(nt3);
  LExprPtr ci = mul(add(mul(m3, int_imm(nt_n)), n3), int_imm(4));
  std::vector<LExprPtr> inputs;
  for (int64_t e = 0; e < 4; ++e)
    inputs.push_back(load(a_frag, add(mul(m3, int_imm(4)), int_imm(e))));
  for (int64_t e = 0; e < 2; ++e)
    inputs.push_back(load(b_frag, add(mul(n3, int_imm(2)), int_imm(e))));
  for (int64_t e = 0; e < 4; ++e)
    inputs.push_back(load(c, add(ci, int_imm(e))));
  StmtPtr products = for_loop(mt3, mt_n, ForKind::Unrolled,
                              for_loop(nt3, nt_n, ForKind::Unrolled, mma_tf32(c, ci, std::move(inputs))));
  StmtPtr multiply = for_loop(kk, t.k / 8, ForKind::Serial, seq({a_load, b_load, products}));
  LVarPtr i0 = k.var("i");
  StmtPtr init = for_loop(i0, mt_n * nt_n * 4, ForKind::Unrolled, store(c, var_ref(i0), constant_of(0, DType::Float32)));

  // Each accumulator (mt, nt, e) is C[m][n]: m = wm0 + 16 mt + g + 8 (e / 2),
  // n = wn0 + 8 nt + 2q + e mod 2; a pair of adjacent columns at a time.
  LVarPtr mt4 = k.var("mt"), nt4 = k.var("nt"), half = k.var("half"), col = k.var("col");
  LExprPtr m = add(blk.m0, add(add(wm0, mul(var_ref(mt4), int_imm(16))), add(g4, mul(var_ref(half), int_imm(8)))));
  LExprPtr nb = add(blk.n0, add(add(wn0, mul(var_ref(nt4), int_imm(8))), mul(q, int_imm(2))));
  LExprPtr cv = var_ref(col);
  LExprPtr value = cast(g.dtype, load(c, add(mul(add(mul(var_ref(mt4), int_imm(nt_n)), var_ref(nt4)), int_imm(4)),
                                          add(mul(var_ref(half), int_imm(2)), cv))));
  StmtPtr store_c = for_loop(mt4, mt_n, ForKind::Unrolled,
                             for_loop(nt4, nt_n, ForKind::Unrolled,
                                      for_loop(half, 2, ForKind::Unrolled, store_columns(g, m, nb, col, 2, value))));
  return {{c, a_frag, b_frag}, init, multiply, store_c};
}

} // namespace

StmtPtr gemm_cuda_tiled(KernelCtx &k, const Gemm &g) {
  if (!tiles(g))
    return gemm_nest(k, g);
  // Tensor cores where asked for (--gpu-math=tf32) and the product is float32 throughout.
  const bool tf32 = k.target.tf32 && g.dtype == DType::Float32 && g.acc() == DType::Float32;
  const Tiles t = g.M >= kLarge.m && g.N >= kLarge.n ? kLarge : kSmall;
  const int64_t pad = tf32 ? 8 : 0;
  const DType acc = g.acc();
  Block blk{t, nullptr, nullptr, t.m + pad, t.n + pad, nullptr, nullptr, nullptr, nullptr, nullptr};
  blk.a_tile = std::make_shared<Buffer>(Buffer{"a_tile", acc, {t.k * blk.a_stride}, BufferScope::Shared});
  blk.b_tile = std::make_shared<Buffer>(Buffer{"b_tile", acc, {t.k * blk.b_stride}, BufferScope::Shared});
  // A grid of tiles_n x tiles_m blocks of 16 x 16 threads; th, the
  // thread's linear index, decides what it copies.
  LVarPtr tile_m = k.var("tile_m"), tile_n = k.var("tile_n"), thread_y = k.var("ty"), thread_x = k.var("tx");
  blk.ty = var_ref(thread_y);
  blk.tx = var_ref(thread_x);
  blk.m0 = mul(var_ref(tile_m), int_imm(t.m));
  blk.n0 = mul(var_ref(tile_n), int_imm(t.n));
  blk.th = add(mul(blk.ty, int_imm(kThreadCols)), blk.tx);
  Inner inner = tf32 ? mma_inner(k, g, blk) : fma_inner(k, g, blk);
  return tiled_kernel(k, g, blk, tile_m, tile_n, thread_y, thread_x, tf32, inner);
}

namespace {
/// Products that fill fewer blocks than this are split along K (a GPU has
/// 100 or more multiprocessors, each running two blocks of 256 at once).
constexpr int64_t kSplitKBlocks = 256;
/// The least depth of a split: 32 slices of 16.
constexpr int64_t kMinSplitDepth = 512;
} // namespace

StmtPtr gemm_cuda_split_k(KernelCtx &k, const Shape &loops, const std::function<Gemm(const Index &at)> &gemm_at) {
  Index first(loops.size(), int_imm(0));
  const Gemm shape = gemm_at(first); // M, N, K, dtype: the same at every index
  const int64_t copies = num_elements(loops);
  const int64_t tile = shape.M >= kLarge.m && shape.N >= kLarge.n ? kLarge.m : kSmall.m;
  const int64_t blocks = copies * ((shape.M + tile - 1) / tile) * ((shape.N + tile - 1) / tile);
  if (!tiles(shape) || blocks * 2 > kSplitKBlocks || shape.K < 2 * kMinSplitDepth)
    return nullptr;
  int64_t splits = std::min(kSplitKBlocks / blocks, shape.K / kMinSplitDepth);
  const int64_t chunk = (shape.K + splits - 1) / splits;
  splits = (shape.K + chunk - 1) / chunk;
  const int64_t M = shape.M, N = shape.N, K = shape.K;
  const DType acc = shape.acc();
  BufferPtr partial = k.scratch("split_partials", acc, splits * copies * M * N);
  Shape outer = loops;
  outer.push_back(splits);
  StmtPtr products = loop_nest(
      outer,
      [&](const Index &at_split) {
        Index at(at_split.begin(), at_split.end() - 1);
        LExprPtr split = at_split.back(), copy = flat_index(loops, at);
        Gemm whole = gemm_at(at), part;
        // Depth kk of this split is depth split * chunk + kk of the product, zero past K.
        auto depth = [split, chunk](const LExprPtr &kk) { return add(mul(split, int_imm(chunk)), kk); };
        auto within = [depth, K, acc](const LExprPtr &kk, const LExprPtr &v) {
          return select(compare(CompareOp::LT, depth(kk), int_imm(K)), v, constant_of(0, acc));
        };
        auto clamped = [depth, K](const LExprPtr &kk) { return binary(BinaryOp::Min, depth(kk), int_imm(K - 1)); };
        part.M = M;
        part.N = N;
        part.K = chunk;
        part.dtype = acc;
        part.a_contiguous_in_k = whole.a_contiguous_in_k;
        part.b_contiguous_in_k = whole.b_contiguous_in_k;
        part.b_gathered = whole.b_gathered;
        part.a = [whole, within, clamped](const LExprPtr &m, const LExprPtr &kk) {
          return within(kk, whole.a_acc(m, clamped(kk)));
        };
        part.b = [whole, within, clamped](const LExprPtr &kk, const LExprPtr &n) {
          return within(kk, whole.b_acc(clamped(kk), n));
        };
        auto slot = [split, copy, copies, M, N](const LExprPtr &m, const LExprPtr &n) {
          return add(mul(add(mul(add(mul(split, int_imm(copies)), copy), int_imm(M)), m), int_imm(N)), n);
        };
        part.store = [partial, slot](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
          return store(partial, slot(m, n), v);
        };
        part.load = [partial, slot](const LExprPtr &m, const LExprPtr &n) { return load(partial, slot(m, n)); };
        return gemm_cuda_tiled(k, part);
      },
      ForKind::Spatial);
  Shape outputs = loops;
  outputs.insert(outputs.end(), {M, N});
  StmtPtr sums = loop_nest(
      outputs,
      [&](const Index &o) {
        Index at(o.begin(), o.end() - 2);
        const Gemm whole = gemm_at(at);
        BufferPtr total = k.local("split_total", acc);
        LVarPtr sp = k.var("split");
        LExprPtr zero = int_imm(0);
        LExprPtr partial_sum = load(partial, add(mul(var_ref(sp), int_imm(copies * M * N)), flat_index(outputs, o)));
        return alloc(total, seq({store(total, zero, constant_of(0, acc)),
                                 for_loop(sp, splits, ForKind::Reduce, store(total, zero, add(load(total, zero), partial_sum))),
                                 whole.store(o[o.size() - 2], o.back(), cast(whole.dtype, load(total, zero)))}));
      },
      ForKind::Spatial);
  return seq({products, sums});
}

StmtPtr gemm_cuda(KernelCtx &k, const Gemm &g) {
  if (g.batch_index || g.accumulate) // the schedule-neutral nest (none reaches here yet: Winograd is the CPU's)
    return gemm_nest(k, g);
  if (g.alone)
    if (StmtPtr split = gemm_cuda_split_k(k, {}, [&g](const Index &) { return g; }))
      return split;
  return gemm_cuda_tiled(k, g);
}

} // namespace gradc
