//===- cpu/Gemm.cpp - the CPU's packed matrix product ---------------------===//
//
// See Cpu.h for the schedule (the packed panels, gemm_dot).
// Every loop has a constant extent, and the register tile's K loop is
// emitted once per K block size (the full blocks and the last one), not
// once per edge: the last row tile computes whole (its missing rows read the
// last real row and are not stored), and the last panel is packed with
// zeros and only its stores and reloads have a variant of their own.
// The nest's shape depends on the blocking, not on the exact sizes: serial
// and parallel loops stay when they run once or never, every product clamps
// its rows, the packed panel's size is a power of two of K steps. So
// products that differ only in their sizes (a DenseNet block's 1x1
// convolutions, whose K grows by 32 from layer to layer) differ only in
// constants and share one function (loops/Templates.h).
//
//===----------------------------------------------------------------------===//
#include "Cpu.h"
#include "gradc/loops/Functor.h"
#include "gradc/loops/Lanes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <bit>

namespace gradc {
namespace {

/// A `for`. An unrolled or vectorized one disappears when its extent is 0 and
/// is a plain statement when 1; a serial or parallel one stays, so that the
/// nest's shape does not depend on the sizes (codegen drops it where it runs
/// once or never).
StmtPtr loop(KernelCtx &k, const std::string &name, int64_t extent, ForKind kind,
             const std::function<StmtPtr(const LExprPtr &)> &body) {
  bool stays = kind == ForKind::Serial || kind == ForKind::Parallel;
  if (extent <= 0 && !stays)
    return seq({});
  if (extent == 1 && !stays)
    return body(imm(0));
  LVarPtr v = k.var(name);
  return for_loop(v, extent, kind, body(var_ref(v)));
}

/// The product as the micro-kernel sees it: `rows` broadcast from one
/// operand where it lies, `cols` read as vectors from the packed other one.
struct Oriented {
  int64_t rows = 0, cols = 0, K = 0;
  bool bcast_computed = false; // the broadcast operand's elements are computed (a fused producer)
  std::function<LExprPtr(const LExprPtr &row, const LExprPtr &k)> bcast;
  std::function<LExprPtr(const LExprPtr &k, const LExprPtr &col)> vec;
  std::function<StmtPtr(const LExprPtr &row, const LExprPtr &col, const LExprPtr &value)> store;
  std::function<LExprPtr(const LExprPtr &row, const LExprPtr &col)> load;
  std::function<StmtPtr(const LExprPtr &row, const LExprPtr &col, const LExprPtr &value)> store_raw;
  bool vec_contiguous_in_k = false, bcast_contiguous_in_k = false;
  bool transposed = false; // C is stored across its rows, one element per lane
  std::optional<int64_t> bcast_k_stride; // where the broadcast operand is a plain load
};

/// Whether value `e` computes anything beyond loading: arithmetic, a select,
/// a comparison (a Load's index arithmetic and casts do not count).
bool computes(const LExprPtr &e) {
  switch (e->kind) {
  case LExprKind::IntImm:
  case LExprKind::FloatImm:
  case LExprKind::Var:
  case LExprKind::Load:
    return false;
  case LExprKind::Cast:
    return computes(e->operands[0]);
  default:
    return true;
  }
}

using OperandFn = std::function<LExprPtr(const LExprPtr &, const LExprPtr &)>;

/// Whether operand `f` of a product is a fused producer that computes its
/// elements (a layer norm's normalisation before a dense), not one that only
/// reads them at other places (a transpose).
bool computed_operand(const OperandFn &f) {
  auto m = std::make_shared<LVar>(LVar{"m"}), kk = std::make_shared<LVar>(LVar{"k"});
  return computes(f(var_ref(m), var_ref(kk)));
}

/// The step along argument `arg` (0 or 1) of the element `f(i, j)` reads,
/// where it reads one element of a buffer at an index affine in it
/// (nullopt otherwise: a computed operand, a gather).
std::optional<int64_t> load_stride(const OperandFn &f, int arg) {
  auto i = std::make_shared<LVar>(LVar{"i"}), j = std::make_shared<LVar>(LVar{"j"});
  LExprPtr e = f(var_ref(i), var_ref(j));
  while (e->kind == LExprKind::Cast)
    e = e->operands[0];
  if (e->kind != LExprKind::Load)
    return std::nullopt;
  return index_stride(e->operands[0], (arg == 0 ? i : j).get());
}

/// The step along k of the element operand `f` (row, k) reads (load_stride).
std::optional<int64_t> k_stride(const OperandFn &f) { return load_stride(f, 1); }

/// Element-cycles of packing an element into panels (orient): copied in
/// whole vectors where the operand lies contiguous along the panels' rows;
/// moved by a transposing copy (pack_across: VL x VL blocks loaded along k,
/// shuffled in registers, stored along the rows; about a quarter cycle of
/// shuffles an element) where it lies contiguous along k; else gathered
/// one by one. Costed at 1 like a gather, the transposing copy made
/// resnet50's 1 x 1 weight gradient 512 -> 128 at 28 x 28 store C across
/// rows 2 KiB apart instead (batch 2, one thread: 1.17 -> 1.08 ms).
constexpr double kCopyCost = 0.25, kTransposingCopyCost = 0.3, kGatherCost = 1.0;

/// A fused producer's element computed for a panel across its layout (a
/// layer norm's or a GELU's, each of its inputs gathered at the stride of a
/// row, the index arithmetic per element), where packed rows compute it
/// along k in vectors: convnext_tiny's 768 -> 192 product after its GELU
/// (1568 pixels, batch 2) was 5% of the step slower so.
constexpr double kComputedGatherCost = 4.0;

/// What packing an element of operand `f` into panels along its argument
/// `arg` costs (the constants above), as its loads' steps say; where `f` is
/// not a plain load, as its `contiguous_in_k` hint says (contiguous along
/// k, so gathered across). The hint may be wrong where it is a plain load:
/// a transposed convolution reads its 1 x 1 weight across (w[c, m]).
double pack_cost(const OperandFn &f, int arg, bool contiguous_in_k) {
  std::optional<int64_t> step = load_stride(f, arg);
  if (!step)
    return !contiguous_in_k ? kCopyCost : computed_operand(f) ? kComputedGatherCost : kGatherCost;
  if (*step == 1)
    return kCopyCost;
  return load_stride(f, 1 - arg) == std::optional<int64_t>(1) ? kTransposingCopyCost : kGatherCost;
}

/// The multiply-adds a register tiling of `rows` × `cols` computes for
/// nothing (in elements, times K): the last panel's columns past `cols`
/// (whole vectors, zeros packed) and the last tile's rows past `rows`.
double wasted_lanes(const CpuTuning &t, int64_t rows, int64_t cols, int64_t K, DType acc);

/// The step between C's rows (m to m + 1) where `load` reads it at an index
/// affine in m (nullopt otherwise).
std::optional<int64_t> c_row_stride(const Gemm &g) {
  return g.load ? load_stride(g.load, 0) : std::nullopt;
}

/// Cycles an element of a transposed store costs beyond one where its lanes
/// share L1 sets (orient).
constexpr double kConflictingStoreCost = 10.0;

/// Element-cycles of reading an element of the broadcast rows again from
/// beyond the L2 (orient): a float a cycle at the 16 GB/s one core of an
/// Intel Xeon VM draws from memory, about half that from an L3.
constexpr double kRereadCost = 0.5;

/// What streaming the broadcast rows (`rows` × K) past the `cols` columns
/// costs beyond reading them once (orient): every panel reads all the rows
/// of its group, so rows that do not stay in the L2 (three quarters of it,
/// the rest for the output and the panels passing through) come from
/// memory once per panel, unless row groups keep them there (row_groups:
/// where the panels are not contiguous along k), which packs each panel
/// once per group instead.
double reread_cost(const CpuTuning &t, int64_t rows, int64_t cols, int64_t K, DType acc, bool vec_contiguous_in_k);

/// Element-cycles of a broadcast element read in place across its layout,
/// per panel that reads it (orient), where its rows lie a page or more
/// apart along k: each k step of a tile reads a line and a page of its own. resnet50's 1 x 1 data gradient 128 -> 512
/// at 28 x 28 (batch 2) read its 1568 pixels so past four panels of the
/// weight: 2.25 ms on an Intel Xeon, one thread, against 1.41 with the
/// weight as rows (64 -> 256 at 56 x 56: 1.77 and 1.39 ms).
constexpr double kAcrossReadCost = 1.0;
constexpr int64_t kPageBytes = 4096;

/// Panels from which rows read across k are packed (Blocking::pack_rows).
constexpr int64_t kPackRowsPanels = 8;

/// What reading the broadcast rows `bcast` (row, k) costs where they lie
/// across k, a page or more apart, and stay in place (fewer than 8 panels:
/// Blocking::pack_rows). Rows closer along k share pages across steps
/// (gemm_orientation.relay: 98 columns of x, 392 bytes a step, broadcast
/// in place as 9 tiles).
double across_cost(const CpuTuning &t, int64_t rows, int64_t cols, int64_t K, DType acc, const OperandFn &bcast);

/// Packs B (K × N) and stores C along its rows, unless packing A (M × K)
/// instead and storing C across its rows (one element per lane: Cᵀ = Bᵀ·Aᵀ)
/// costs less: x·wᵀ with a small batch packs x, not w. An operand already
/// contiguous along the packed panels' rows copies in whole vectors (a
/// quarter of the cost of gathering it); a transposed store is per element;
/// a last panel of a few columns multiplies zeros in the rest of its lanes
/// (resnet18's 512 -> 512 convolution at 7 x 7, batch 2: 98 pixels in 4
/// panels of 32, 23% of the FMAs for nothing; transposed, 98 rows in 9
/// tiles of 11 and 512 columns in whole panels: 5.4 -> 5.1 ms). Where C's
/// rows lie a multiple of 2 KiB apart, a transposed store's lanes fall in
/// one or two sets of the L1 (8 ways) and evict each other: about ten
/// cycles an element more (resnet50's 1 x 1 weight gradient 1024 -> 256 at
/// 14 x 14, batch 2, M = 256, N = 1024 of K = 392, on a Zen 4: 2.93 ms
/// transposed, 2.12 not; with 1000 channels, rows 4000 bytes apart, 2.16
/// and 2.24). Broadcast rows that do not stay in the L2 are read again
/// from memory by every panel (reread_cost): resnet50's 1 x 1 convolution
/// 512 -> 128 at 28 x 28, batch 2, had its 1568 pixels as rows, streamed
/// four times, and took 2.6 ms on an Intel Xeon (one thread); with the
/// weight as rows, 1.6 ms; GPT-2 small streamed its weights (the qkv
/// product's 7 MB) past four panels of 128 tokens: its step 1252 -> 991
/// ms.
Oriented orient(const CpuTuning &t, const Gemm &g) {
  Oriented o;
  o.K = g.K;
  // Costs in element-cycles: packing a gathered element about one, a
  // contiguous one a quarter; a transposed store one per element, eleven
  // where its lanes share L1 sets; a vector multiply-add one per
  // lane-vector, so a wasted lane 1 / lanes.
  double lanes = double(t.lanes(g.acc()));
  double pack_b = double(g.K) * double(g.N) * pack_cost(g.b, 1, g.b_contiguous_in_k);
  double pack_a = double(g.M) * double(g.K) * pack_cost(g.a, 0, g.a_contiguous_in_k);
  double waste_b = wasted_lanes(t, g.M, g.N, g.K, g.acc()) / lanes;
  double waste_a = wasted_lanes(t, g.N, g.M, g.K, g.acc()) / lanes;
  // the panels' operand contiguous along k, as its loads say where they can
  auto along_k = [](const OperandFn &f, int arg, bool hint) {
    std::optional<int64_t> step = load_stride(f, arg);
    return step ? *step == 1 : hint;
  };
  // reading the broadcast rows: again per panel from beyond the L2, or in place across k
  double rows_b = reread_cost(t, g.M, g.N, g.K, g.acc(), along_k(g.b, 0, g.b_contiguous_in_k)) +
                  across_cost(t, g.M, g.N, g.K, g.acc(), g.a);
  double rows_a = reread_cost(t, g.N, g.M, g.K, g.acc(), along_k(g.a, 1, g.a_contiguous_in_k)) +
                  across_cost(t, g.N, g.M, g.K, g.acc(), [&g](const LExprPtr &n, const LExprPtr &k) { return g.b(k, n); });
  std::optional<int64_t> row_stride = c_row_stride(g);
  bool conflicting = row_stride && *row_stride != 0 && *row_stride * dtype_bytes(g.dtype) % 2048 == 0;
  double store_a = double(g.M) * double(g.N) * (conflicting ? 1.0 + kConflictingStoreCost : 1.0);
  if (g.b_gathered || pack_a + waste_a + rows_a + store_a >= pack_b + waste_b + rows_b) {
    o.rows = g.M;
    o.cols = g.N;
    o.bcast = [&g](const LExprPtr &m, const LExprPtr &k) { return g.a_acc(m, k); };
    o.vec = [&g](const LExprPtr &k, const LExprPtr &n) { return g.b_acc(k, n); };
    o.store = g.store;
    o.load = g.load;
    o.store_raw = g.store_raw;
    o.vec_contiguous_in_k = g.b_contiguous_in_k;
    o.bcast_contiguous_in_k = g.a_contiguous_in_k;
    o.bcast_computed = computed_operand(g.a);
    return o;
  }
  o.rows = g.N;
  o.cols = g.M;
  o.bcast = [&g](const LExprPtr &n, const LExprPtr &k) { return g.b_acc(k, n); };
  o.vec = [&g](const LExprPtr &k, const LExprPtr &m) { return g.a_acc(m, k); };
  o.store = [&g](const LExprPtr &n, const LExprPtr &m, const LExprPtr &v) { return g.store(m, n, v); };
  o.load = [&g](const LExprPtr &n, const LExprPtr &m) { return g.load(m, n); };
  if (g.store_raw)
    o.store_raw = [&g](const LExprPtr &n, const LExprPtr &m, const LExprPtr &v) { return g.store_raw(m, n, v); };
  o.vec_contiguous_in_k = g.a_contiguous_in_k;
  o.bcast_contiguous_in_k = g.b_contiguous_in_k;
  o.bcast_computed = computed_operand([&g](const LExprPtr &n, const LExprPtr &k) { return g.b(k, n); });
  o.transposed = true;
  return o;
}

/// orient(g), with each operand's layout along k as its loads say where it
/// is a plain load (a hint may be wrong: an imported nn.Linear's weight,
/// read as matmul(x, wᵀ), lies contiguous along k though its Gemm says not;
/// its panels were then gathered element by element, where pack_across
/// shuffles them: vit_small's step 5.8 -> 5.1 ms, one thread).
Oriented orient_probed(const CpuTuning &t, const Gemm &g) {
  Oriented o = orient(t, g);
  o.bcast_k_stride = k_stride(o.bcast);
  if (o.bcast_k_stride)
    o.bcast_contiguous_in_k = *o.bcast_k_stride == 1;
  if (std::optional<int64_t> step = load_stride(o.vec, 0))
    o.vec_contiguous_in_k = *step == 1;
  return o;
}

/// Register tile MR × NR (NR = NV vectors of VL lanes) and K block KC.
struct Blocking {
  int64_t vl = 1, nv = 1, nr = 1, mr = 1, kc = 1;
  int64_t kc_max = 1, blocks = 1; // K in `blocks` blocks of kc steps, the last of K - (blocks - 1) kc
  int64_t panels = 0, full_panels = 0; // panels of NR columns; the last may be partial
  // Tiles of MR rows, MR chosen so that they cover the rows with less than a
  // row per tile to spare (64 rows: 6 tiles of 11, not 5 of 12 and one of 4).
  int64_t tiles = 0; // the last may reach past the last row
  // The broadcast rows are packed too (PackedGemm::tile_at), when 8 or more panels
  // reuse them and they are read across (blocking()) or lie along k a
  // multiple of 4 KiB apart: in place, MR such rows share one L1 set
  // (1024 x 1024: 0.73x OpenBLAS before). Other rows contiguous along k
  // read well in place, and packing costs a pass and a fork-join; computed
  // rows (blocking()) are packed to be computed once.
  bool pack_rows = false;
  // The row tiles are split into `groups` (MC blocks), each job one panel ×
  // one group over all of K: a group's rows stay in half the L2 while the
  // panels stream past them, and few panels (a small batch's one panel of x)
  // still make enough jobs for the pool. Each job packs its panel, so a
  // group keeps at least 8 full tiles where it can.
  int64_t groups = 1, group_tiles = 0; // tiles per group (groups × group_tiles = tiles)
  // A product with a short K (at most kShortK: each output a few FMAs) is
  // bound by writing C. Its jobs are then whole groups (every panel, one
  // group per core): each thread writes its own rows, not column stripes
  // of every row, and they stay in its cache from one call to the next
  // (256 x 256 with K = 10 on 2 threads: 17.5 -> 4.8 us; 1 thread 9.0).
  bool row_jobs = false;
};

constexpr int64_t kShortK = 32;
constexpr int64_t kAcrossSteps = 16; // steps of k per job packing rows read across (pack_rows)
constexpr int64_t kAcrossTiles = 8;  // and the row tiles it packs at a time

/// The number of row groups: as few as spread the jobs (panels × groups)
/// evenly over the cores and, where a panel packs in whole vectors, keep a
/// group's rows (MR × K each) in half the L2 (matmul 1000³ on AVX2 code:
/// 27.3 -> 20.8 ms). A panel packed across (x of x·wT) costs about a cycle
/// per element: packing it once per group of 11 tiles doubled the time of
/// a 64-row product, so there only balance splits. Packed rows count by
/// their K block: one group streaming every tile's packed rows from L3 past
/// each panel made dE of the GPT step (1000 x 128 x 512) 1.6x slower on
/// two threads than reading its rows in place.
int64_t row_groups(const CpuTuning &t, const Blocking &b, const Oriented &o, int64_t acc_bytes, int64_t batch) {
  if (b.tiles < 2)
    return 1;
  int64_t groups = 1;
  if (!o.vec_contiguous_in_k) {
    int64_t tiles_in_l2 = std::max<int64_t>(8, t.l2_bytes / 2 / std::max<int64_t>(1, b.mr * b.kc * acc_bytes));
    groups = std::min<int64_t>(b.tiles, (b.tiles + tiles_in_l2 - 1) / tiles_in_l2);
  }
  int64_t cores = t.cores;
  int64_t per_group = batch * b.panels; // the jobs of a group of tiles, every product of the batch
  auto balance = [&](int64_t jobs) { return double(jobs) / double((jobs + cores - 1) / cores * cores); };
  if (cores == 1 || balance(per_group * groups) >= 0.85 || per_group * groups >= 4 * cores)
    return groups;
  for (int64_t g = groups + 1; g <= std::max(groups, b.tiles / 8); ++g)
    if (balance(per_group * g) >= 0.85)
      return g;
  return std::max(groups, b.tiles / 8);
}

/// MR and the tiles (a multiple of `multiple`) for `rows`: as few tiles of
/// at most `mr_max` rows as cover them, MR balanced so that less than a row
/// per tile is spare (64 rows: 6 tiles of 11; the spare rows are computed,
/// not stored). Covering exactly with smaller tiles (64 rows: 8 of 8) made
/// densenet121's step 6-12% slower.
void row_tiling(Blocking &b, int64_t rows, int64_t mr_max, int64_t multiple) {
  int64_t least = std::max<int64_t>(1, (rows + mr_max - 1) / mr_max);
  b.tiles = (least + multiple - 1) / multiple * multiple;
  b.mr = std::max<int64_t>(1, (rows + b.tiles - 1) / b.tiles);
}

/// The register tile of a product of `rows` × `cols`: NR = NV vectors,
/// MR at most mr_max, the tiles (row_tiling).
Blocking register_tile(const CpuTuning &t, int64_t rows, int64_t cols, DType acc, int64_t &mr_max) {
  Blocking b;
  b.vl = t.lanes(acc);
  b.nv = std::clamp<int64_t>((cols + b.vl - 1) / b.vl, 1, 2);
  b.nr = b.nv * b.vl;
  // Accumulators fill the register file but for the NV vectors of the packed
  // panel and a broadcast (AVX-512: 12 × 2 of 32 registers; AVX2: 6 × 2 of 16).
  mr_max = std::max<int64_t>(1, std::min({t.accumulators / b.nv, int64_t(12), rows}));
  row_tiling(b, rows, mr_max, 1);
  return b;
}

double wasted_lanes(const CpuTuning &t, int64_t rows, int64_t cols, int64_t K, DType acc) {
  int64_t mr_max = 1;
  Blocking b = register_tile(t, rows, cols, acc, mr_max);
  int64_t computed = b.tiles * b.mr * ((cols + b.nr - 1) / b.nr * b.nr);
  return double(computed - rows * cols) * double(K);
}

/// The panels of NR columns a register tiling of `rows` × `cols` packs.
int64_t panel_count(const CpuTuning &t, int64_t rows, int64_t cols, DType acc) {
  int64_t mr_max = 1;
  Blocking b = register_tile(t, rows, cols, acc, mr_max);
  return (cols + b.nr - 1) / b.nr;
}

double reread_cost(const CpuTuning &t, int64_t rows, int64_t cols, int64_t K, DType acc, bool vec_contiguous_in_k) {
  double bytes = double(rows) * double(K) * double(dtype_bytes(acc)), l2 = double(t.l2_bytes);
  if (bytes <= 0.75 * l2)
    return 0;
  if (!vec_contiguous_in_k)
    return (std::ceil(bytes / (l2 / 2)) - 1) * double(cols) * double(K) * kRereadCost;
  return double(panel_count(t, rows, cols, acc) - 1) * double(rows) * double(K) * kRereadCost;
}

double across_cost(const CpuTuning &t, int64_t rows, int64_t cols, int64_t K, DType acc, const OperandFn &bcast) {
  std::optional<int64_t> step = k_stride(bcast);
  if (!step || std::abs(*step) * dtype_bytes(acc) < kPageBytes)
    return 0;
  int64_t panels = panel_count(t, rows, cols, acc);
  if (panels >= kPackRowsPanels)
    return 0;
  return double(panels) * double(rows) * double(K) * kAcrossReadCost;
}

/// K in `blocks` blocks or, where they do not divide K and up to half as
/// many again do, in that many blocks of one size: the K loop's code is then
/// emitted once, not once for the blocks and again for the last (a
/// convolution's K = C·KH·KW is mostly a multiple of such a count: 2048 =
/// 8 × 256, not 5 × 342 + 338). A smaller KC costs a pass of the partial sums
/// over the register tile per block, a load and a store for KC FMAs.
int64_t even_k_blocks(int64_t K, int64_t blocks) {
  if (blocks < 2 || K % blocks == 0)
    return blocks;
  for (int64_t n = blocks + 1; n <= blocks + blocks / 2; ++n)
    if (K % n == 0)
      return n;
  return blocks;
}

Blocking blocking(const CpuTuning &t, const Gemm &g, const Oriented &o) {
  int64_t mr_max = 1;
  Blocking b = register_tile(t, o.rows, o.cols, g.acc(), mr_max);
  // The packed micro-panel (KC × NR, on a thread's stack) fills the L1 while
  // every row tile streams past it: fewer K blocks, so fewer passes of the
  // partial sums over C. Half the L1 (twice the blocks) measured slower:
  // dense 1024³ 14.0 -> 12.1 ms, 512³ 1.47 -> 1.30 ms on AVX-512; twice
  // the L1 slower again (13.1 ms).
  int64_t acc_bytes = dtype_bytes(g.acc());
  b.kc_max = std::max<int64_t>(16, t.l1d_bytes / (b.nr * acc_bytes));
  b.blocks = std::max<int64_t>(1, (o.K + b.kc_max - 1) / b.kc_max);
  b.blocks = even_k_blocks(o.K, b.blocks);
  b.kc = (o.K + b.blocks - 1) / b.blocks;
  b.panels = (o.cols + b.nr - 1) / b.nr;
  b.full_panels = o.cols / b.nr;
  // Computed broadcast rows (a fused producer: a layer norm's output feeding
  // a dense) are packed whenever two or more panels read them, so that each
  // element is computed once per K block, not once per panel (the GPT step's
  // qkv and MLP products: 12 and 16 panels).
  // The same holds for rows read across (aᵀ of aᵀ·b: a row of a per k)
  // that 8 or more panels read: in place, each FMA's broadcast is an
  // element of its own row of a, so every K step touches a new line. Where
  // those steps lie a multiple of 4 KiB apart (dW = dyᵀ·x of the LSTM's
  // input weight, 1024 x 256 x 2080) they also share one L1 set: AVX2 code
  // 18.4 -> 11.1 ms; elsewhere (dE = dlogitsᵀ·x of the GPT step, 1000 x
  // 128 x 512) one thread 1.47 -> 1.26 ms, two unchanged.
  // So are rows read at an index that is not affine in k (a reshape of a
  // transpose: attention's q of a head, from the qkv product), whose index
  // arithmetic, divisions included, would otherwise run for every FMA.
  int64_t conflict = o.bcast_contiguous_in_k ? o.K : o.bcast_k_stride.value_or(1);
  bool computed = o.bcast_computed || !o.bcast_k_stride;
  b.pack_rows = (computed && b.panels >= 2) ||
                (b.panels >= kPackRowsPanels && b.tiles >= 2 && (!o.bcast_contiguous_in_k || conflict * acc_bytes % 4096 == 0));
  b.groups = row_groups(t, b, o, acc_bytes, g.batch);
  int64_t cores = t.cores;
  if (!b.pack_rows && o.K <= kShortK && b.panels > 1 && b.tiles >= 2 * cores) {
    b.row_jobs = true;
    b.groups = std::max(b.groups, cores);
  }
  // Every group has as many tiles: the tiles are rounded up to a multiple
  // of the groups, MR shrunk to match.
  b.groups = std::clamp<int64_t>(b.groups, 1, b.tiles);
  row_tiling(b, o.rows, mr_max, b.groups);
  b.group_tiles = b.tiles / b.groups;
  return b;
}

class PackedGemm {
public:
  PackedGemm(KernelCtx &k, const Gemm &g)
      : k_(k), g_(g), o_(orient_probed(k.target.cpu_tuning(), g)), b_(blocking(k.target.cpu_tuning(), g, o_)),
        product_(g.batch_index ? var_ref(g.batch_index) : imm(0)) {}

