//===- cpu/conv.cpp - the CPU's convolutions ------------------------------===//
//
// The CPU strategies of nn.conv2d, nn.conv2d_transpose and
// nn.conv2d_backward_weight (their definitions: conv.cpp). Every
// convolution takes one of five paths, the first four built on the packed
// product (cpu/Gemm.cpp): a 3 x 3 one of stride 1 with enough channels and
// pixels (forward, data or weight gradient) as Winograd F(2 x 2, 3 x 3), a
// 1 x 1 one of stride 1 on large images as plain products per image
// (pointwise_path), other stride-1 ones over a zero-padded copy (the implicit im2col
// contiguous), strides (and small images, where the padding would be much of
// the work: padded_path) through a materialised im2col, or, depthwise, one
// expression per output pixel. Every output is summed in a fixed order, so a
// recomputed value is bitwise identical.
//
//===----------------------------------------------------------------------===//
#include "Cpu.h"
#include "../conv.h"
#include "gradc/loops/Range.h"
#include "gradc/op/Gemm.h"
#include "gradc/op/Registry.h"

#include <array>
#include <optional>
#include <tuple>

namespace gradc {
namespace {

//===--- the CPU's stride-1 path ------------------------------------------===//
//
// With stride 1 the implicit im2col is contiguous once the data is padded:
// on a zero-padded copy xp (rows Hp, columns Wp), tap (kh, kw) of output
// pixel (oh, ow) is xp[c][oh + kh·dh][ow + kw·dw], that is xp_c[q + kh·dh·Wp
// + kw·dw] with q = oh·Wp + ow. So the product runs over an extended grid of
// OH × Wp pixels (the Wp - OW extra columns of each row are computed and
// dropped: 2 of 58 for a 3 × 3 kernel on 56 columns), and every packed
// panel is whole vectors of xp, with no index arithmetic per element and no
// select. The weight gradient uses the same grid along k. (Strided
// convolutions keep the gathering path: their taps are not contiguous.)

/// A zero-padded copy of argument `arg` (N, C, H, W) in kernel scratch with
/// the data at (top, left) of planes of Hp rows and Wp columns (negative
/// offsets crop), laid out (N, C, Hp, Wp), or with `channel_major` (C, N, Hp,
/// Wp), then `slack` zeros (the extended grid reads up to that far past the
/// last plane); in the accumulator dtype. With strides (channel-major only)
/// each channel's padded data is split into its phases, the rows and columns
/// by their residue modulo the stride, (C, sh·sw, N, Hp, Wp):
/// xs[c, rh·sw + rw, n, i, j] = xpadded[n, c, i·sh + rh, j·sw + rw], zero
/// past the padded data; tap (kh, kw) of output pixel (oh, ow) is then
/// pixel (oh + ⌊kh·dh / sh⌋, ow + ⌊kw·dw / sw⌋) of phase (kh·dh mod sh,
/// kw·dw mod sw). Each element is written once: a row of the padding as
/// zeros, a data row as its zeros either side of the data (where zeroing
/// the whole copy first wrote the data's bytes twice, and a select per
/// element kept the phases' copy scalar: a depthwise weight gradient of
/// stride 2, 96 channels at 112 x 112, batch 2, one thread, 3.18 -> 0.91 ms).
BufferPtr padded_copy(KernelCtx &k, size_t arg, int64_t top, int64_t left, int64_t Hp, int64_t Wp, int64_t slack,
                      bool channel_major, DType acc, std::vector<StmtPtr> &stmts, Pair stride = {1, 1}) {
  const Shape &xs = k.arg_type(arg).shape;
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], sh = stride[0], sw = stride[1], S = sh * sw;
  GRADC_CHECK(channel_major || S == 1, "conv", "a padded copy split into phases is channel-major");
  BufferPtr xp = k.scratch(S > 1 ? "phases" : channel_major ? "padded_cm" : "padded", acc, N * C * S * Hp * Wp + slack);
  // the first index of a phase's plane at or past position `from` of the
  // padded axis, phase r of stride s, planes of n
  auto first_at = [](int64_t from, int64_t r, int64_t s, int64_t n) {
    return std::clamp<int64_t>(from <= r ? 0 : (from - r + s - 1) / s, 0, n);
  };
  for (int64_t rh = 0; rh < sh; ++rh)
    for (int64_t rw = 0; rw < sw; ++rw) {
      // The data rows [h0, h1) and the plane's columns [j0, j1) that hold data.
      int64_t h0 = std::max<int64_t>(0, rh - top), h1 = std::max(h0, std::min(H, (Hp - 1) * sh + rh - top + 1));
      int64_t j0 = first_at(left, rw, sw, Wp), j1 = std::max(j0, first_at(left + W, rw, sw, Wp));
      stmts.push_back(loop_nest({N, C, Hp}, [&](const Index &i) {
        LExprPtr plane = channel_major ? add(mul(add(mul(i[1], imm(S)), imm(rh * sw + rw)), imm(N)), i[0])
                                       : add(mul(i[0], imm(C)), i[1]);
        LExprPtr base = mul(add(mul(plane, imm(Hp)), i[2]), imm(Wp));
        LExprPtr h = sub(add(mul(i[2], imm(sh)), imm(rh)), imm(top));
        auto columns = [&](const LExprPtr &col, bool data) {
          LExprPtr w = sub(add(mul(col, imm(sw)), imm(rw)), imm(left));
          LExprPtr v = data ? cast(acc, k.in(arg, {i[0], i[1], clamp_index(h, H), w})) : constant_of(0, acc);
          return store(xp, add(base, col), v);
        };
        return if_then(in_range(h, h0, h1), over_inside_run(j0, j1, Wp, "z", columns),
                       over_inside_run(0, 0, Wp, "z", columns));
      }));
    }
  if (slack > 0)
    stmts.push_back(loop_nest({slack}, [&](const Index &i) {
      return store(xp, add(imm(N * C * S * Hp * Wp), i[0]), constant_of(0, acc));
    }));
  return xp;
}

/// The fewest output pixels (columns) a convolution's product takes where
/// its scratch allows: panels of 32 columns, a few for each core. With
/// half the L2 alone, 512 -> 512 at 7 x 7 (4608 rows) took 3 output rows of
/// one image at a time, products of 21 columns: 6.2 ms; the batch's 98
/// pixels at once (1.8 MB): 5.1 ms.
constexpr int64_t kMinProductPixels = 256;

/// Images per chunk: as many as fit in `budget` bytes, at least one (a
/// batch of none is a chunk of one over no images: std::clamp(x, 1, 0) was
/// undefined).
int64_t images_per_chunk(int64_t budget, int64_t bytes_per_image, int64_t N) {
  return std::max<int64_t>(1, std::min(budget / std::max<int64_t>(1, bytes_per_image), N));
}

/// dy (argument 0, (N, O, OH, OW)) spread onto the extended grid of rows of
/// `row` pixels, `plane` pixels an image, channel-major: dy[n, o, oh, ow]
/// at o·per_channel + n·plane + oh·row + ow, zeros elsewhere (per_channel at
/// least N·plane; plane a whole number of rows, at least OH of them), in the
/// accumulator dtype.
BufferPtr grad_on_grid(KernelCtx &k, const ConvShape &s, int64_t per_channel, int64_t plane, int64_t row, DType acc,
                       std::vector<StmtPtr> &stmts) {
  BufferPtr dyx = k.scratch("extended_grad", acc, s.O * per_channel);
  // each element written once (padded_copy): a grid row past OH as zeros,
  // an output row as its pixels then zeros
  int64_t rows = plane / row;
  stmts.push_back(loop_nest({s.O, s.N, rows}, [&](const Index &i) {
    LExprPtr base = add(add(mul(i[0], imm(per_channel)), mul(i[1], imm(plane))), mul(i[2], imm(row)));
    auto columns = [&](const LExprPtr &col, bool data) {
      LExprPtr v = data ? cast(acc, k.in(0, {i[1], i[0], clamp_index(i[2], s.OH), col})) : constant_of(0, acc);
      return store(dyx, add(base, col), v);
    };
    return if_then(compare(CompareOp::LT, i[2], imm(s.OH)), over_inside_run(0, s.OW, row, "z", columns),
                   over_inside_run(0, 0, row, "z", columns));
  }));
  if (int64_t tail = per_channel - s.N * plane; tail > 0)
    stmts.push_back(loop_nest({s.O, tail}, [&](const Index &i) {
      return store(dyx, add(add(mul(i[0], imm(per_channel)), imm(s.N * plane)), i[1]), constant_of(0, acc));
    }));
  return dyx;
}

/// out[n, g·Og + m, oh, ow] = Σ_(c, kh, kw) weight(g·Og + m, (c, kh, kw)) ·
/// xp[g·Cg + c, n, oh + kh·dh, ow + kw·dw] on the extended grid of a chunk
/// of images at once (xp channel-major: the images of a channel follow each
/// other, so q runs over the chunk's Hp·Wp pixels each; the rows past OH of
/// an image are computed and dropped too): one packed product per chunk and
/// group, its result in scratch, then copied out through the epilogue. A
/// chunk's result fills about half the L2, or kMinProductPixels' worth
/// where that is more, so the copy reads it from there (one 56 x 56 image of 64
/// channels: 21.5 -> 19.7 ms for the batch of 8 against all 8 at once), and
/// small images share a product (32 x 32 images one at a time: a fork-join
/// each, two threads slower than one).
StmtPtr correlate_padded(KernelCtx &k, const BufferPtr &xp, int64_t N, int64_t C, int64_t Hp, int64_t Wp,
                         int64_t groups, int64_t KH, int64_t KW, int64_t dh, int64_t dw,
                         const std::function<LExprPtr(const LExprPtr &g, const LExprPtr &m, const LExprPtr &kk)> &weight) {
  const Shape &os = k.call.type.shape;
  int64_t O = os[1], OH = os[2], OW = os[3], Og = O / groups, Cg = C / groups, taps = KH * KW;
  int64_t plane = Hp * Wp, all = N * plane;
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  // Each chunk streams the whole weight past its pixels (and packs it where
  // the pixels are the register tile's rows), so a chunk takes at least
  // kMinProductPixels where the batch has them, whatever scratch its result
  // needs: 512 -> 2048 at 7 x 7, batch 2 (0.4 MB of result an image) one
  // product over both images, 1.32 -> 1.12 ms, its data gradient 1.36 ->
  // 1.19 ms; 1024 -> 512 at 14 x 14 2.21 -> 2.05 ms (one thread). Images of
  // 256 pixels and more keep to half the L2 (1024 -> 512 at 16 x 16, two
  // images at once: 2.86 -> 3.06 ms).
  int64_t chunk = std::max(images_per_chunk(k.target.cpu_tuning().l2_bytes / 2, Og * plane * dtype_bytes(acc), N),
                           std::min(N, (kMinProductPixels + plane - 1) / std::max<int64_t>(1, plane)));
  BufferPtr ext = k.scratch("extended", acc, Og * chunk * plane);
  // images [first, first + count) of group g
  auto product = [&](const LExprPtr &g, const LExprPtr &first, int64_t count) {
    int64_t grid = (count - 1) * plane + OH * Wp; // not the last image's rows past OH
    Gemm gm;
    gm.M = Og, gm.N = grid, gm.K = Cg * taps;
    gm.dtype = acc; // the scratch holds sums in the accumulator dtype
    // A 1 x 1 kernel's taps are plain loads, which the product may as well
    // broadcast as pack: the orientation is then free to pick the side with
    // whole panels (2048 -> 512 at 7 x 7, batch 2: 98 pixels in 4 panels of
    // 32, or 2048 channels in 64)
    gm.b_gathered = taps > 1;
    gm.a = [&, g](const LExprPtr &m, const LExprPtr &kk) { return weight(g, m, kk); };
    gm.b = [&, g, first](const LExprPtr &kk, const LExprPtr &q) {
      TapIndex t(kk, KH, KW);
      LExprPtr channel = add(mul(add(mul(g, imm(Cg)), t.c), imm(all)), mul(first, imm(plane)));
      LExprPtr offset = add(mul(t.kh, imm(dh * Wp)), mul(t.kw, imm(dw)));
      return load(xp, add(add(channel, offset), q));
    };
    auto at_ext = [grid](const LExprPtr &m, const LExprPtr &q) { return add(mul(m, imm(grid)), q); };
    gm.store = [&, at_ext](const LExprPtr &m, const LExprPtr &q, const LExprPtr &v) { return store(ext, at_ext(m, q), v); };
    gm.store_raw = gm.store;
    gm.load = [&, at_ext](const LExprPtr &m, const LExprPtr &q) { return load(ext, at_ext(m, q)); };
    StmtPtr run = gemm_cpu_packed(k, gm);
    StmtPtr copy_out = loop_nest({count, Og, OH, OW}, [&](const Index &i) {
      Index idx{add(first, i[0]), add(mul(g, imm(Og)), i[1]), i[2], i[3]};
      LExprPtr q = add(add(mul(i[0], imm(plane)), mul(i[2], imm(Wp))), i[3]);
      return k.put(idx, flat_index(os, idx), cast(dt, load(ext, at_ext(i[1], q))));
    });
    return seq({run, copy_out});
  };
  int64_t full = N / chunk, rest = N % chunk;
  return loop_nest(
      {groups},
      [&](const Index &g) {
        StmtPtr chunks = loop_nest(
            {full}, [&](const Index &c) { return product(g[0], mul(c[0], imm(chunk)), chunk); }, ForKind::Serial,
            "chunk");
        return rest ? seq({chunks, product(g[0], imm(full * chunk), rest)}) : chunks;
      },
      ForKind::Serial);
}

/// Pixels an image from which a 1 x 1 convolution of stride 1 without
/// padding is a product per image (pointwise_direct). Below it the images of
/// a chunk share a product over the channel-major copy: at 28 x 28 (784
/// pixels, batch 4, 512 -> 256, one thread) per image the forward took 5.4
/// against 5.0 ms and the weight gradient (K = 784 an image) 6.0 against
/// 5.0; at 56 x 56 per image is 8-27% faster for all three. The weight
/// gradient's products have K = the image's pixels: at 32 x 32, batch 4,
/// 512 -> 256, 7.3 against 6.8 ms per image, so it needs larger images.
constexpr int64_t kPointwiseMinPixels = 1024, kPointwiseWeightMinPixels = 2048;

/// Whether convolution `s` (forward, transposed or its weight gradient) is
/// 1 x 1 of stride 1 on images of `min_pixels` or more, its output the size
/// of its input.
bool pointwise_path(const ConvShape &s, int64_t min_pixels = kPointwiseMinPixels) {
  return s.KH == 1 && s.KW == 1 && s.s[0] == 1 && s.s[1] == 1 && s.OH == s.H && s.OW == s.W &&
         s.H * s.W >= min_pixels;
}

/// out[n, g·Og + m, p] = Σ_c weight(g, m, c) · x[n, g·Cg + c, p] for a 1 x 1
/// convolution of stride 1 (pointwise_path): one plain packed product per
/// image and group, all of them one batch (one fork-join), the data read
/// and the result stored where they lie, through the epilogue. The padded
/// path copied the data channel-major and the result out of scratch, two
/// passes over memory more (256 -> 128 at 56 x 56, batch 4: 24 MB).
StmtPtr pointwise_direct(KernelCtx &k, const ConvShape &s,
                         const std::function<LExprPtr(const LExprPtr &g, const LExprPtr &m, const LExprPtr &c)> &weight) {
  int64_t P = s.H * s.W;
  Gemm gm;
  gm.M = s.Og(), gm.N = P, gm.K = s.Cg();
  gm.dtype = k.call.type.dtype;
  gm.epilogue = k.has_epilogue();
  gm.batch = s.N * s.groups, gm.batch_index = k.var("image");
  LExprPtr b = var_ref(gm.batch_index);
  LExprPtr n = s.groups == 1 ? b : binary(BinaryOp::FloorDiv, b, imm(s.groups));
  LExprPtr g = s.groups == 1 ? imm(0) : binary(BinaryOp::FloorMod, b, imm(s.groups));
  gm.a = [&, g](const LExprPtr &m, const LExprPtr &c) { return weight(g, m, c); };
  gm.b = [&, n, g](const LExprPtr &c, const LExprPtr &p) {
    return k.in_flat(0, add(mul(add(add(mul(n, imm(s.C)), mul(g, imm(s.Cg()))), c), imm(P)), p));
  };
  auto channel = [&, g](const LExprPtr &m) { return add(mul(g, imm(s.Og())), m); };
  auto flat = [&, n, channel](const LExprPtr &m, const LExprPtr &p) {
    return add(mul(add(mul(n, imm(s.O)), channel(m)), imm(P)), p);
  };
  gm.store = [&, n, channel, flat](const LExprPtr &m, const LExprPtr &p, const LExprPtr &v) {
    auto [oh, ow] = pixel(p, s.OW);
    return k.put(Index{n, channel(m), oh, ow}, flat(m, p), v);
  };
  gm.load = [&, flat](const LExprPtr &m, const LExprPtr &p) { return load(k.out(), flat(m, p)); };
  if (k.output_holds_partials(gm.acc()))
    gm.store_raw = [&, flat](const LExprPtr &m, const LExprPtr &p, const LExprPtr &v) {
      return store(k.out(), flat(m, p), v);
    };
  return gemm_cpu_packed(k, gm);
}

/// dw[g·Og + m, c] = Σ_n Σ_p dy[n, g·Og + m, p] · x[n, g·Cg + c, p] for a
/// 1 x 1 convolution of stride 1 (pointwise_path) whose output takes
/// partial sums and no epilogue: per image and group a product over the
/// image's pixels, both operands contiguous along k where they lie, the
/// images' products added into the output one after another
/// (Gemm::accumulate), so the sum runs over the images in order. The padded
/// path copied both operands channel-major first (256 -> 128 at 56 x 56,
/// batch 4: 17% of its time).
StmtPtr pointwise_backward_weight(KernelCtx &k, const ConvShape &s) {
  int64_t P = s.H * s.W;
  auto product = [&](const LExprPtr &n, const LExprPtr &g, bool accumulate) {
    Gemm gm;
    gm.M = s.Og(), gm.N = s.Cg(), gm.K = P;
    gm.dtype = k.call.type.dtype;
    gm.accumulate = accumulate;
    gm.a_contiguous_in_k = gm.b_contiguous_in_k = true;
    gm.a = [&, n, g](const LExprPtr &m, const LExprPtr &p) {
      return k.in_flat(0, add(mul(add(add(mul(n, imm(s.O)), mul(g, imm(s.Og()))), m), imm(P)), p));
    };
    gm.b = [&, n, g](const LExprPtr &p, const LExprPtr &c) {
      return k.in_flat(1, add(mul(add(add(mul(n, imm(s.C)), mul(g, imm(s.Cg()))), c), imm(P)), p));
    };
    auto flat = [&, g](const LExprPtr &m, const LExprPtr &c) {
      return add(mul(add(mul(g, imm(s.Og())), m), imm(s.Cg())), c);
    };
    gm.store = [&, flat](const LExprPtr &m, const LExprPtr &c, const LExprPtr &v) { return store(k.out(), flat(m, c), v); };
    gm.store_raw = gm.store;
    gm.load = [&, flat](const LExprPtr &m, const LExprPtr &c) { return load(k.out(), flat(m, c)); };
    return gemm_cpu_packed(k, gm);
  };
  return loop_nest(
      {s.groups},
      [&](const Index &g) {
        StmtPtr rest = loop_nest(
            {s.N - 1}, [&](const Index &n) { return product(add(n[0], imm(1)), g[0], true); }, ForKind::Serial,
            "image");
        return seq({product(imm(0), g[0], false), rest});
      },
      ForKind::Serial);
}

/// dw[g·Og + m, (c, kh, kw)] = Σ_(n, q) dyx[g·Og + m, n, q] · xp[g·Cg + c, n, q + kh·dh·Wp + kw·dw]
/// over every image's extended grid of Hp × Wp pixels: dyx is dy spread
/// onto that grid with zeros elsewhere, xp the channel-major padded data, so
/// both operands are contiguous along k (the layout of x·wᵀ). The zeros of
/// dyx meet data that no tap of the output reads (the columns past OW and
/// the rows past OH); only a non-finite value there would show (NaN where
/// the exact sum is ±inf).
StmtPtr backward_weight_padded(KernelCtx &k, const ConvShape &s, DType dt, DType acc) {
  int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3], plane = Hp * Wp;
  int64_t K = s.N * plane, cols = s.Cg() * s.taps();
  std::vector<StmtPtr> stmts;
  BufferPtr xp = padded_copy(k, 1, s.p[0], s.p[1], Hp, Wp, s.d[0] * (s.KH - 1) * Wp + s.d[1] * (s.KW - 1), true, acc,
                             stmts);
  BufferPtr dyx = grad_on_grid(k, s, K, plane, Wp, acc, stmts);
  stmts.push_back(loop_nest(
      {s.groups},
      [&](const Index &at) {
        Gemm g;
        g.M = s.Og(), g.N = cols, g.K = K;
        g.dtype = dt;
        g.epilogue = k.has_epilogue();
        g.a_contiguous_in_k = g.b_contiguous_in_k = true;
        g.a = [&](const LExprPtr &m, const LExprPtr &kk) {
          return load(dyx, add(mul(add(mul(at[0], imm(s.Og())), m), imm(K)), kk));
        };
        g.b = [&](const LExprPtr &kk, const LExprPtr &col) {
          TapIndex t(col, s.KH, s.KW);
          LExprPtr base = mul(add(mul(at[0], imm(s.Cg())), t.c), imm(K));
          LExprPtr offset = add(mul(t.kh, imm(s.d[0] * Wp)), mul(t.kw, imm(s.d[1])));
          return load(xp, add(add(base, offset), kk));
        };
        auto flat = [&](const LExprPtr &m, const LExprPtr &col) {
          return add(mul(add(mul(at[0], imm(s.Og())), m), imm(cols)), col);
        };
        auto index = [&](const LExprPtr &m, const LExprPtr &col) {
          TapIndex t(col, s.KH, s.KW);
          return Index{add(mul(at[0], imm(s.Og())), m), t.c, t.kh, t.kw};
        };
        g.store = [&](const LExprPtr &m, const LExprPtr &col, const LExprPtr &v) {
          return k.put(index(m, col), flat(m, col), v);
        };
        g.load = [&](const LExprPtr &m, const LExprPtr &col) { return load(k.out(), flat(m, col)); };
        if (k.output_holds_partials(acc))
          g.store_raw = [&](const LExprPtr &m, const LExprPtr &col, const LExprPtr &v) {
            return store(k.out(), flat(m, col), v);
          };
        return gemm_cpu_packed(k, g);
      },
      ForKind::Serial));
  return seq(stmts);
}