  StmtPtr build() {
    if (o_.rows == 0 || o_.cols == 0)
      return seq({});
    if (o_.K == 0 && g_.accumulate) // nothing to add
      return seq({});
    if (o_.K == 0) // an empty sum
      return each_product(
          loop_nest({g_.M, g_.N}, [&](const Index &mn) { return g_.store(mn[0], mn[1], constant_of(0, g_.dtype)); }));
    if (b_.pack_rows)
      rows_ = k_.scratch("packed_rows", g_.acc(),
                         g_.batch * b_.tiles * b_.mr * (o_.bcast_contiguous_in_k ? packed_row_length() : b_.kc));
    // Partial sums between K blocks stay in the output, unless it cannot
    // hold them unrounded (float16 accumulates in float32) or holds only
    // final values (an epilogue with no raw store), or is written across
    // (transposed) or through an index that is not affine in the column
    // (Gemm::c_scattered): then in scratch, laid out as the tiles are, read
    // and written in whole vectors (batch-16 x·wT on AVX2 code: 4 K blocks
    // made 7 element-wise passes over C; 512 -> 512 convolutions at 7 x 7
    // over chunks of 5 images, 18 K blocks each storing through a division
    // per column: 30.2 -> 20.6 ms for a batch of 8).
    blocked_ = b_.blocks > 1;
    if (blocked_ && (g_.acc() != g_.dtype || (g_.epilogue && !g_.store_raw) || o_.transposed || g_.c_scattered))
      partial_ = k_.scratch("partial", g_.acc(), g_.batch * o_.rows * o_.cols);
    // With packed rows (shared by every panel) each K block packs them, then
    // runs the panels in parallel; otherwise each panel runs every K block
    // on its thread: one fork-join per product, not one per block.
    if (b_.pack_rows)
      return over_k_blocks([&](const KBlock &kb) {
        return seq({pack_rows(kb), over_jobs([&](const Job &job) { return panel_block(job, kb); })});
      });
    return over_jobs([&](const Job &job) {
      return over_k_blocks([&](const KBlock &kb) { return panel_block(job, kb); });
    });
  }

private:
  KernelCtx &k_;
  const Gemm &g_;
  Oriented o_;
  Blocking b_;
  BufferPtr panel_;                   // the packed panel of the current thread (a Local)
  LExprPtr product_;                  // which product of the batch (0 for one product)
  BufferPtr rows_, partial_;          // partial_: sums before the last K block (see build); a slice per product
  bool blocked_ = false;              // K is split into blocks

  /// A loop of `kind` over `extent` iterations of each product of the batch:
  /// iteration b·extent + i is body(i) of product b (one fork-join for the
  /// batch where `kind` is Parallel).
  StmtPtr over_batch(const std::string &name, int64_t extent, ForKind kind,
                     const std::function<StmtPtr(const LExprPtr &)> &body) {
    if (!g_.batch_index)
      return loop(k_, name, extent, kind, body);
    return loop(k_, name, g_.batch * extent, kind, [&](const LExprPtr &v) {
      LExprPtr i = extent == 1 ? imm(0) : binary(BinaryOp::FloorMod, v, imm(extent));
      LExprPtr b = extent == 1 ? v : binary(BinaryOp::FloorDiv, v, imm(extent));
      return substitute(body(i), {{g_.batch_index.get(), b}});
    });
  }
  /// `body` for each product of the batch in turn.
  StmtPtr each_product(StmtPtr body) const {
    return g_.batch_index ? for_loop(g_.batch_index, g_.batch, ForKind::Serial, std::move(body)) : body;
  }
  /// Where the partial sum of (row, col) lives.
  LExprPtr partial_at(const LExprPtr &row, const LExprPtr &col) const {
    return add(mul(add(mul(product_, imm(o_.rows)), row), imm(o_.cols)), col);
  }