//===--- the CPU's strided path -------------------------------------------===//
//
// With strides the taps of neighbouring output pixels are not contiguous,
// but the output (or, transposed, the input) is s² times smaller than the
// data, so the im2col is materialised: one copy of the taps, C·KH·KW rows
// of a chunk of images' OH·OW pixels (a chunk fills about half the L2: small
// images share a product and a fork-join, large ones keep the scratch
// bounded), then one plain packed product per group over it; the weight
// gradient sums over the whole batch, so its im2col holds every image. A transposed convolution multiplies
// first, into per-tap rows over its input pixels (col = wᵀ·x), then gathers
// each output pixel's taps from them (col2im), in a fixed order. No zero is
// multiplied, where spreading the data by the strides would multiply s² as
// many.

/// Kernel widths up to which im2col unrolls its column taps (below).
constexpr int64_t kMaxUnrolledColumnTaps = 16;

/// col[(c, kh, kw), q] for the pixels q of output rows [oh0, oh0 + h) of
/// an OH × OW output in `count` images from n (q counted from the first
/// of them, image by image), c in [0, C): x[n, c, tap(oh, kh), tap(ow, kw)],
/// zero in the padding; `at` maps (row, pixel) to its place in the scratch
/// buffer. The rows (c, kh) are the outer loop, the images inside: split
/// over the images, two threads wrote the two halves of every row (512 ->
/// 512 at 7 x 7, batch 2: the copy took 3.5 times one thread's time).
/// The column taps are unrolled, so that each (kw, output row) copies its
/// columns inside the data (ConvShape::inside_outputs) without a select or
/// a clamp, a run of whole vectors at stride 1, and writes zeros either
/// side; a row of the padding is zeros (a 256 -> 256 convolution at 14 x 14: the im2col 8.5 -> 2.6%
/// of its time, where a select and two clamps per element kept it scalar).
StmtPtr im2col(const KernelCtx &k, size_t arg, const ConvShape &s, const LExprPtr &n, int64_t count,
               const LExprPtr &oh0, int64_t h, const BufferPtr &col,
               const std::function<LExprPtr(const LExprPtr &row, const LExprPtr &q)> &at, DType acc) {
  if (s.KW > kMaxUnrolledColumnTaps)
    return loop_nest({s.C, s.KH, s.KW, count, h, s.OW}, [&](const Index &i) {
      LExprPtr row = add(mul(add(mul(i[0], imm(s.KH)), i[1]), imm(s.KW)), i[2]);
      LExprPtr q = add(mul(add(mul(i[3], imm(h)), i[4]), imm(s.OW)), i[5]);
      return store(col, at(row, q), s.data_at(k, arg, add(n, i[3]), i[0], add(oh0, i[4]), i[5], i[1], i[2], acc));
    });
  return loop_nest({s.C, s.KH}, [&](const Index &i) {
    std::vector<StmtPtr> taps;
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      auto [first, last] = s.inside_outputs(1, kw, s.W, s.OW);
      LExprPtr row = add(mul(add(mul(i[0], imm(s.KH)), i[1]), imm(s.KW)), imm(kw));
      taps.push_back(loop_nest(
          {count},
          [&](const Index &image) {
            return loop_nest(
                {h},
                [&](const Index &row_of) {
                  Index r{image[0], row_of[0]};
                  LExprPtr ih = s.tap(0, add(oh0, r[1]), i[1]);
                  // the row's columns: the data's where the tap lies inside, else zeros
                  auto columns = [&](const LExprPtr &ow, bool data) {
                    LExprPtr v =
                        data ? cast(acc, k.in(arg, {add(n, r[0]), i[0], clamp_index(ih, s.H), s.tap(1, ow, imm(kw))}))
                             : constant_of(0, acc);
                    return store(col, at(row, add(mul(add(mul(r[0], imm(h)), r[1]), imm(s.OW)), ow)), v);
                  };
                  return if_then(in_range(ih, 0, s.H), over_inside_run(first, last, s.OW, "ow", columns),
                                 over_inside_run(0, 0, s.OW, "ow", columns));
                },
                ForKind::Spatial, "oh");
          },
          ForKind::Spatial, "image"));
    }
    return seq(taps);
  });
}

/// `body(image, first output row, rows)` over every image in chunks of `R`
/// output rows: the full chunks in a serial loop, then the rest.
StmtPtr over_row_chunks(const ConvShape &s, int64_t R,
                        const std::function<StmtPtr(const LExprPtr &, const LExprPtr &, int64_t)> &body) {
  int64_t blocks = s.OH / R, rest = s.OH % R;
  return loop_nest({s.N},
                   [&](const Index &n) {
                     return seq({loop_nest({blocks}, [&](const Index &b) { return body(n[0], mul(b[0], imm(R)), R); },
                                           ForKind::Serial, "rows"),
                                 rest ? body(n[0], imm(blocks * R), rest) : seq({})});
                   },
                   ForKind::Serial, "n");
}

/// How many images one product of the strided paths takes: as many as keep
/// its `bytes_per_image` of scratch within half the L2, so a batch of small
/// images shares one fork-join and the scratch stays bounded for large ones.
/// `body(first image, count)` over the batch in chunks of `chunk` images:
/// the full chunks in a serial loop, then the rest.
StmtPtr over_chunks(int64_t N, int64_t chunk, const std::function<StmtPtr(const LExprPtr &, int64_t)> &body) {
  int64_t full = N / chunk, rest = N % chunk;
  StmtPtr chunks = loop_nest({full}, [&](const Index &c) { return body(mul(c[0], imm(chunk)), chunk); },
                             ForKind::Serial, "chunk");
  return rest ? seq({chunks, body(imm(full * chunk), rest)}) : chunks;
}

/// The scratch a chunk of the strided paths may take: half the L2, or
/// kMinProductPixels columns of `column_bytes` each where that is more.
/// The transposed one multiplies first over the chunk's input pixels: 512 ->
/// 512 at 7 x 7, one image (49 columns) at a time, 26.9 ms for a batch of 8
/// and 6.8 for 2; five at a time 22.1 and 6.2 (256 -> 512 of stride 2 from
/// 14 x 14, batch 8: 12.0 -> 9.5 and 11.1 ms in two runs).
int64_t chunk_budget(const KernelCtx &k, int64_t column_bytes) {
  return std::max(k.target.cpu_tuning().l2_bytes / 2, column_bytes * kMinProductPixels);
}

/// Output pixels from which an image of the strided forward is a product of
/// its own, its output columns contiguous: across the images of a chunk,
/// each column's image and pixel were a division and a modulo per element
/// of the store, which short products felt (1 x 1 of stride 2, K = 64 at
/// 56 x 56: 0.53 -> 0.26 ms; K = 128 at 28 x 28: 0.39 -> 0.28 ms).
constexpr int64_t kOwnProductPixels = 128;

/// conv2d with strides: per chunk of images, their im2col, rows (c, kh,
/// kw) by (n, q), then per group out = w · col. Where one image's im2col
/// exceeds half the L2 and kMinProductPixels columns' worth, per chunk of
/// output rows of one image instead (resnet18's 7x7 stride-2 stem at
/// 224 x 224: 7.4 MB of scratch, which the smallest workspace of its adjoint
/// under --remat=auto held twice).
StmtPtr conv2d_strided(KernelCtx &k, const ConvShape &s, DType acc) {
  int64_t P = s.OH * s.OW, K = s.Cg() * s.taps(), rows = s.C * s.taps();
  int64_t image_bytes = rows * P * dtype_bytes(acc);
  int64_t budget = chunk_budget(k, rows * dtype_bytes(acc));
  // Output pixels [0, NP) of the chunk: pixel j is image first + j / per,
  // output row row0 + (j % per) / OW; `per` pixels of an image in the chunk.
  auto products = [&](const BufferPtr &col, const LExprPtr &first, const LExprPtr &row0, int64_t NP, int64_t per) {
    return loop_nest(
        {s.groups},
        [&](const Index &g) {
          Gemm gm;
          gm.M = s.Og(), gm.N = NP, gm.K = K;
          gm.dtype = k.call.type.dtype;
          gm.epilogue = k.has_epilogue();
          gm.c_scattered = per != NP;
          auto o = [&](const LExprPtr &m) { return add(mul(g[0], imm(s.Og())), m); };
          gm.a = [&](const LExprPtr &m, const LExprPtr &kk) { return cast(acc, k.in_flat(1, add(mul(o(m), imm(K)), kk))); };
          gm.b = [&](const LExprPtr &kk, const LExprPtr &j) {
            return load(col, add(mul(add(mul(g[0], imm(K)), kk), imm(NP)), j));
          };
          auto image = [&](const LExprPtr &j) { return per == NP ? first : add(first, binary(BinaryOp::FloorDiv, j, imm(per))); };
          auto at = [&](const LExprPtr &j) { // the pixel's flat index in its image
            LExprPtr q = per == NP ? j : binary(BinaryOp::FloorMod, j, imm(per));
            return add(mul(row0, imm(s.OW)), q);
          };
          auto flat = [&](const LExprPtr &m, const LExprPtr &j) {
            return add(mul(add(mul(image(j), imm(s.O)), o(m)), imm(P)), at(j));
          };
          gm.store = [&](const LExprPtr &m, const LExprPtr &j, const LExprPtr &v) {
            auto [oh, ow] = pixel(at(j), s.OW);
            return k.put({image(j), o(m), oh, ow}, flat(m, j), v);
          };
          gm.load = [&](const LExprPtr &m, const LExprPtr &j) { return load(k.out(), flat(m, j)); };
          if (k.output_holds_partials(acc))
            gm.store_raw = [&](const LExprPtr &m, const LExprPtr &j, const LExprPtr &v) {
              return store(k.out(), flat(m, j), v);
            };
          return gemm_cpu_packed(k, gm);
        },
        ForKind::Serial);
  };
  if (image_bytes > budget && s.OH > 1) {
    int64_t R = std::clamp<int64_t>(budget / (rows * s.OW * dtype_bytes(acc)), 1, s.OH);
    BufferPtr col = k.scratch("im2col", acc, rows * R * s.OW);
    return over_row_chunks(s, R, [&](const LExprPtr &n, const LExprPtr &oh0, int64_t h) {
      int64_t Q = h * s.OW;
      StmtPtr fill = im2col(k, 0, s, n, 1, oh0, h, col,
                            [&](const LExprPtr &r, const LExprPtr &q) { return add(mul(r, imm(Q)), q); }, acc);
      return seq({fill, products(col, n, oh0, Q, Q)});
    });
  }
  int64_t chunk = P >= kOwnProductPixels ? 1 : images_per_chunk(budget, image_bytes, s.N);
  BufferPtr col = k.scratch("im2col", acc, rows * chunk * P);
  return over_chunks(s.N, chunk, [&](const LExprPtr &first, int64_t count) {
    int64_t NP = count * P;
    StmtPtr fill = im2col(k, 0, s, first, count, imm(0), s.OH, col,
                          [&](const LExprPtr &r, const LExprPtr &q) { return add(mul(r, imm(NP)), q); }, acc);
    return seq({fill, products(col, first, imm(0), NP, P)});
  });
}

/// The scratch (im2col and dy rows) the strided weight gradient may take
/// at once. Below it one product covers the batch; above it the pixels go in
/// chunks of output rows, each chunk's product added into a running sum:
/// resnet18's 7x7 stride-2 stem at 2x3x224x224 took 21 MB in one piece, a
/// third of its adjoint's smallest workspace under --remat=auto.
constexpr int64_t kWeightGradScratchBytes = int64_t(8) << 20;

/// Per group, out(m, c) = Σ_k dy_row(o, k) · col(c, k) over K pixels: the dy
/// rows of the group's output channels (o = g·Og + m) against its im2col
/// rows, both contiguous along k. `place(m, c)` is where (o, c) of the
/// result goes.
StmtPtr weight_grad_products(KernelCtx &k, const ConvShape &s, int64_t K,
                             const std::function<LExprPtr(const LExprPtr &o, const LExprPtr &kk)> &dy_row,
                             const BufferPtr &col, DType dt, const std::function<void(Gemm &, const LExprPtr &g)> &place) {
  int64_t cols = s.Cg() * s.taps();
  return loop_nest(
      {s.groups},
      [&](const Index &g) {
        Gemm gm;
        gm.M = s.Og(), gm.N = cols, gm.K = K;
        gm.dtype = dt;
        gm.a_contiguous_in_k = gm.b_contiguous_in_k = true;
        gm.a = [&](const LExprPtr &m, const LExprPtr &kk) { return dy_row(add(mul(g[0], imm(s.Og())), m), kk); };
        gm.b = [&](const LExprPtr &kk, const LExprPtr &c) {
          return load(col, add(mul(add(mul(g[0], imm(cols)), c), imm(K)), kk));
        };
        place(gm, g[0]);
        return gemm_cpu_packed(k, gm);
      },
      ForKind::Serial);
}

/// conv2d_backward_weight with strides: the im2col, rows (c, kh, kw) by
/// pixels (n, q), and dy as (O, pixels); per group dw = dy · colᵀ. Over the
/// whole batch in one product where its scratch is at most
/// kWeightGradScratchBytes, else per chunk of output rows of one image (as
/// many rows in each), each chunk's product added into the sum as it runs,
/// dy's rows read where they lie (a copy of them was 10% of the time of
/// resnet50's stem's weight gradient, batch 2, one thread).
StmtPtr backward_weight_strided(KernelCtx &k, const ConvShape &s, DType dt, DType acc) {
  int64_t P = s.OH * s.OW, NP = s.N * P, cols = s.Cg() * s.taps(), rows = s.C * s.taps();
  int64_t pixel_bytes = (rows + s.O) * dtype_bytes(acc);
  auto to_out = [&](const LExprPtr &o, const LExprPtr &c) { return add(mul(o, imm(cols)), c); };
  auto finish = [&](const LExprPtr &o, const LExprPtr &c, const LExprPtr &v) {
    TapIndex t(c, s.KH, s.KW);
    return k.put({o, t.c, t.kh, t.kw}, to_out(o, c), v);
  };
  if (pixel_bytes * NP <= kWeightGradScratchBytes) {
    BufferPtr col = k.scratch("im2col", acc, rows * NP), dyt = k.scratch("grad_rows", acc, s.O * NP);
    return seq({im2col(k, 1, s, imm(0), s.N, imm(0), s.OH, col,
                       [&](const LExprPtr &r, const LExprPtr &q) { return add(mul(r, imm(NP)), q); }, acc),
                loop_nest({s.O, s.N, P}, // by channel: each row of dyt written by one thread
                          [&](const Index &i) {
                            LExprPtr at = add(add(mul(i[0], imm(NP)), mul(i[1], imm(P))), i[2]);
                            return store(dyt, at,
                                         cast(acc, k.in_flat(0, add(mul(add(mul(i[1], imm(s.O)), i[0]), imm(P)), i[2]))));
                          }),
                weight_grad_products(
                    k, s, NP, [&](const LExprPtr &o, const LExprPtr &kk) { return load(dyt, add(mul(o, imm(NP)), kk)); },
                    col, dt, [&](Gemm &gm, const LExprPtr &g) {
                  auto o = [g, &s](const LExprPtr &m) { return add(mul(g, imm(s.Og())), m); };
                  gm.epilogue = k.has_epilogue();
                  gm.store = [&, o](const LExprPtr &m, const LExprPtr &c, const LExprPtr &v) { return finish(o(m), c, v); };
                  gm.load = [&, o](const LExprPtr &m, const LExprPtr &c) { return load(k.out(), to_out(o(m), c)); };
                  if (k.output_holds_partials(acc))
                    gm.store_raw = [&, o](const LExprPtr &m, const LExprPtr &c, const LExprPtr &v) {
                      return store(k.out(), to_out(o(m), c), v);
                    };
                })});
  }
  int64_t column_bytes = rows * dtype_bytes(acc);
  int64_t R = std::clamp<int64_t>(kWeightGradScratchBytes / (column_bytes * s.OW), 1, s.OH);
  R = (s.OH + (s.OH + R - 1) / R - 1) / ((s.OH + R - 1) / R); // as many rows in every chunk as can be
  BufferPtr col = k.scratch("im2col", acc, rows * R * s.OW), sum = k.scratch("sum", acc, s.O * cols);
  // Output rows [oh0, oh0 + h) of image n: their im2col, then sum += the
  // product of dy's rows (read where they lie: one image's rows are
  // contiguous) and the im2col's.
  StmtPtr chunks = over_row_chunks(s, R, [&](const LExprPtr &n, const LExprPtr &oh0, int64_t h) {
    int64_t Q = h * s.OW;
    StmtPtr fill = im2col(k, 1, s, n, 1, oh0, h, col,
                          [&](const LExprPtr &r, const LExprPtr &q) { return add(mul(r, imm(Q)), q); }, acc);
    auto dy_row = [&](const LExprPtr &o, const LExprPtr &q) {
      return cast(acc, k.in_flat(0, add(add(mul(add(mul(n, imm(s.O)), o), imm(P)), mul(oh0, imm(s.OW))), q)));
    };
    StmtPtr product = weight_grad_products(k, s, Q, dy_row, col, acc, [&](Gemm &gm, const LExprPtr &g) {
      auto o = [g, &s](const LExprPtr &m) { return add(mul(g, imm(s.Og())), m); };
      gm.accumulate = true;
      gm.store = [&, o](const LExprPtr &m, const LExprPtr &c, const LExprPtr &v) { return store(sum, to_out(o(m), c), v); };
      gm.load = [&, o](const LExprPtr &m, const LExprPtr &c) { return load(sum, to_out(o(m), c)); };
      gm.store_raw = gm.store;
    });
    return seq({fill, product});
  });
  return seq({loop_nest({s.O * cols}, [&](const Index &i) { return store(sum, i[0], constant_of(0, acc)); }),
              chunks,
              loop_nest({s.O, cols}, [&](const Index &i) { return finish(i[0], i[1], cast(dt, load(sum, to_out(i[0], i[1])))); })});
}