  static LExprPtr truth(bool v) { return int_imm(v, DType::Bool); }
  static LExprPtr first(const LExprPtr &kb) {
    if (kb->kind == LExprKind::IntImm)
      return truth(kb->ivalue == 0);
    return compare(CompareOp::EQ, kb, imm(0));
  }
  /// `then` where `cond` holds, else `otherwise`, folded when `cond` is a constant.
  static StmtPtr choose(const LExprPtr &cond, StmtPtr then, StmtPtr otherwise) {
    if (cond->kind == LExprKind::IntImm)
      return cond->ivalue ? then : otherwise;
    return if_then(cond, std::move(then), std::move(otherwise));
  }

  /// Where packed element (step kk of the block, column j) of a panel lives.
  LExprPtr packed_at(const LExprPtr &kk, const LExprPtr &j) const { return add(mul(kk, imm(b_.nr)), j); }

  /// The row a tile reads and writes for its row `row`: the last real row
  /// where the last tile reaches past it. Such a row is computed, never
  /// stored (if_real_row), but every index stays in bounds without the
  /// guard (the verifier bounds indices, not guards). Every product clamps,
  /// whether its last tile is whole or not, so that the two share code (the
  /// clamp is outside the K loop): a select, which the index simplifier
  /// keeps where a min of a whole last tile's rows would be folded away
  /// (googlenet's 1x1 convolutions of 192 and of 160 rows, tiles of 12, were
  /// two templates for that alone).
  LExprPtr clamp_row(const LExprPtr &row) const {
    return select(compare(CompareOp::LT, row, imm(o_.rows)), row, imm(o_.rows - 1));
  }
  /// `store` where `row` is a real row: a store of the tile's extra rows
  /// would repeat the last row's (an epilogue that updates in place twice).
  StmtPtr if_real_row(const LExprPtr &row, StmtPtr store) const {
    return if_then(compare(CompareOp::LT, row, imm(o_.rows)), std::move(store), seq({}));
  }