/// The kernel taps t along `axis` that reach the transposed outputs o ≡
/// `residue` (mod the stride), with the data offset each reads: o = residue
/// + s·i reads data position i + offset at tap t where (residue + pad -
/// t·d) is a multiple of s (the offset its quotient); in tap order.
std::vector<std::pair<int64_t, int64_t>> residue_taps(const ConvShape &s, int axis, int64_t residue, int64_t taps) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t t = 0; t < taps; ++t) {
    int64_t num = residue + s.p[axis] - t * s.d[axis], q = floor_div_positive(num, s.s[axis]);
    if (num == q * s.s[axis])
      out.push_back({t, q});
  }
  return out;
}

/// The most residue classes col2im_by_residue writes out (4 x 4 strides),
/// and the most taps a class sums in one expression (a 16 x 16 kernel at
/// stride 2).
constexpr int64_t kMaxResidueClasses = 16, kMaxClassTaps = 64;

/// The gather of a transposed convolution multiplied first (col2im): out(n,
/// o, oh, ow) = Σ over taps (kh, kw), in row-major order, of tap(n, o, kh,
/// kw, ih, iw) where output pixel (oh, ow) takes data pixel (ih, iw) at that
/// tap. The outputs go by their residues modulo the strides, which fix
/// their taps and offsets (residue_taps: 3 x 3 of stride 2, 1 or 2 taps per
/// axis, where every output scanned all 9 with a division and a select
/// each: 22% of a 256 -> 128 data gradient at 28 x 28); a tap's data row
/// is checked once per output row, its columns by the run of outputs that
/// read inside the data for every tap (over_inside_run); the column classes
/// of an output row share one loop, their stores side by side. Past
/// kMaxResidueClasses classes (strides as long as the image: each class a
/// loop nest of its own) or kMaxClassTaps taps a class (a kernel as large
/// as the image), every output scans every tap instead. For images
/// n in [0, count); put(n, o, oh, ow, sum) stores the result.
StmtPtr col2im_by_residue(
    KernelCtx &k, const ConvShape &s,
    const std::function<LExprPtr(const LExprPtr &n, const LExprPtr &o, const LExprPtr &kh, const LExprPtr &kw,
                                 const LExprPtr &ih, const LExprPtr &iw)> &tap,
    int64_t count,
    const std::function<StmtPtr(const LExprPtr &n, const LExprPtr &o, const LExprPtr &oh, const LExprPtr &ow,
                                const LExprPtr &sum)> &put) {
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  int64_t classes_h = std::min(s.s[0], s.OH), classes_w = std::min(s.s[1], s.OW);
  // (nor counted for kernels longer than kMaxClassTaps² along an axis)
  bool scan = classes_h * classes_w > kMaxResidueClasses || std::max(s.KH, s.KW) > kMaxClassTaps * kMaxClassTaps;
  if (!scan) { // each class's taps are one expression
    size_t most_h = 0, most_w = 0;
    for (int64_t r = 0; r < classes_h; ++r)
      most_h = std::max(most_h, residue_taps(s, 0, r, s.KH).size());
    for (int64_t r = 0; r < classes_w; ++r)
      most_w = std::max(most_w, residue_taps(s, 1, r, s.KW).size());
    scan = int64_t(most_h * most_w) > kMaxClassTaps;
  }
  if (scan)
    return loop_nest({count, s.Og(), s.OH, s.OW}, [&](const Index &i) { // every output scans every tap
      BufferPtr sum = k.local("sum", acc);
      LExprPtr zero = imm(0);
      StmtPtr taps = loop_nest(
          {s.KH, s.KW},
          [&](const Index &t) {
            // the data pixel this tap reads: (o + pad - t·d) / s, whole and inside
            LExprPtr valid;
            LExprPtr ih = s.source(0, i[2], t[0], s.H, valid), iw = s.source(1, i[3], t[1], s.W, valid);
            LExprPtr v = tap(i[0], i[1], t[0], t[1], ih, iw);
            return store(sum, zero, add(load(sum, zero), select(valid, v, constant_of(0, acc))));
          },
          ForKind::Reduce, "k");
      return alloc(sum, seq({store(sum, zero, constant_of(0, acc)), taps, put(i[0], i[1], i[2], i[3], load(sum, zero))}));
    });
  // The classes of one output row: its columns rw + s·j, their taps and
  // the outputs j of the class whose every tap column j + offset lies in
  // [0, W) (the offsets fall with the tap).
  struct ColumnClass {
    int64_t rw, ncols, first, last;
    std::vector<std::pair<int64_t, int64_t>> taps;
  };
  std::vector<ColumnClass> column_classes;
  for (int64_t rw = 0; rw < classes_w; ++rw) {
    ColumnClass c{rw, (s.OW - rw + s.s[1] - 1) / s.s[1], 0, 0, residue_taps(s, 1, rw, s.KW)};
    std::tie(c.first, c.last) = c.taps.empty() ? std::pair<int64_t, int64_t>{0, c.ncols}
                                               : outputs_reading_inside(1, c.taps.back().second,
                                                                        c.taps.front().second, s.W, c.ncols);
    column_classes.push_back(std::move(c));
  }
  std::vector<StmtPtr> classes;
  for (int64_t rh = 0; rh < classes_h; ++rh) {
    auto rows = residue_taps(s, 0, rh, s.KH);
    int64_t nrows = (s.OH - rh + s.s[0] - 1) / s.s[0];
    classes.push_back(loop_nest({count, s.Og(), nrows}, [&](const Index &i) {
      LExprPtr oh = add(imm(rh), mul(i[2], imm(s.s[0])));
      // output (oh, rw + s·j) of class c
      auto put_column = [&](const ColumnClass &c, const LExprPtr &j, bool inside) {
        LExprPtr sum = constant_of(0, acc);
        for (auto [kh, row_offset] : rows)
          for (auto [kw, col_offset] : c.taps) {
            LExprPtr ih = add(i[2], imm(row_offset)), iw = add(j, imm(col_offset));
            LExprPtr valid = in_range(ih, 0, s.H);
            if (!inside)
              valid = both(valid, in_range(iw, 0, s.W));
            LExprPtr v = tap(i[0], i[1], imm(kh), imm(kw), clamp_index(ih, s.H), inside ? iw : clamp_index(iw, s.W));
            sum = add(sum, select(valid, v, constant_of(0, acc)));
          }
        return put(i[0], i[1], oh, add(imm(c.rw), mul(j, imm(s.s[1]))), sum);
      };
      // Every class of the row in one loop over j, its stores side by side
      // (rw + s·j for each rw: whole vectors interleaved, where a loop per
      // class stored every s-th element: a 1 x 1 data gradient of stride 2
      // wrote three quarters of its output as zeros that way), over the j
      // every class has, unchecked where every class reads inside; then the
      // last j of the classes that have one more.
      int64_t common = column_classes.back().ncols, first = 0, last = common;
      for (const ColumnClass &c : column_classes)
        first = std::max(first, c.first), last = std::min(last, c.last);
      first = std::min(first, common), last = std::max(first, last);
      std::vector<StmtPtr> stmts{over_inside_run(first, last, common, "ow", [&](const LExprPtr &j, bool inside) {
        std::vector<StmtPtr> puts;
        for (const ColumnClass &c : column_classes)
          puts.push_back(put_column(c, j, inside));
        return seq(puts);
      })};
      for (const ColumnClass &c : column_classes)
        if (c.ncols > common)
          stmts.push_back(over_inside_run(0, 0, c.ncols - common, "ow", [&](const LExprPtr &j, bool) {
            return put_column(c, add(j, imm(common)), false);
          }));
      return seq(stmts);
    }));
  }
  return seq(classes);
}

/// conv2d_transpose with strides: per chunk of images and group,
/// col[(o, kh, kw), (n, p)] = Σ_c w[g·Cg + c, o, kh, kw] · x[n, g·Cg + c, p]
/// over the chunk's input pixels (x copied channel-major first, so the
/// product reads it along its rows), then each output pixel sums its taps'
/// rows (col2im_by_residue, gathering: the taps in row-major order, so the
/// order is fixed).
StmtPtr conv2d_transpose_strided(KernelCtx &k, const ConvShape &s, DType acc) {
  int64_t P = s.H * s.W, rows = s.Og() * s.taps();
  int64_t column = (s.C + rows) * dtype_bytes(acc); // an input pixel's copy and products
  int64_t chunk = images_per_chunk(chunk_budget(k, column), column * P, s.N);
  BufferPtr xt = k.scratch("channel_major", acc, s.C * chunk * P), col = k.scratch("col", acc, rows * chunk * P);
  const Shape &os = k.call.type.shape;
  DType dt = k.call.type.dtype;
  return over_chunks(s.N, chunk, [&](const LExprPtr &first, int64_t count) {
    int64_t NP = count * P;
    std::vector<StmtPtr> stmts;
    stmts.push_back(loop_nest({count, s.C, P}, [&](const Index &i) {
      LExprPtr src = add(mul(add(mul(add(first, i[0]), imm(s.C)), i[1]), imm(P)), i[2]);
      return store(xt, add(add(mul(i[1], imm(NP)), mul(i[0], imm(P))), i[2]), cast(acc, k.in_flat(0, src)));
    }));
    auto cat = [NP](const LExprPtr &m, const LExprPtr &j) { return add(mul(m, imm(NP)), j); };
    stmts.push_back(loop_nest(
        {s.groups},
        [&](const Index &g) {
          Gemm gm;
          gm.M = rows, gm.N = NP, gm.K = s.Cg();
          gm.dtype = acc;
          gm.a_contiguous_in_k = false;
          gm.a = [&](const LExprPtr &m, const LExprPtr &c) { // w as (C, Og·KH·KW)
            return cast(acc, k.in_flat(1, add(mul(add(mul(g[0], imm(s.Cg())), c), imm(rows)), m)));
          };
          gm.b = [&](const LExprPtr &c, const LExprPtr &j) {
            return load(xt, add(mul(add(mul(g[0], imm(s.Cg())), c), imm(NP)), j));
          };
          // col holds one group's rows at a time: the gather below reads them
          gm.store = [&](const LExprPtr &m, const LExprPtr &j, const LExprPtr &v) { return store(col, cat(m, j), v); };
          gm.store_raw = gm.store;
          gm.load = [&](const LExprPtr &m, const LExprPtr &j) { return load(col, cat(m, j)); };
          StmtPtr product = gemm_cpu_packed(k, gm);
          StmtPtr gather = col2im_by_residue(k, s, [&](const LExprPtr &n, const LExprPtr &o, const LExprPtr &kh,
                                                       const LExprPtr &kw, const LExprPtr &ih, const LExprPtr &iw) {
            LExprPtr m = add(mul(o, imm(s.taps())), add(mul(kh, imm(s.KW)), kw)); // (o, kh, kw)
            return load(col, cat(m, add(add(mul(n, imm(P)), mul(ih, imm(s.W))), iw)));
          }, count, [&](const LExprPtr &n, const LExprPtr &o, const LExprPtr &oh, const LExprPtr &ow, const LExprPtr &v) {
            Index idx{add(first, n), add(mul(g[0], imm(s.Og())), o), oh, ow};
            return k.put(idx, flat_index(os, idx), cast(dt, v));
          });
          return seq({product, gather});
        },
        ForKind::Serial));
    return seq(stmts);
  });
}

//===--- depthwise convolutions on the CPU --------------------------------===//
//
// With one input channel per group (groups = C, a channel multiplier m =
// O / C) each product above would be one row deep: a fork-join per channel
// for a few multiply-adds per pixel. Instead every output pixel is one
// expression, the multiply-adds of its taps in row-major order, over a
// zero-padded copy of the data; the pixel loops are plain data-parallel
// loops that the schedule vectorizes along the row (stride 1: whole vector
// loads) and spreads over the pool; transposed with strides, each pixel
// reads the data directly. The weight gradient is one dot product per
// (channel, tap) over the batch's pixels, of two contiguous runs.

/// At most this many taps are unrolled into one expression.
constexpr int64_t kMaxUnrolledTaps = 64;

/// Whether a convolution of shape `s` is depthwise and handled here.
bool depthwise(const ConvShape &s) {
  return s.groups > 1 && s.Cg() == 1 && s.taps() <= kMaxUnrolledTaps;
}

/// out[n, o, oh, ow] = Σ_(kh, kw) weight(o, kh, kw) · xp[n, o / m, oh·s + kh·d, ow·s + kw·d]
/// with xp (N, C, Hp, Wp) padded.
StmtPtr depthwise_direct(KernelCtx &k, const ConvShape &s, const BufferPtr &xp, int64_t Hp, int64_t Wp,
                         const std::function<LExprPtr(const LExprPtr &o, int64_t kh, int64_t kw)> &weight) {
  const Shape &os = k.call.type.shape;
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  int64_t m = s.O / s.C;
  return loop_nest(os, [&](const Index &i) {
    LExprPtr c = m == 1 ? i[1] : binary(BinaryOp::FloorDiv, i[1], imm(m));
    LExprPtr plane = mul(add(mul(i[0], imm(s.C)), c), imm(Hp));
    LExprPtr sum;
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        LExprPtr row = add(plane, add(mul(i[2], imm(s.s[0])), imm(kh * s.d[0])));
        LExprPtr x = load(xp, add(mul(row, imm(Wp)), add(mul(i[3], imm(s.s[1])), imm(kw * s.d[1]))));
        LExprPtr w = weight(i[1], kh, kw);
        sum = sum ? (is_float(acc) ? mul_add(w, x, sum) : add(sum, mul(w, x))) : mul(w, x);
      }
    return k.put(i, flat_index(os, i), cast(dt, sum));
  });
}

/// conv2d_transpose of a depthwise convolution with strides: each output
/// pixel sums the taps that land on it, read from dy directly, in row-major
/// tap order. Output rows and columns go by their residue modulo the
/// strides, which fixes their taps (3 x 3, stride 2: 2 or 1 of the 3 rows,
/// likewise columns), so a class's columns read dy at unit stride and are
/// stored every s-th element (a masked store, loops/Lanes.h); only the
/// columns whose taps reach past the data are checked. As products (one per
/// channel, K = 1, then gathered) mobilenet_v2's stride-2 depthwise data
/// gradients were 11% of its step; with the columns checked tap by tap (a
/// division, a select and a gather per element) 96 channels at 112 x 112,
/// batch 2, took 3.1 ms.
StmtPtr depthwise_transpose_strided(KernelCtx &k, const ConvShape &s, DType acc) {
  const Shape &os = k.call.type.shape;
  DType dt = k.call.type.dtype;
  int64_t m = s.Og(); // outputs per input channel
  std::vector<StmtPtr> stmts;
  for (int64_t rh = 0; rh < std::min(s.s[0], s.OH); ++rh) {
    int64_t rows = (s.OH - rh + s.s[0] - 1) / s.s[0];
    // kernel rows kh that reach output rows of this residue, and the data row offset each reads
    std::vector<std::pair<int64_t, int64_t>> row_taps = residue_taps(s, 0, rh, s.KH);
    stmts.push_back(loop_nest({s.N, s.O, rows}, [&](const Index &i) {
      LExprPtr c = m == 1 ? i[1] : binary(BinaryOp::FloorDiv, i[1], imm(m));
      LExprPtr j = m == 1 ? imm(0) : binary(BinaryOp::FloorMod, i[1], imm(m));
      std::vector<StmtPtr> classes;
      for (int64_t rw = 0; rw < std::min(s.s[1], s.OW); ++rw) {
        int64_t cols = (s.OW - rw + s.s[1] - 1) / s.s[1];
        std::vector<std::pair<int64_t, int64_t>> col_taps = residue_taps(s, 1, rw, s.KW);
        // the columns q of the class whose every tap q + offset lies inside the data
        int64_t first = 0, last = cols;
        for (auto [kw, offset] : col_taps) {
          first = std::max(first, -offset);
          last = std::min(last, s.W - offset);
        }
        first = std::min(first, cols), last = std::max(last, first);
        classes.push_back(over_inside_run(first, last, cols, "q", [&](const LExprPtr &q, bool inside) {
          LExprPtr sum;
          for (auto [kh, row_offset] : row_taps) {
            LExprPtr ih = add(i[2], imm(row_offset)), row_inside = in_range(ih, 0, s.H);
            for (auto [kw, col_offset] : col_taps) {
              LExprPtr iw = add(q, imm(col_offset));
              LExprPtr valid = inside ? row_inside : both(row_inside, in_range(iw, 0, s.W));
              LExprPtr x = k.in(0, {i[0], c, clamp_index(ih, s.H), inside ? iw : clamp_index(iw, s.W)});
              LExprPtr v = select(valid, cast(acc, x), constant_of(0, acc));
              LExprPtr w = cast(acc, k.in(1, {c, j, imm(kh), imm(kw)}));
              sum = !sum ? mul(w, v) : is_float(acc) ? mul_add(w, v, sum) : add(sum, mul(w, v));
            }
          }
          Index idx{i[0], i[1], add(mul(i[2], imm(s.s[0])), imm(rh)), add(mul(q, imm(s.s[1])), imm(rw))};
          return k.put(idx, flat_index(os, idx), cast(dt, sum ? sum : constant_of(0, acc)));
        }));
      }
      return seq(classes);
    }));
  }
  return seq(stmts);
}

/// dw[o, 0, kh, kw] = Σ_(n, oh, ow) dy[n, o, oh, ow] · x[n, o / m, tap(oh, kh), tap(ow, kw)].
/// The padded data is split by the strides into s0·s1 planes per channel
/// and image, plane (rh, rw) holding padded rows rh, rh + s0, ... and
/// columns rw, rw + s1, ... (Hs x Ws; with unit strides the padded image
/// itself): tap (kh, kw) of output pixel (oh, ow) is element (oh + qh, ow +
/// qw) of plane (rh, rw), where kh·dh = qh·s0 + rh and kw·dw = qw·s1 + rw. With
/// dy spread onto the same grid (dyx: zeros past the output's rows and
/// columns) and the planes of a channel flat over the batch, each tap is a
/// shift, so each weight is one dot product of two contiguous runs: per
/// channel, kSumLanes-lane accumulators of a group of taps (as many as the
/// register tile holds) take an FMA per vector of dyx and tap, dyx read once
/// per group, then each tap's lanes are added in order. A fixed order, as
/// the products' sums over K; only a non-finite value where dyx holds zeros
/// would show (NaN where the exact sum is ±inf). mobilenet_v2's 144
/// channels at 56 x 56, batch 2: 13.2 ms as compensated sums over the
/// output's pixels (a select and a clamped index per lane), 0.59 ms so;
/// with stride 2 (96 channels, 112 x 112): 7.7 -> 2.1 ms.
StmtPtr depthwise_backward_weight(KernelCtx &k, const ConvShape &s, DType dt, DType acc) {
  const int64_t L = kSumLanes, T = s.taps(), m = s.O / s.C, S = s.s[0] * s.s[1];
  int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3];
  int64_t Hs = (Hp + s.s[0] - 1) / s.s[0], Ws = (Wp + s.s[1] - 1) / s.s[1], plane = Hs * Ws;
  int64_t run = s.N * plane, padded_run = (run + L - 1) / L * L;
  int64_t reach = s.d[0] * (s.KH - 1) / s.s[0] * Ws + s.d[1] * (s.KW - 1) / s.s[1];
  std::vector<StmtPtr> stmts;
  // xs[((c·S + rh·s1 + rw)·N + n)·plane + i·Ws + j] = x[n, c, i·s0 + rh - top, j·s1 + rw - left]
  BufferPtr xs = padded_copy(k, 1, s.p[0], s.p[1], Hs, Ws, padded_run - run + reach, true, acc, stmts, s.s);
  BufferPtr dyx = grad_on_grid(k, s, padded_run, plane, Ws, acc, stmts);
  // taps in groups of at most the register tile's accumulators, balanced
  const CpuTuning &tuning = k.target.cpu_tuning();
  int64_t vectors = std::max<int64_t>(1, L / tuning.lanes(acc));
  int64_t most = std::max<int64_t>(1, tuning.accumulators / vectors);
  int64_t groups = (T + most - 1) / most, G = (T + groups - 1) / groups;
  const Shape &os = k.call.type.shape;
  auto fma = [&](const LExprPtr &a, const LExprPtr &b, const LExprPtr &c) {
    return is_float(acc) ? mul_add(a, b, c) : add(c, mul(a, b));
  };
  stmts.push_back(loop_nest(
      {s.O},
      [&](const Index &o) {
        LExprPtr c = m == 1 ? o[0] : binary(BinaryOp::FloorDiv, o[0], imm(m));
        std::vector<StmtPtr> per_channel;
        for (int64_t t0 = 0; t0 < T; t0 += G) {
          int64_t taps = std::min(G, T - t0);
          BufferPtr sums = k.local("tap_sums", acc, taps * L);
          LVarPtr b = k.var("b"), l = k.var("l"), l0 = k.var("l");
          std::vector<StmtPtr> body;
          body.push_back(for_loop(l0, taps * L, ForKind::Vectorized, store(sums, var_ref(l0), constant_of(0, acc))));
          std::vector<StmtPtr> fmas;
          LExprPtr f = add(mul(var_ref(b), imm(L)), var_ref(l));
          LExprPtr g = load(dyx, add(mul(o[0], imm(padded_run)), f));
          for (int64_t t = t0; t < t0 + taps; ++t) {
            int64_t kh = s.d[0] * (t / s.KW), kw = s.d[1] * (t % s.KW);
            int64_t r = kh % s.s[0] * s.s[1] + kw % s.s[1], shift = kh / s.s[0] * Ws + kw / s.s[1];
            LExprPtr at = add(imm((t - t0) * L), var_ref(l));
            LExprPtr x = load(xs, add(add(mul(add(mul(c, imm(S)), imm(r)), imm(run)), f), imm(shift)));
            fmas.push_back(store(sums, at, fma(g, x, load(sums, at))));
          }
          body.push_back(for_loop(b, padded_run / L, ForKind::Serial, for_loop(l, L, ForKind::Vectorized, seq(fmas))));
          for (int64_t t = t0; t < t0 + taps; ++t) {
            LExprPtr total = load(sums, imm((t - t0) * L));
            for (int64_t lane = 1; lane < L; ++lane)
              total = add(total, load(sums, imm((t - t0) * L + lane)));
            Index idx{o[0], imm(0), imm(t / s.KW), imm(t % s.KW)};
            body.push_back(k.put(idx, flat_index(os, idx), cast(dt, total)));
          }
          per_channel.push_back(alloc(sums, seq(body)));
        }
        return seq(per_channel);
      },
      ForKind::Parallel));
  return seq(stmts);
}

/// Whether a convolution takes the stride-1 path: unit strides, and an
/// extended grid at most kMaxGridWaste times the output's pixels. On small
/// images the padding is much of the grid (resnet18's 7 x 7 at 3 x 3: 81
/// pixels computed per 49 kept, 1.65x the work): there the im2col of the
/// strided path costs less (batch 2, one thread: 512 -> 512 at 7 x 7 forward
/// 7.6 -> 5.4 ms, weight gradient 8.2 -> 4.9 ms; 256 -> 256 at 14 x 14, 1.31x:
/// 5.4 -> 5.3 and 6.5 -> 5.2 ms), while at 56 x 56 (1.07x) the padded grid
/// is faster (forward 4.9 against 6.1 ms).
constexpr double kMaxGridWaste = 1.2;
bool padded_path(const ConvShape &s) {
  if (s.s[0] != 1 || s.s[1] != 1)
    return false;
  // the padded data's grid (forward, weight gradient) or, transposed, the output's
  int64_t Hp = std::max(s.H + s.p[0] + s.p[2], s.OH + s.d[0] * (s.KH - 1));
  int64_t Wp = std::max(s.W + s.p[1] + s.p[3], s.OW + s.d[1] * (s.KW - 1));
  return double(Hp * Wp) <= kMaxGridWaste * double(s.OH * s.OW);
}

//===--- Winograd F(2 x 2, 3 x 3) on the CPU ------------------------------===//
//
// A 3 x 3 correlation of stride and dilation 1 computes each 2 x 2 block of
// output pixels (a tile) from the 4 x 4 data around it in 16 multiplies per
// channel pair instead of 36 (Lavin and Gray's minimal filtering): with the
// weight transformed once, U = G g Gᵀ (4 x 4 per output and input channel),
// and each tile's data, V = Bᵀ d B, the 16 positions p of the transformed
// tile are 16 independent products M_p = U_p · V_p (output channels by
// input channels, times input channels by tiles), and the output tile is
// Aᵀ M A. The products are the packed ones, over a chunk of tiles at a
// time; the transforms are additions (G's halves are exact in binary), so
// the result differs from the direct sum only by rounding, in a fixed
// order: a recomputed value is bitwise identical.