  /// One block of K: steps [k0, k0 + steps), and whether it is the first and last.
  struct KBlock {
    LExprPtr k0;
    int64_t steps;
    LExprPtr is_first, is_last;
  };

  /// The K blocks in order: a loop over all but the last, then the last
  /// (K - (blocks - 1) kc steps, at most kc); one loop over all of them
  /// where they have one size (the K loop's code once, not twice).
  StmtPtr over_k_blocks(const std::function<StmtPtr(const KBlock &)> &body) {
    int64_t before = b_.blocks - 1;
    if (before > 0 && o_.K == b_.blocks * b_.kc) // blocks of one size: one loop, the last known at run time
      return loop(k_, "kb", b_.blocks, ForKind::Serial, [&](const LExprPtr &kb) {
        return body({mul(kb, imm(b_.kc)), b_.kc, first(kb), compare(CompareOp::EQ, kb, imm(before))});
      });
    StmtPtr last_block = body({imm(before * b_.kc), o_.K - before * b_.kc, truth(before == 0), truth(true)});
    if (!before)
      return last_block;
    return seq({loop(k_, "kb", before, ForKind::Serial,
                     [&](const LExprPtr &kb) { return body({mul(kb, imm(b_.kc)), b_.kc, first(kb), truth(false)}); }),
                last_block});
  }