/// The fewest channels on either side for which the transforms pay: the
/// products then have K and M of at least this many. densenet121's 128 -> 32
/// (16 products of 32 rows where the direct one has K = 1152) at 56 x 56,
/// batch 2, one thread on a Zen 4: forward 5.31 -> 3.00 ms, data gradient
/// 4.81 -> 3.22, weight gradient 4.67 -> 3.11; the step 467 -> 410 ms on
/// one thread, 256 -> 227 on two (with 64 here, before the products'
/// orientation and packing were tuned, two threads had been 10% slower).
/// At 16 (squeezenet's 16 -> 64, googlenet's 16 -> 32) googlenet's step was
/// 3% slower, squeezenet's 3% faster: left direct.
constexpr int64_t kWinogradMinChannels = 32;

/// Tiles per chunk, at most: what a chunk stores per tile (the forward's
/// products, 16·O values, which the output's transform reads back; the
/// weight gradient's transformed data and gradient, 16·(C + O)) takes at
/// most kWinogradChunkBytes in all. Resnet18's 56 x 56 images at batch 2
/// took two chunks an image at 512 tiles, one at 1024 (when each chunk was
/// 16 fork-joins); its weight gradients at 256 tiles 7.7 ms against 6.3 on
/// two threads, batch 8. 1024 tiles of vgg11_bn's 512 -> 512 at 28 x 28 (two
/// images, 420 tiles) took 13.8 MB per kernel, its weight gradient 27.5:
/// they set the least workspace --remat=auto could plan for its step.
constexpr int64_t kWinogradChunkTiles = 1024;
constexpr int64_t kWinogradChunkBytes = 8 << 20;

/// The weight's transform, per pair of input and output channels, in
/// multiply-adds of the products: 16 values written and read back per 9
/// read, a pass over memory (512 x 512 channels: 2.0 ms on a 2-core AMD EPYC
/// Zen 5, about 700 of its multiply-adds a pair).
constexpr int64_t kWinogradWeightCost = 512;

/// Whether a convolution of shape `s` (its correlation: C input, O output
/// channels) with output `out` (N, O, OH, OW) runs as Winograd F(2 x 2, 3 x
/// 3): a 3 x 3 kernel of stride and dilation 1, one group, floats, and per
/// channel pair the tiles' 16 multiply-adds (a dropped tile a row of tiles
/// included) and the weight's transform at least 15% under the direct 9 a
/// pixel: resnet18's 7 x 7 at batch 8 (1 : 0.87) runs direct, as at batch 2,
/// and 14 x 14 at batch 2 (1 : 0.65) as Winograd.
bool winograd_path(const ConvShape &s, const Shape &out, DType acc) {
  if (!is_float(acc) || s.KH != 3 || s.KW != 3 || s.s[0] != 1 || s.s[1] != 1 || s.d[0] != 1 || s.d[1] != 1 ||
      s.groups != 1 || s.C < kWinogradMinChannels || s.O < kWinogradMinChannels)
    return false;
  int64_t N = out[0], OH = out[2], OW = out[3];
  double direct = 9.0 * double(N * OH * OW);
  double winograd = 16.0 * double(N * ((OH + 1) / 2) * ((OW + 1) / 2 + 1)) + double(kWinogradWeightCost);
  return 1.15 * winograd <= direct;
}

/// G x for one row or column x of a 3 x 3 kernel.
std::array<LExprPtr, 4> winograd_kernel(const std::array<LExprPtr, 3> &x, DType acc) {
  LExprPtr half = constant_of(0.5, acc), outer = add(x[0], x[2]);
  return {x[0], mul(half, add(outer, x[1])), mul(half, sub(outer, x[1])), x[2]};
}
/// Aᵀ x for one row or column x of a product tile.
std::array<LExprPtr, 2> winograd_output(const std::array<LExprPtr, 4> &x) {
  return {add(add(x[0], x[1]), x[2]), sub(sub(x[1], x[2]), x[3])};
}
/// Row r of Bᵀ applied to x: x0 - x2, x1 + x2, x2 - x1, x1 - x3.
LExprPtr winograd_data_row(int64_t r, const std::array<LExprPtr, 4> &x) {
  return r == 0 ? sub(x[0], x[2]) : r == 1 ? add(x[1], x[2]) : r == 2 ? sub(x[2], x[1]) : sub(x[1], x[3]);
}
/// Row `r` (an index expression, 0 to 3) of Bᵀ has two entries, 1 at
/// column first(r) and ±1 at column second(r): Bᵀ x = x[first] + sign·x[second]
/// (winograd_data_row where r is known).
struct WinogradDataRow {
  LExprPtr first, second, sign;
  WinogradDataRow(const LExprPtr &r, DType acc) {
    auto pick = [&](std::array<int64_t, 4> v) {
      return select(compare(CompareOp::EQ, r, imm(0)), imm(v[0]),
                    select(compare(CompareOp::EQ, r, imm(1)), imm(v[1]), select(compare(CompareOp::EQ, r, imm(2)), imm(v[2]), imm(v[3]))));
    };
    first = pick({0, 1, 2, 1});
    second = pick({2, 2, 1, 3});
    sign = select(compare(CompareOp::EQ, r, imm(1)), constant_of(1, acc), constant_of(-1, acc));
  }
};

/// The data of a Winograd correlation's tiles, copied once: TH rows of
/// tiles of Ws columns each (the last one past the output: dropped), from
/// argument `arg` (N, C, H, W) at (top, left) of the padded grid. Plane (c,
/// a, e) of an image holds, at (ty, col), the element in row 2·ty + a and
/// column 2·col + e of the grid, zero in the padding (a from 0 to `offsets`
/// - 1, e 0 or 1), so that element (a, b) of every tile lies at the tile's
/// own index in plane (c, a, b mod 2), b / 2 further on: the tiles are a
/// unit-stride run however the grid is strided.
/// `shared` (chunks that never span two images): rows 2·ty + a and
/// 2·(ty + 1) + a - 2 are one, so only the planes of a = 0 and 1 are
/// stored, each with the rows of a tile row more (the tile's element (a, b)
/// for a = 2, 3 a row of tiles further on): the data copied once, not twice
/// (64 channels at 56 x 56, batch 8: 27 MB written and read back, a fifth of
/// the forward's time on two threads, where it did not scale).
struct WinogradPlanes {
  BufferPtr buffer;
  int64_t N, offsets, Ws, plane;

  WinogradPlanes(KernelCtx &k, size_t arg, int64_t top, int64_t left, int64_t tile_rows, int64_t TH, int64_t Ws,
                 DType acc, std::vector<StmtPtr> &stmts, bool shared = false)
      : offsets(shared ? 2 : tile_rows), Ws(Ws), plane((shared ? TH + tile_rows / 2 - 1 : TH) * Ws) {
    const Shape &xs = k.arg_type(arg).shape;
    N = xs[0];
    int64_t C = xs[1], H = xs[2], W = xs[3], size = 2 * offsets * C * N * plane, rows = plane / Ws;
    buffer = k.scratch("winograd_rows", acc, size + 1); // the last dropped tile reads one past the end
    stmts.push_back(store(buffer, imm(size), constant_of(0, acc)));
    // each tile column's two grid columns 2·col + e - left; inside [first, last) both lie in the
    // data (no select, no clamp: a pair of loads LLVM vectorizes as one interleaved group)
    int64_t first = std::min(Ws, (left + 1) / 2), last = std::max(first, std::min(Ws, (W - 2 + left) / 2 + 1));
    stmts.push_back(loop_nest({C, offsets, N, rows}, [&](const Index &i) {
      LExprPtr h = sub(add(mul(i[3], imm(2)), i[1]), imm(top));
      auto columns = [&](const LExprPtr &col, bool inside, bool data) {
        std::vector<StmtPtr> pair;
        for (int64_t e = 0; e < 2; ++e) {
          LExprPtr w = sub(add(mul(col, imm(2)), imm(e)), imm(left)), v = constant_of(0, acc);
          if (data) {
            v = cast(acc, k.in(arg, {i[2], i[0], clamp_index(h, H), inside ? w : clamp_index(w, W)}));
            if (!inside)
              v = select(in_range(w, 0, W), v, constant_of(0, acc));
          }
          LExprPtr image = at(i[0], i[1], imm(e), i[2]);
          pair.push_back(store(buffer, add(add(image, mul(i[3], imm(Ws))), col), v));
        }
        return seq(pair);
      };
      return if_then(in_range(h, 0, H),
                     over_inside_run(first, last, Ws, "z", [&](const LExprPtr &col, bool inside) { return columns(col, inside, true); }),
                     over_inside_run(0, 0, Ws, "z", [&](const LExprPtr &col, bool) { return columns(col, false, false); }));
    }));
  }
  /// Where image n of plane (c, a, e) starts.
  LExprPtr at(const LExprPtr &c, const LExprPtr &a, const LExprPtr &e, const LExprPtr &n) const {
    return mul(add(mul(add(mul(add(mul(c, imm(offsets)), a), imm(2)), e), imm(N)), n), imm(plane));
  }
  /// Element (a, b) of the tile at `tile` (n · plane + ty · Ws + tx) in channel c.
  LExprPtr load_at(const LExprPtr &c, const LExprPtr &a, const LExprPtr &b, const LExprPtr &tile) const {
    LExprPtr e = binary(BinaryOp::FloorMod, b, imm(2)), on = binary(BinaryOp::FloorDiv, b, imm(2));
    if (offsets == 2) { // rows a and a - 2 a tile row apart
      on = add(on, mul(binary(BinaryOp::FloorDiv, a, imm(2)), imm(Ws)));
      return load(buffer, add(add(at(c, binary(BinaryOp::FloorMod, a, imm(2)), e, imm(0)), tile), on));
    }
    return load(buffer, add(add(at(c, a, e, imm(0)), tile), on));
  }
};

/// A Winograd kernel's chunks of tiles: `rows` tile rows of one image where
/// an image has at least `tiles` tiles, else `images` whole images (rows =
/// TH), about `tiles` tiles each; `most` the tiles of the largest.
struct WinogradChunks {
  int64_t rows, images, most;
  /// For `tile_bytes` of a chunk's scratch per tile (kWinogradChunkBytes).
  WinogradChunks(int64_t tile_bytes, int64_t N, int64_t TH, int64_t Ws) {
    int64_t tiles = std::clamp<int64_t>(kWinogradChunkBytes / tile_bytes, 1, kWinogradChunkTiles);
    int64_t per_image = TH * Ws;
    rows = per_image >= tiles ? std::clamp<int64_t>(tiles / Ws, 1, TH) : TH;
    images = rows < TH ? 1 : std::clamp<int64_t>(tiles / per_image, 1, N);
    most = images * rows * Ws;
  }
};

/// out[n, m, oh, ow] = Σ_(c, kh, kw) weight(m, (c, kh, kw)) · x[n, c, oh + kh - top, ow + kw - left]
/// (zero outside x: argument `arg`, (N, C, H, W)) for the call's output (N,
/// O, OH, OW), as Winograd F(2 x 2, 3 x 3) (above); `weight` as
/// correlate_padded's, its group 0. The data is copied once into planes
/// (WinogradPlanes), so that the data's transform is the product's packing
/// of its columns (b_gathered: four loads and three additions an element,
/// unit-stride along the tiles), never stored. 28 x 28 with 128 channels,
/// batch 8: the transform as a pass of its own, 16 values per tile and
/// channel stored and read back, took 35% of 8.4 ms (its rows of 14 tiles
/// short of a vector).
StmtPtr correlate_winograd(KernelCtx &k, size_t arg, int64_t top, int64_t left,
                           const std::function<LExprPtr(const LExprPtr &g, const LExprPtr &m, const LExprPtr &kk)> &weight) {
  const Shape &xs = k.arg_type(arg).shape, &os = k.call.type.shape;
  int64_t N = xs[0], C = xs[1], O = os[1], OH = os[2], OW = os[3];
  int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, Ws = TW + 1;
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  std::vector<StmtPtr> stmts;
  WinogradChunks plan(16 * O * dtype_bytes(acc), N, TH, Ws);
  WinogradPlanes planes(k, arg, top, left, 4, TH, Ws, acc, stmts, plan.images == 1);
  // U[p, m, c] = (G g Gᵀ)[p] for g = weight(m, (c, ·, ·))
  // (with C a whole number of vectors, a loop of one vector innermost: codegen's lane-wise form reads
  // the taps nine apart as whole spans, lib/loops/Lanes.h)
  BufferPtr U = k.scratch("winograd_weight", acc, 16 * O * C);
  int64_t L = k.target.cpu_tuning().lanes(acc), blocks = C % L == 0 ? C / L : C;
  L = C % L == 0 ? L : 1;
  stmts.push_back(loop_nest({O, blocks, L}, [&](const Index &i) {
    LExprPtr c = add(mul(i[1], imm(L)), i[2]);
    std::array<std::array<LExprPtr, 4>, 3> krows; // G applied along each kernel row
    for (int64_t kh = 0; kh < 3; ++kh) {
      std::array<LExprPtr, 3> g;
      for (int64_t kw = 0; kw < 3; ++kw)
        g[kw] = weight(imm(0), i[0], add(mul(c, imm(9)), imm(kh * 3 + kw)));
      krows[kh] = winograd_kernel(g, acc);
    }
    std::vector<StmtPtr> stores;
    for (int64_t b = 0; b < 4; ++b) {
      std::array<LExprPtr, 4> column = winograd_kernel({krows[0][b], krows[1][b], krows[2][b]}, acc);
      for (int64_t a = 0; a < 4; ++a)
        stores.push_back(store(U, add(mul(add(imm((a * 4 + b) * O), i[0]), imm(C)), c), column[a]));
    }
    return seq(stores);
  }));
  // chunks of `count` images by `R` tile rows from tile row r0: tile (i,
  // r, tx) is column (i·R + r)·Ws + tx of the products (tx = TW dropped)
  int64_t R = plan.rows, images = plan.images;
  BufferPtr Mp = k.scratch("winograd_products", acc, 16 * O * plan.most);
  auto chunk = [&](const LExprPtr &first, int64_t count, const LExprPtr &r0, int64_t R, bool holds_last) {
    int64_t NT = count * R * Ws;
    std::vector<StmtPtr> body;
    // the 16 products at once, one per position p
    Gemm gm;
    gm.batch = 16, gm.batch_index = k.var("position");
    LExprPtr p = var_ref(gm.batch_index);
    WinogradDataRow ra(binary(BinaryOp::FloorDiv, p, imm(4)), acc), rb(binary(BinaryOp::FloorMod, p, imm(4)), acc);
    gm.M = O, gm.N = NT, gm.K = C;
    gm.dtype = acc;
    gm.b_gathered = true;
    gm.a = [&, p](const LExprPtr &m, const LExprPtr &c) { return load(U, add(mul(add(mul(p, imm(O)), m), imm(C)), c)); };
    gm.b = [&, ra, rb](const LExprPtr &c, const LExprPtr &j) { // (Bᵀ d B)[p] of tile j, channel c
      LExprPtr tile = add(add(mul(first, imm(planes.plane)), mul(r0, imm(Ws))), j);
      auto row = [&](const LExprPtr &a) {
        return add(planes.load_at(c, a, rb.first, tile), mul(rb.sign, planes.load_at(c, a, rb.second, tile)));
      };
      return add(row(ra.first), mul(ra.sign, row(ra.second)));
    };
    auto at = [&, p, NT](const LExprPtr &m, const LExprPtr &j) { return add(mul(add(mul(p, imm(O)), m), imm(NT)), j); };
    gm.store = [&, at](const LExprPtr &m, const LExprPtr &j, const LExprPtr &v) { return store(Mp, at(m, j), v); };
    gm.store_raw = gm.store;
    gm.load = [&, at](const LExprPtr &m, const LExprPtr &j) { return load(Mp, at(m, j)); };
    body.push_back(gemm_cpu_packed(k, gm));
    // Aᵀ M A per tile; the last tile row or column of an odd output keeps its first half (the
    // chunk holding an image's last tile row knows it statically)
    auto tiles = [&](const LExprPtr &o, const LExprPtr &i, const LExprPtr &r, int64_t keep_rows) {
      LExprPtr n = add(first, i), oh = mul(add(r0, r), imm(2));
      auto columns = [&](int64_t from, int64_t to, int64_t keep_cols) {
        return loop_nest({to - from}, [&](const Index &t) {
          LExprPtr tx = add(t[0], imm(from)), j = add(mul(add(mul(i, imm(R)), r), imm(Ws)), tx);
          std::array<std::array<LExprPtr, 2>, 4> rowsA; // Aᵀ applied along each product row
          for (int64_t a = 0; a < 4; ++a) {
            std::array<LExprPtr, 4> m;
            for (int64_t b = 0; b < 4; ++b)
              m[b] = load(Mp, add(mul(add(imm((a * 4 + b) * O), o), imm(NT)), j));
            rowsA[a] = winograd_output(m);
          }
          std::vector<StmtPtr> stores;
          for (int64_t y = 0; y < keep_rows; ++y)
            for (int64_t x = 0; x < keep_cols; ++x) {
              std::array<LExprPtr, 2> column = winograd_output({rowsA[0][x], rowsA[1][x], rowsA[2][x], rowsA[3][x]});
              Index idx{n, o, add(oh, imm(y)), add(mul(tx, imm(2)), imm(x))};
              stores.push_back(k.put(idx, flat_index(os, idx), cast(dt, column[y])));
            }
          return seq(stores);
        }, ForKind::Spatial, "tile");
      };
      StmtPtr whole = columns(0, OW / 2, 2);
      return OW % 2 ? seq({whole, columns(OW / 2, TW, 1)}) : whole;
    };
    int64_t inner = holds_last ? R - 1 : R;
    if (inner > 0)
      body.push_back(loop_nest({O, count, inner}, [&](const Index &i) { return tiles(i[0], i[1], i[2], 2); }));
    if (holds_last)
      body.push_back(loop_nest({O, count}, [&](const Index &i) { return tiles(i[0], i[1], imm(R - 1), 2 - OH % 2); }));
    return seq(body);
  };
  if (R < TH) { // the rest (at least a row) holds each image's last tile row
    int64_t blocks = (TH - 1) / R, rest = TH - blocks * R;
    stmts.push_back(loop_nest(
        {N},
        [&](const Index &n) {
          StmtPtr full = loop_nest({blocks}, [&](const Index &b) { return chunk(n[0], 1, mul(b[0], imm(R)), R, false); },
                                   ForKind::Serial, "rows");
          return seq({full, chunk(n[0], 1, imm(blocks * R), rest, true)});
        },
        ForKind::Serial, "n"));
  } else {
    stmts.push_back(over_chunks(N, images, [&](const LExprPtr &first, int64_t count) {
      return chunk(first, count, imm(0), TH, true);
    }));
  }
  return seq(stmts);
}

/// Row r of A (4 x 2), the output transform's transpose, applied to x:
/// x0, x0 + x1, x0 - x1, -x1.
LExprPtr winograd_grad_row(int64_t r, const LExprPtr &x0, const LExprPtr &x1) {
  return r == 0 ? x0 : r == 1 ? add(x0, x1) : r == 2 ? sub(x0, x1) : unary(UnaryOp::Neg, x1);
}

/// Gᵀ x for one row or column x of a 4 x 4 product (4 -> 3).
std::array<LExprPtr, 3> winograd_kernel_grad(const std::array<LExprPtr, 4> &x, DType acc) {
  LExprPtr half = constant_of(0.5, acc), sum = mul(half, add(x[1], x[2]));
  return {add(x[0], sum), mul(half, sub(x[1], x[2])), add(sum, x[3])};
}


/// Tiles in a row from which the Winograd weight gradient reads x and dy in
/// place rather than from planes (below): 56 x 56 and 28 x 28 (28 and 14
/// tiles) two threads 4.8 -> 4.0 and 4.0 -> 3.5 ms at batch 8; 14 x 14 (7)
/// 4.0 -> 5.2.
constexpr int64_t kWinogradInPlaceTiles = 12;

/// dw[o, c, kh, kw] = Σ_(n, oh, ow) dy[n, o, oh, ow] · x[n, c, oh + kh - p0, ow + kw - p1] as
/// Winograd F(2 x 2, 3 x 3) transposed: the forward's tile is y = Aᵀ (U ⊙ V)
/// A with U = G g Gᵀ, so the gradient of a tile's Σ dy ⊙ y with respect to g
/// is Gᵀ ((A dy Aᵀ) ⊙ V) G. Per chunk of tiles, the data's transform V and
/// the gradient's, Y = A dy Aᵀ (4 x 4 from each 2 x 2 block of dy), are
/// stored position by position, contiguous along the tiles; then 16 products
/// Z_p += Y_p · V_pᵀ (output by input channels, over the chunk's tiles), and
/// at the end dw = Gᵀ Z G per channel pair. The chunks are summed in order:
/// a fixed order, as every product's.
StmtPtr backward_weight_winograd(KernelCtx &k, const ConvShape &s, DType dt, DType acc) {
  int64_t N = s.N, C = s.C, O = s.O, TH = (s.OH + 1) / 2, TW = (s.OW + 1) / 2, Ws = TW + 1;
  std::vector<StmtPtr> stmts;
  WinogradChunks plan(16 * (C + O) * dtype_bytes(acc), N, TH, Ws);
  // Rows of at least kWinogradInPlaceTiles tiles read x and dy where they lie; shorter ones (14 x
  // 14: 7 tiles, too few for a vector) from copies into planes, along all of a chunk's tiles
  bool in_place = TW >= kWinogradInPlaceTiles;
  std::optional<WinogradPlanes> data, grad;
  if (!in_place) {
    data.emplace(k, 1, s.p[0], s.p[1], 4, TH, Ws, acc, stmts, plan.images == 1);
    grad.emplace(k, 0, 0, 0, 2, TH, Ws, acc, stmts);
  }
  int64_t R = plan.rows, images = plan.images, most = plan.most;
  BufferPtr V = k.scratch("winograd_data", acc, 16 * C * most), Y = k.scratch("winograd_grad", acc, 16 * O * most);
  BufferPtr Z = k.scratch("winograd_sums", acc, 16 * O * C);
  using Element = std::function<LExprPtr(int64_t a, int64_t b)>;
  auto chunk = [&](const LExprPtr &first, int64_t count, const LExprPtr &r0, int64_t rows) {
    int64_t NT = count * rows * Ws;
    // V[p, c, j] = (Bᵀ d B)[p] and Y[p, o, j] = (A dy Aᵀ)[p] of tile j, given its elements
    auto store_v = [&](const LExprPtr &c, const LExprPtr &j, const Element &at) {
      std::array<std::array<LExprPtr, 4>, 4> d;
      for (int64_t a = 0; a < 4; ++a)
        for (int64_t b = 0; b < 4; ++b)
          d[a][b] = at(a, b);
      std::vector<StmtPtr> stores;
      for (int64_t a = 0; a < 4; ++a)
        for (int64_t b = 0; b < 4; ++b) {
          LExprPtr v = winograd_data_row(a, {winograd_data_row(b, d[0]), winograd_data_row(b, d[1]),
                                             winograd_data_row(b, d[2]), winograd_data_row(b, d[3])});
          stores.push_back(store(V, add(mul(add(imm((a * 4 + b) * C), c), imm(NT)), j), v));
        }
      return seq(stores);
    };
    auto store_y = [&](const LExprPtr &o, const LExprPtr &j, const Element &at) {
      std::vector<StmtPtr> stores;
      for (int64_t a = 0; a < 4; ++a)
        for (int64_t b = 0; b < 4; ++b) {
          LExprPtr y = winograd_grad_row(a, winograd_grad_row(b, at(0, 0), at(0, 1)), winograd_grad_row(b, at(1, 0), at(1, 1)));
          stores.push_back(store(Y, add(mul(add(imm((a * 4 + b) * O), o), imm(NT)), j), y));
        }
      return seq(stores);
    };
    std::vector<StmtPtr> body;
    if (!in_place) {
      auto start = [&](const WinogradPlanes &planes) { return add(mul(first, imm(planes.plane)), mul(r0, imm(Ws))); };
      body.push_back(loop_nest({C, NT}, [&](const Index &i) {
        LExprPtr tile = add(start(*data), i[1]);
        return store_v(i[0], i[1], [&](int64_t a, int64_t b) { return data->load_at(i[0], imm(a), imm(b), tile); });
      }));
      body.push_back(loop_nest({O, NT}, [&](const Index &i) {
        LExprPtr tile = add(start(*grad), i[1]);
        return store_y(i[0], i[1], [&](int64_t a, int64_t b) { return grad->load_at(i[0], imm(a), imm(b), tile); });
      }));
    } else {
      // tile (n, ty, tx) holds x's 4 x 4 window at (2 ty - top, 2 tx - left) (zero outside x) and
      // dy's 2 x 2 block at (2 ty, 2 tx) (zero past the output: an odd output's half tiles, the
      // dropped column); a row's tiles a unit-stride run of stores and strided loads, the columns
      // whose window lies in the tensor without a select (the planes cost 16% of the 56 x 56
      // weight gradient on two threads, and a copy of each tensor in scratch)
      int64_t left = s.p[1], from = std::min(Ws, (left + 1) / 2);
      int64_t to = s.W - 4 + left >= 0 ? std::clamp<int64_t>((s.W - 4 + left) / 2 + 1, from, Ws) : from;
      auto row_of_tiles = [&](int64_t channels, int64_t inside_from, int64_t inside_to,
                              const std::function<StmtPtr(const LExprPtr &ch, const LExprPtr &n, const LExprPtr &ty,
                                                          const LExprPtr &tx, const LExprPtr &j, bool inside)> &f) {
        return loop_nest({channels, count, rows}, [&](const Index &i) {
          LExprPtr n = add(first, i[1]), ty = add(r0, i[2]), j0 = mul(add(mul(i[1], imm(rows)), i[2]), imm(Ws));
          return over_inside_run(inside_from, inside_to, Ws, "tx", [&](const LExprPtr &tx, bool inside) {
            return f(i[0], n, ty, tx, add(j0, tx), inside);
          });
        });
      };
      body.push_back(row_of_tiles(C, from, to, [&](const LExprPtr &c, const LExprPtr &n, const LExprPtr &ty,
                                                   const LExprPtr &tx, const LExprPtr &j, bool inside) {
        return store_v(c, j, [&](int64_t a, int64_t b) {
          LExprPtr h = sub(add(mul(ty, imm(2)), imm(a)), imm(s.p[0])), w = sub(add(mul(tx, imm(2)), imm(b)), imm(left));
          LExprPtr v = cast(acc, k.in(1, {n, c, clamp_index(h, s.H), inside ? w : clamp_index(w, s.W)}));
          LExprPtr ok = inside ? in_range(h, 0, s.H) : both(in_range(h, 0, s.H), in_range(w, 0, s.W));
          return select(ok, v, constant_of(0, acc));
        });
      }));
      body.push_back(row_of_tiles(O, 0, s.OW / 2, [&](const LExprPtr &o, const LExprPtr &n, const LExprPtr &ty,
                                                      const LExprPtr &tx, const LExprPtr &j, bool inside) {
        return store_y(o, j, [&](int64_t a, int64_t b) {
          LExprPtr oh = add(mul(ty, imm(2)), imm(a)), ow = add(mul(tx, imm(2)), imm(b));
          LExprPtr v = cast(acc, k.in(0, {n, o, clamp_index(oh, s.OH), inside ? ow : clamp_index(ow, s.OW)}));
          LExprPtr ok = s.OH % 2 ? in_range(oh, 0, s.OH) : nullptr;
          if (!inside)
            ok = ok ? both(ok, in_range(ow, 0, s.OW)) : in_range(ow, 0, s.OW);
          return ok ? select(ok, v, constant_of(0, acc)) : v;
        });
      }));
    }
    // the 16 products at once (one per position p), each adding its sums into Z (partial sums
    // between K blocks there too: no scratch of the product's, 16 O x C floats)
    Gemm gm;
    gm.batch = 16, gm.batch_index = k.var("position");
    LExprPtr p = var_ref(gm.batch_index);
    gm.M = O, gm.N = C, gm.K = NT;
    gm.dtype = acc;
    gm.accumulate = true;
    gm.a_contiguous_in_k = gm.b_contiguous_in_k = true;
    gm.a = [&, p, NT](const LExprPtr &m, const LExprPtr &j) { return load(Y, add(mul(add(mul(p, imm(O)), m), imm(NT)), j)); };
    gm.b = [&, p, NT](const LExprPtr &j, const LExprPtr &c) { return load(V, add(mul(add(mul(p, imm(C)), c), imm(NT)), j)); };
    auto at = [&, p](const LExprPtr &m, const LExprPtr &c) { return add(mul(add(mul(p, imm(O)), m), imm(C)), c); };
    gm.store = [&, at](const LExprPtr &m, const LExprPtr &c, const LExprPtr &v) { return store(Z, at(m, c), v); };
    gm.store_raw = gm.store;
    gm.load = [&, at](const LExprPtr &m, const LExprPtr &c) { return load(Z, at(m, c)); };
    body.push_back(gemm_cpu_packed(k, gm));
    return seq(body);
  };
  stmts.push_back(loop_nest({16 * O * C}, [&](const Index &i) { return store(Z, i[0], constant_of(0, acc)); }));
  if (R < TH) {
    int64_t blocks = TH / R, rest = TH % R;
    stmts.push_back(loop_nest(
        {N},
        [&](const Index &n) {
          StmtPtr full = loop_nest({blocks}, [&](const Index &b) { return chunk(n[0], 1, mul(b[0], imm(R)), R); },
                                   ForKind::Serial, "rows");
          return rest ? seq({full, chunk(n[0], 1, imm(blocks * R), rest)}) : full;
        },
        ForKind::Serial, "n"));
  } else {
    stmts.push_back(over_chunks(N, images, [&](const LExprPtr &first, int64_t count) { return chunk(first, count, imm(0), TH); }));
  }
  // dw = Gᵀ Z G
  const Shape &os = k.call.type.shape;
  stmts.push_back(loop_nest({O, C}, [&](const Index &i) {
    std::array<std::array<LExprPtr, 3>, 4> rows; // Gᵀ along each row of Z
    for (int64_t a = 0; a < 4; ++a) {
      std::array<LExprPtr, 4> z;
      for (int64_t b = 0; b < 4; ++b)
        z[b] = load(Z, add(mul(add(imm((a * 4 + b) * O), i[0]), imm(C)), i[1]));
      rows[a] = winograd_kernel_grad(z, acc);
    }
    std::vector<StmtPtr> stores;
    for (int64_t kw = 0; kw < 3; ++kw) {
      std::array<LExprPtr, 3> column = winograd_kernel_grad({rows[0][kw], rows[1][kw], rows[2][kw], rows[3][kw]}, acc);
      for (int64_t kh = 0; kh < 3; ++kh) {
        Index idx{i[0], i[1], imm(kh), imm(kw)};
        stores.push_back(k.put(idx, flat_index(os, idx), cast(dt, column[kh])));
      }
    }
    return seq(stores);
  }));
  return seq(stmts);
}