  /// A job: panel p (a full one where `full` holds, else the partial last
  /// one) against `count` row tiles from `first`.
  struct Job {
    LExprPtr p, full;
    LExprPtr first;
    int64_t count;
  };

  /// `f(valid)` for the columns of the job's panel: all NR of them, or the
  /// last panel's where the job has it (a branch, or one of them where that
  /// is known).
  StmtPtr by_width(const Job &job, const std::function<StmtPtr(int64_t valid)> &f) const {
    int64_t tail = o_.cols % b_.nr;
    if (!tail)
      return f(b_.nr);
    return choose(job.full, f(b_.nr), f(tail));
  }

  /// Every job (group of row tiles × panel, group-major: the claims of a
  /// thread are runs of panels against one group's rows) on the thread pool.
  StmtPtr over_jobs(const std::function<StmtPtr(const Job &)> &job) {
    int64_t groups = b_.groups, panels = b_.panels;
    auto make = [&](const LExprPtr &p, const LExprPtr &g) {
      // `p < full_panels`, which the verifier reads as a bound on p.
      Job j{p, truth(true), imm(0), b_.tiles};
      if (o_.cols % b_.nr) // the last panel is partial
        j.full = p->kind == LExprKind::IntImm || b_.full_panels == 0
                     ? truth(p->kind == LExprKind::IntImm && p->ivalue < b_.full_panels)
                     : compare(CompareOp::LT, p, imm(b_.full_panels));
      if (groups > 1) {
        j.first = mul(g, imm(b_.group_tiles));
        j.count = b_.group_tiles;
      }
      // KC rounded up to a power of two (at most the L1's worth), so that
      // products that differ a little in K share code.
      panel_ = k_.local("panel", g_.acc(), std::min(std::bit_ceil(uint64_t(b_.kc)), uint64_t(b_.kc_max)) * b_.nr);
      return alloc(panel_, job(j));
    };
    if (b_.row_jobs) // a job is one group against every panel
      return over_batch("group", groups, ForKind::Parallel, [&](const LExprPtr &g) {
        return loop(k_, "p", panels, ForKind::Serial, [&](const LExprPtr &p) { return make(p, g); });
      });
    return over_batch("job", panels * groups, ForKind::Parallel, [&](const LExprPtr &j) {
      LExprPtr p = groups == 1 ? j : panels == 1 ? imm(0) : binary(BinaryOp::FloorMod, j, imm(panels));
      LExprPtr g = groups == 1 ? imm(0) : panels == 1 ? j : binary(BinaryOp::FloorDiv, j, imm(panels));
      return make(p, g);
    });
  }

  /// The broadcast rows of one K block, packed by row tile on the pool.
  /// Rows read across (a row of aᵀ per k) are packed by runs of
  /// kAcrossSteps steps of k, a job each, kAcrossTiles tiles at a time, so
  /// that a step reads whole lines of its row of a (dE = dlogitsᵀ·x of the
  /// GPT step, 1000 x 128 x 512 on AVX2 code), and a few streams of stores
  /// (every tile each step: the GPT step 4-7% slower on one thread). Jobs of
  /// tiles instead left a 512 -> 512 convolution at 7 x 7, batch 2 (9 tiles)
  /// packing on one thread while the other waited.
  StmtPtr pack_rows(const KBlock &kb) {
    if (o_.bcast_contiguous_in_k)
      return over_batch("rt", b_.tiles, ForKind::Parallel, [&](const LExprPtr &rt) { return pack_tile(kb.k0, kb.steps, rt); });
    // runs of kAcrossSteps, shorter where a short K would leave a core without one
    int64_t length = std::clamp<int64_t>(kb.steps / std::max<int64_t>(1, k_.target.cpu_tuning().cores), 1, kAcrossSteps);
    int64_t runs = kb.steps / length, left = kb.steps % length;
    // a run's steps for kAcrossTiles tiles at a time (a few streams of stores, not one per tile).
    // Only the tiles past the last row clamp their rows (at least the last
    // one, so that products with and without spare rows share a template):
    // a clamped row is a select per lane, which made every tile's copy a
    // gather (the GPT step's dW2 = dm3ᵀ·h, 128 rows in tiles of 12).
    int64_t whole = std::min(b_.tiles - 1, o_.rows / b_.mr), chunks = whole / kAcrossTiles, rest = whole % kAcrossTiles;
    auto run = [&](const LExprPtr &first, int64_t steps) {
      auto tiles = [&](const LExprPtr &t0, int64_t count, bool last) {
        return loop(k_, "kk", steps, ForKind::Serial, [&](const LExprPtr &s) {
          LExprPtr kk = add(first, s);
          return loop(k_, "t", count, ForKind::Serial, [&](const LExprPtr &t) {
            LExprPtr rt = add(t0, t);
            return loop(k_, "i", b_.mr, ForKind::Vectorized, [&](const LExprPtr &i) {
              LExprPtr row = add(mul(rt, imm(b_.mr)), i);
              return store(rows_, tile_at(rt, kk, i), o_.bcast(last ? clamp_row(row) : row, add(kb.k0, kk)));
            });
          });
        });
      };
      return seq({loop(k_, "tc", chunks, ForKind::Serial,
                       [&](const LExprPtr &tc) { return tiles(mul(tc, imm(kAcrossTiles)), kAcrossTiles, false); }),
                  rest ? tiles(imm(chunks * kAcrossTiles), rest, false) : seq({}),
                  tiles(imm(whole), b_.tiles - whole, true)});
    };
    return seq({over_batch("rc", runs, ForKind::Parallel,
                           [&](const LExprPtr &rc) { return run(mul(rc, imm(length)), length); }),
                each_product(run(imm(runs * length), left))});
  }

  /// One panel over one K block, on one thread: packed into that thread's
  /// stack (KC × NR, the L1 at most), then the job's row tiles against it.
  StmtPtr panel_block(const Job &job, const KBlock &kb) {
    StmtPtr tiles = loop(k_, "rt", job.count, ForKind::Serial,
                         [&](const LExprPtr &i) { return micro(job, add(job.first, i), kb); });
    return seq({by_width(job, [&](int64_t valid) { return pack_panel(kb.k0, kb.steps, job.p, valid); }), tiles});
  }

  /// The elements a packed row takes where the rows are packed along k:
  /// KC and a vector more, or two where that would put the rows a multiple
  /// of 4 KiB apart (the tile's rows would share L1 sets again).
  int64_t packed_row_length() const {
    int64_t length = b_.kc + b_.vl;
    if (length * dtype_bytes(g_.acc()) % 4096 == 0)
      length += b_.vl;
    return length;
  }