//===--- the strategies ---------------------------------------------------===//

StmtPtr conv2d_kernel(KernelCtx &k) {
  ConvShape s = conv2d_shape(k);
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  if (depthwise(s)) {
    int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3];
    std::vector<StmtPtr> stmts;
    BufferPtr xp = padded_copy(k, 0, s.p[0], s.p[1], Hp, Wp, 0, false, acc, stmts);
    stmts.push_back(depthwise_direct(k, s, xp, Hp, Wp, [&](const LExprPtr &o, int64_t kh, int64_t kw) {
      return cast(acc, k.in(1, {o, imm(0), imm(kh), imm(kw)}));
    }));
    return seq(stmts);
  }
  int64_t K = s.Cg() * s.taps();
  if (winograd_path(s, k.call.type.shape, acc))
    return correlate_winograd(k, 0, s.p[0], s.p[1], [&](const LExprPtr &, const LExprPtr &m, const LExprPtr &kk) {
      return cast(acc, k.in_flat(1, add(mul(m, imm(K)), kk)));
    });
  if (pointwise_path(s))
    return pointwise_direct(k, s, [&](const LExprPtr &g, const LExprPtr &m, const LExprPtr &c) { // w as (O, Cg)
      return cast(acc, k.in_flat(1, add(mul(add(mul(g, imm(s.Og())), m), imm(K)), c)));
    });
  if (!padded_path(s))
    return conv2d_strided(k, s, acc);
  int64_t Hp = s.H + s.p[0] + s.p[2], Wp = s.W + s.p[1] + s.p[3];
  std::vector<StmtPtr> stmts;
  BufferPtr xp = padded_copy(k, 0, s.p[0], s.p[1], Hp, Wp, s.d[0] * (s.KH - 1) * Wp + s.d[1] * (s.KW - 1), true, acc,
                             stmts);
  stmts.push_back(correlate_padded(k, xp, s.N, s.C, Hp, Wp, s.groups, s.KH, s.KW, s.d[0], s.d[1],
                                   [&](const LExprPtr &g, const LExprPtr &m, const LExprPtr &kk) { // w as (O, Cg·KH·KW)
                                     return cast(acc, k.in_flat(1, add(mul(add(mul(g, imm(s.Og())), m), imm(K)), kk)));
                                   }));
  return seq(stmts);
}

StmtPtr conv2d_transpose_kernel(KernelCtx &k) {
  ConvShape s = conv2d_transpose_shape(k);
  DType acc = dtype_info(k.call.type.dtype).accumulator;
  // With stride 1 a transposed convolution is a correlation with the
  // flipped kernel, input and output channels swapped, on the data padded
  // by d·(K - 1) - pad (negative: cropped).
  int64_t top = s.d[0] * (s.KH - 1) - s.p[0], left = s.d[1] * (s.KW - 1) - s.p[1];
  int64_t Hp = s.OH + s.d[0] * (s.KH - 1), Wp = s.OW + s.d[1] * (s.KW - 1);
  std::vector<StmtPtr> stmts;
  if (depthwise(s) && s.s[0] == 1 && s.s[1] == 1) {
    // depthwise: out[n, c·m + j] reads channel c through w[c, j, KH-1-kh, KW-1-kw]
    int64_t m = s.Og();
    BufferPtr xp = padded_copy(k, 0, top, left, Hp, Wp, 0, false, acc, stmts);
    ConvShape flipped = s;
    flipped.s = {1, 1};
    stmts.push_back(depthwise_direct(k, flipped, xp, Hp, Wp, [&](const LExprPtr &o, int64_t kh, int64_t kw) {
      LExprPtr c = m == 1 ? o : binary(BinaryOp::FloorDiv, o, imm(m)), j = m == 1 ? imm(0) : binary(BinaryOp::FloorMod, o, imm(m));
      return cast(acc, k.in(1, {c, j, imm(s.KH - 1 - kh), imm(s.KW - 1 - kw)}));
    }));
    return seq(stmts);
  }
  // Otherwise, with strides or on small images, multiplied first and
  // gathered: an im2col of the flipped kernel's correlation would need the
  // weight transposed (512 -> 512 at 7 x 7, batch 2: 9.4 MB copied, 6.6 ms
  // against 6.0 for the whole of conv2d_transpose_strided).
  if (depthwise(s))
    return depthwise_transpose_strided(k, s, acc);
  auto flipped = [&](const LExprPtr &g, const LExprPtr &m, const LExprPtr &c, const LExprPtr &kh, const LExprPtr &kw) {
    return cast(acc, k.in(1, {add(mul(g, imm(s.Cg())), c), m, sub(imm(s.KH - 1), kh), sub(imm(s.KW - 1), kw)}));
  };
  if (winograd_path(s, k.call.type.shape, acc))
    return correlate_winograd(k, 0, top, left, [&](const LExprPtr &g, const LExprPtr &m, const LExprPtr &kk) {
      TapIndex t(kk, s.KH, s.KW);
      return flipped(g, m, t.c, t.kh, t.kw);
    });
  if (pointwise_path(s))
    return pointwise_direct(k, s, [&](const LExprPtr &g, const LExprPtr &m, const LExprPtr &c) {
      return flipped(g, m, c, imm(0), imm(0));
    });
  if (!padded_path(s))
    return conv2d_transpose_strided(k, s, acc);
  BufferPtr xp = padded_copy(k, 0, top, left, Hp, Wp, s.d[0] * (s.KH - 1) * Wp + s.d[1] * (s.KW - 1), true, acc,
                             stmts);
  // The flipped kernel, w[g·Cg + c, m, KH-1-kh, KW-1-kw] for row m and
  // k = (c, kh, kw). A 1 x 1 one is read in place: a k step's rows lie side
  // by side in w (2048 -> 512 on 7 x 7, batch 2: 6.5 -> 4.1 ms, where its
  // copy, a transpose read across rows, took longer than the product).
  // Larger ones are copied out first: read in place, each K block of each
  // chunk gathered them through the taps' divisions (128 -> 128 at 3 x 3 on
  // 28 x 28: 5.04 -> 5.30 ms).
  int64_t K = s.Cg() * s.taps();
  std::function<LExprPtr(const LExprPtr &, const LExprPtr &, const LExprPtr &)> weight =
      [&](const LExprPtr &g, const LExprPtr &m, const LExprPtr &kk) {
        TapIndex t(kk, s.KH, s.KW);
        return flipped(g, m, t.c, t.kh, t.kw);
      };
  if (s.taps() > 1) {
    BufferPtr wf = k.scratch("flipped", acc, s.O * K); // wf[g·Og + m, (c, kh, kw)]
    stmts.push_back(loop_nest({s.groups, s.Og(), s.Cg(), s.KH, s.KW}, [&](const Index &i) {
      LExprPtr kk = add(mul(add(mul(i[2], imm(s.KH)), i[3]), imm(s.KW)), i[4]);
      return store(wf, add(mul(add(mul(i[0], imm(s.Og())), i[1]), imm(K)), kk), flipped(i[0], i[1], i[2], i[3], i[4]));
    }));
    weight = [&, wf, K](const LExprPtr &g, const LExprPtr &m, const LExprPtr &kk) {
      return load(wf, add(mul(add(mul(g, imm(s.Og())), m), imm(K)), kk));
    };
  }
  stmts.push_back(correlate_padded(k, xp, s.N, s.C, Hp, Wp, s.groups, s.KH, s.KW, s.d[0], s.d[1], weight));
  return seq(stmts);
}

StmtPtr conv2d_backward_weight_kernel(KernelCtx &k) {
  ConvShape s = conv2d_backward_weight_shape(k);
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  if (depthwise(s))
    return depthwise_backward_weight(k, s, dt, acc);
  if (winograd_path(s, k.arg_type(0).shape, acc))
    return backward_weight_winograd(k, s, dt, acc);
  if (pointwise_path(s, kPointwiseWeightMinPixels) && !k.has_epilogue() && k.output_holds_partials(acc))
    return pointwise_backward_weight(k, s);
  if (padded_path(s))
    return backward_weight_padded(k, s, dt, acc);
  return backward_weight_strided(k, s, dt, acc);
}

} // namespace

void register_cpu_conv(OpRegistry &reg) {
  reg.strategy("nn.conv2d", TargetKind::CPU, conv2d_kernel);
  reg.strategy("nn.conv2d_transpose", TargetKind::CPU, conv2d_transpose_kernel);
  reg.strategy("nn.conv2d_backward_weight", TargetKind::CPU, conv2d_backward_weight_kernel);
}

} // namespace gradc