  /// Where packed broadcast element (row tile rt, step kk, row i) lives:
  /// rows contiguous along k are packed so, each row's steps in a row of
  /// packed_row_length() (a copy in whole vectors; element by element into
  /// [tile][k][MR], that copy took 0.36 of 3.1 ms of a 1 x 1 convolution
  /// 1024 -> 512 at 16 x 16, batch 2); others as [tile][k][MR], a vector
  /// of the tile's rows per step.
  LExprPtr tile_at(const LExprPtr &rt, const LExprPtr &kk, const LExprPtr &i) const {
    if (o_.bcast_contiguous_in_k)
      return add(mul(add(mul(add(mul(product_, imm(b_.tiles)), rt), imm(b_.mr)), i), imm(packed_row_length())), kk);
    return add(mul(add(mul(add(mul(product_, imm(b_.tiles)), rt), imm(b_.kc)), kk), imm(b_.mr)), i);
  }

  /// The rows of row tile rt, steps [k0, k0 + steps).
  StmtPtr pack_tile(const LExprPtr &k0, int64_t steps, const LExprPtr &rt) {
    auto copy = [&](const LExprPtr &kk, const LExprPtr &i) {
      return store(rows_, tile_at(rt, kk, i), o_.bcast(clamp_row(add(mul(rt, imm(b_.mr)), i)), add(k0, kk)));
    };
    return o_.bcast_contiguous_in_k
               ? loop(k_, "i", b_.mr, ForKind::Serial,
                      [&](const LExprPtr &i) {
                        return loop(k_, "kk", steps, ForKind::Vectorized, [&](const LExprPtr &kk) { return copy(kk, i); });
                      })
               : loop(k_, "kk", steps, ForKind::Serial, [&](const LExprPtr &kk) {
                   return loop(k_, "i", b_.mr, ForKind::Vectorized, [&](const LExprPtr &i) { return copy(kk, i); });
                 });
  }

  /// Columns [0, valid) of panel p, steps [k0, k0 + steps), zeros past `valid`.
  StmtPtr pack_panel(const LExprPtr &k0, int64_t steps, const LExprPtr &p, int64_t valid) {
    auto copy = [&](const LExprPtr &kk, const LExprPtr &j) {
      return store(panel_, packed_at(kk, j), o_.vec(add(k0, kk), add(mul(p, imm(b_.nr)), j)));
    };
    StmtPtr body = o_.vec_contiguous_in_k
                       ? pack_across(valid, steps, copy)
                       : loop(k_, "kk", steps, ForKind::Serial, [&](const LExprPtr &kk) {
                           return loop(k_, "j", valid, ForKind::Vectorized, [&](const LExprPtr &j) { return copy(kk, j); });
                         });
    StmtPtr zeros = loop(k_, "kk", valid < b_.nr ? steps : 0, ForKind::Serial, [&](const LExprPtr &kk) {
      return loop(k_, "j", b_.nr - valid, ForKind::Vectorized, [&](const LExprPtr &j) {
        return store(panel_, packed_at(kk, add(j, imm(valid))), constant_of(0, g_.acc()));
      });
    });
    return seq({body, zeros});
  }

  /// A panel from an operand contiguous along k (x of x·wT): VL × VL blocks
  /// as transposing copies (loops/Lanes.h: codegen shuffles them in
  /// registers; 4 cycles an element stored one by one), the ragged edges
  /// element by element.
  StmtPtr pack_across(int64_t valid, int64_t steps, const std::function<StmtPtr(const LExprPtr &kk, const LExprPtr &j)> &copy) {
    const int64_t n = b_.vl, col_blocks = valid / n, step_blocks = steps / n;
    auto each = [&](const std::string &name, int64_t from, int64_t to, const std::function<StmtPtr(const LExprPtr &)> &f) {
      return loop(k_, name, to - from, ForKind::Serial, [&](const LExprPtr &v) { return f(add(v, imm(from))); });
    };
    StmtPtr blocks = loop(k_, "jb", col_blocks, ForKind::Serial, [&](const LExprPtr &jb) {
      return loop(k_, "k8", step_blocks, ForKind::Serial, [&](const LExprPtr &kb) {
        return loop(k_, "kk", n, ForKind::Unrolled, [&](const LExprPtr &kk) {
          return loop(k_, "j", n, ForKind::Vectorized,
                      [&](const LExprPtr &j) { return copy(add(mul(kb, imm(n)), kk), add(mul(jb, imm(n)), j)); });
        });
      });
    });
    auto elementwise = [&](int64_t j0, int64_t j1, int64_t k0, int64_t k1) {
      return each("j", j0, j1, [&](const LExprPtr &j) {
        return each("kk", k0, k1, [&](const LExprPtr &kk) { return copy(kk, j); });
      });
    };
    return seq({blocks, elementwise(0, col_blocks * n, step_blocks * n, steps), elementwise(col_blocks * n, valid, 0, steps)});
  }

  /// The register tile: rows [rt MR, rt MR + MR) × the NR columns of the
  /// job's panel over one K block. The K loop is the same code for every
  /// panel and tile; only reloading and storing the tile depend on how many
  /// of its columns and rows are real.
  StmtPtr micro(const Job &job, const LExprPtr &rt, const KBlock &kb) {
    const int64_t nr = b_.nr, vl = b_.vl, mr = b_.mr;
    LExprPtr row0 = mul(rt, imm(mr));
    DType acc_t = g_.acc();
    BufferPtr acc = k_.local("acc", acc_t, mr * nr);
    LExprPtr col0 = mul(job.p, imm(nr)), zero = constant_of(0, acc_t);
    auto slot = [&](const LExprPtr &i, const LExprPtr &j) { return add(mul(i, imm(nr)), j); };

    StmtPtr zero_all = loop(k_, "s", mr * nr, ForKind::Vectorized, [&](const LExprPtr &s) { return store(acc, s, zero); });
    auto reload = [&](bool from_output) { // the partial sums, from the output or the scratch
      return by_width(job, [&](int64_t valid) {
        return loop(k_, "i", mr, ForKind::Unrolled, [&](const LExprPtr &i) {
          return seq({loop(k_, "j", valid, ForKind::Vectorized,
                           [&](const LExprPtr &j) {
                             LExprPtr row = clamp_row(add(row0, i)), col = add(col0, j);
                             LExprPtr before = partial_ && !from_output ? load(partial_, partial_at(row, col))
                                                                        : cast(acc_t, o_.load(row, col));
                             return store(acc, slot(i, j), before);
                           }),
                      loop(k_, "j", nr - valid, ForKind::Vectorized,
                           [&](const LExprPtr &j) { return store(acc, slot(i, add(j, imm(valid))), zero); })});
        });
      });
    };
    StmtPtr init = choose(kb.is_first, g_.accumulate ? reload(true) : zero_all, reload(false));

    bool fma = k_.target.has_fma && is_float(acc_t);
    StmtPtr steps_loop = loop(k_, "kk", kb.steps, ForKind::Serial, [&](const LExprPtr &kk) {
      return loop(k_, "i", mr, ForKind::Unrolled, [&](const LExprPtr &i) {
        LExprPtr a = b_.pack_rows ? load(rows_, tile_at(rt, kk, i)) : o_.bcast(clamp_row(add(row0, i)), add(kb.k0, kk));
        return loop(k_, "jv", b_.nv, ForKind::Unrolled, [&](const LExprPtr &jv) {
          return loop(k_, "j", vl, ForKind::Vectorized, [&](const LExprPtr &j) {
            LExprPtr col = add(mul(jv, imm(vl)), j);
            LExprPtr s = slot(i, col), b = load(panel_, packed_at(kk, col));
            LExprPtr sum = fma ? mul_add(a, b, load(acc, s)) : add(load(acc, s), mul(a, b));
            return store(acc, s, sum);
          });
        });
      });
    });
    auto write = [&](bool partial, int64_t valid) {
      auto element = [&](const LExprPtr &i, const LExprPtr &j) {
        LExprPtr row = clamp_row(add(row0, i)), col = add(col0, j), sum = load(acc, slot(i, j));
        if (!partial)
          return o_.store(row, col, cast(g_.dtype, sum));
        return partial_ ? store(partial_, partial_at(row, col), sum)
                        : o_.store_raw(row, col, cast(g_.dtype, sum));
      };
      // Transposed (rows are the output's columns): a tile column at a time,
      // its MR elements side by side in the output, so that the stores and
      // what an epilogue reads at them are contiguous, not VL columns apart.
      if (o_.transposed && !partial_)
        return loop(k_, "j", valid, ForKind::Serial, [&](const LExprPtr &j) {
          return loop(k_, "i", mr, ForKind::Unrolled,
                      [&](const LExprPtr &i) { return if_real_row(add(row0, i), element(i, j)); });
        });
      return loop(k_, "i", mr, ForKind::Serial, [&](const LExprPtr &i) {
        return if_real_row(add(row0, i), loop(k_, "j", valid, ForKind::Vectorized, [&](const LExprPtr &j) { return element(i, j); }));
      });
    };
    auto write_all = [&](bool partial) { return by_width(job, [&](int64_t valid) { return write(partial, valid); }); };
    StmtPtr out = blocked_ && (g_.epilogue || partial_) ? choose(kb.is_last, write_all(false), write_all(true)) : write_all(false);
    return alloc(acc, seq({init, steps_loop, out}));
  }
};

/// A few rows of A against all of B, both contiguous along k (x·wᵀ with a
/// small batch): T × T dot products at once, each in VL lanes along k (FMA),
/// the lanes added pairwise and then the k tail in order. Nothing is packed
/// and each row of B is read once per row tile of A, where the panel schedule
/// needs a broadcast for every FMA when the panel is one vector wide.
StmtPtr gemm_dot(KernelCtx &k, const Gemm &g) {
  const CpuTuning cpu = k.target.cpu_tuning();
  const int64_t vl = cpu.lanes(g.acc()), t = 4; // 16 accumulators of 32 registers
  const int64_t steps = g.K / vl, tail = g.K % vl;
  DType acc_t = g.acc();
  bool fma = cpu.has_fma && is_float(acc_t);
  auto tile = [&](const LExprPtr &m0, int64_t mr, const LExprPtr &n0, int64_t nr) {
    BufferPtr acc = k.local("acc", acc_t, mr * nr * vl);
    auto slot = [&](int64_t i, int64_t j, const LExprPtr &l) { return add(imm((i * nr + j) * vl), l); };
    std::vector<StmtPtr> body{loop(k, "s", mr * nr * vl, ForKind::Vectorized,
                                   [&](const LExprPtr &s) { return store(acc, s, constant_of(0, acc_t)); })};
    body.push_back(loop(k, "kb", steps, ForKind::Serial, [&](const LExprPtr &kb) {
      std::vector<StmtPtr> fmas;
      for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j)
          fmas.push_back(loop(k, "l", vl, ForKind::Vectorized, [&](const LExprPtr &l) {
            LExprPtr kk = add(mul(kb, imm(vl)), l), s = slot(i, j, l);
            LExprPtr a = g.a_acc(add(m0, imm(i)), kk), b = g.b_acc(kk, add(n0, imm(j)));
            return store(acc, s, fma ? mul_add(a, b, load(acc, s)) : add(load(acc, s), mul(a, b)));
          }));
      return seq(std::move(fmas));
    }));
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j) {
        for (int64_t half = vl / 2; half >= 1; half /= 2) // the lanes pairwise, then the k tail in order
          body.push_back(loop(k, "h", half, ForKind::Vectorized, [&](const LExprPtr &h) {
            return store(acc, slot(i, j, h), add(load(acc, slot(i, j, h)), load(acc, slot(i, j, add(h, imm(half))))));
          }));
        LExprPtr s0 = slot(i, j, imm(0));
        body.push_back(loop(k, "kt", tail, ForKind::Serial, [&](const LExprPtr &kt) {
          LExprPtr kk = add(kt, imm(steps * vl));
          LExprPtr a = g.a_acc(add(m0, imm(i)), kk), b = g.b_acc(kk, add(n0, imm(j)));
          return store(acc, s0, fma ? mul_add(a, b, load(acc, s0)) : add(load(acc, s0), mul(a, b)));
        }));
        body.push_back(g.store(add(m0, imm(i)), add(n0, imm(j)), cast(g.dtype, load(acc, s0))));
      }
    return alloc(acc, seq(std::move(body)));
  };
  auto rows = [&](const LExprPtr &n0, int64_t nr) {
    return seq({loop(k, "mt", g.M / t, ForKind::Serial, [&](const LExprPtr &mt) { return tile(mul(mt, imm(t)), t, n0, nr); }),
                g.M % t ? tile(imm(g.M / t * t), g.M % t, n0, nr) : seq({})});
  };
  return seq({loop(k, "nt", g.N / t, ForKind::Parallel, [&](const LExprPtr &nt) { return rows(mul(nt, imm(t)), t); }),
              g.N % t ? rows(imm(g.N / t * t), g.N % t) : seq({})});
}

} // namespace

StmtPtr gemm_cpu_packed(KernelCtx &k, const Gemm &g) {
  // A small batch against a weight, both contiguous along k: dot products,
  // where there are registers for 4 x 4 of them (AVX-512). With 16 registers
  // (3 x 3) they measured slower than the panels: batch-16 dense 0.096 ms
  // against 0.063 on AVX2 code. (They store their sums: an accumulating
  // product, C += A·B, takes the panels.)
  const int64_t vl = k.target.vector_lanes(g.acc());
  if (!g.batch_index && !g.accumulate && k.target.vector_registers >= 32 && g.a_contiguous_in_k && g.b_contiguous_in_k && g.M <= 32 && g.N >= 4 &&
      g.K >= 8 * vl)
    return gemm_dot(k, g);
  return PackedGemm(k, g).build();
}

} // namespace gradc
