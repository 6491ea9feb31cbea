//===- VectorMath.cpp - float32 exp, log, tanh, erf as plain arithmetic ---===//
//
// The classic single-precision reductions: exp by n = round(x / ln 2) and
// r = x - n ln 2 in two parts (Cody and Waite), a degree-7 polynomial, and
// 2^n assembled in the exponent field in two halves (so that the subnormal
// results come out right); log by splitting off the exponent, a mantissa in
// [sqrt(1/2), sqrt(2)) and a degree-9 polynomial in m - 1; tanh by an odd
// polynomial below 0.625 and 1 - 2 / (e^2|x| + 1) above; erf by an odd
// polynomial below 0.9277 and 1 - e^(-|x| - |x| Q(|x|)) above. The
// coefficients are published minimax fits for these intervals (Moshier's
// Cephes library; for erf, N. Juffa's single-precision fit).
//
//===----------------------------------------------------------------------===//
#include "VectorMath.h"

#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <initializer_list>

using namespace llvm;

namespace gradc::codegen {
namespace {

struct Builder {
  IRBuilder<> &b;
  Type *f; // float or <N x float>
  Type *i; // i32 or <N x i32>

  bool fused; // the target has FMA instructions

  Builder(IRBuilder<> &b, Value *x, bool fused)
      : b(b), f(x->getType()), i(x->getType()->getWithNewType(b.getInt32Ty())), fused(fused) {}

  Value *c(double v) const { return ConstantFP::get(f, v); }
  Value *ci(int64_t v) const { return ConstantInt::get(i, v, true); }
  Value *add(Value *x, Value *y) const { return b.CreateFAdd(x, y); }
  Value *sub(Value *x, Value *y) const { return b.CreateFSub(x, y); }
  Value *mul(Value *x, Value *y) const { return b.CreateFMul(x, y); }
  Value *select(Value *cond, Value *x, Value *y) const { return b.CreateSelect(cond, x, y); }
  /// x y + z, fused where the target has FMA: one rounding instead of two,
  /// and half the instructions. (gradc compiles with strict FP contraction,
  /// so llvm.fmuladd would not fuse; the choice is made here, per target.)
  Value *fma(Value *x, Value *y, Value *z) const {
    return fused ? b.CreateIntrinsic(Intrinsic::fma, {f}, {x, y, z}) : add(mul(x, y), z);
  }
  /// coefficients[0] x^(n-1) + ... + coefficients[n-1], by Horner's rule.
  Value *poly(Value *x, std::initializer_list<double> coefficients) const {
    Value *acc = nullptr;
    for (double k : coefficients)
      acc = acc ? fma(acc, x, c(k)) : c(k);
    return acc;
  }
  /// 2^n for integer n in [-126, 127], as float bits.
  Value *pow2(Value *n) const { return b.CreateBitCast(b.CreateShl(b.CreateAdd(n, ci(127)), ci(23)), f); }
};

constexpr double kLn2Hi = 0.693359375, kLn2Lo = -2.12194440e-4;

} // namespace

Value *inline_expf(IRBuilder<> &b, Value *x, bool fma) {
  Builder m(b, x, fma);
  // The input clamped to [-110, 89] (a compare and a select each: one
  // vmaxps / vminps; NaN passes through and is returned at the end). The
  // range ends need no select of their own: at 89, n = 128 and p 2^64 2^64
  // overflows to inf, as e^x does past 88.7228; at -110, n = -159 and the
  // second factor rounds to 0, as e^x does below -103.97; in between, the
  // first factor is exact and the result is rounded once, subnormals too.
  Value *lo = m.c(-110.0), *hi = m.c(89.0);
  Value *clamped = m.select(b.CreateFCmpOLT(x, lo), lo, x);
  clamped = m.select(b.CreateFCmpOGT(clamped, hi), hi, clamped);
  Value *n = b.CreateUnaryIntrinsic(Intrinsic::rint, m.mul(clamped, m.c(1.44269504088896341)));
  Value *r = m.fma(n, m.c(-kLn2Lo), m.fma(n, m.c(-kLn2Hi), clamped));
  Value *p = m.poly(r, {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                        5.0000001201e-1});
  p = m.add(m.fma(p, m.mul(r, r), r), m.c(1.0));
  // n is in [-159, 128]: 2^n as two factors, each within the normal range.
  Value *ni = b.CreateFPToSI(n, m.i);
  Value *half = b.CreateAShr(ni, m.ci(1));
  Value *result = m.mul(m.mul(p, m.pow2(half)), m.pow2(b.CreateSub(ni, half)));
  return m.select(b.CreateFCmpUNO(x, x), x, result);
}

Value *inline_logf(IRBuilder<> &b, Value *x, bool fma) {
  Builder m(b, x, fma);
  // Subnormals are scaled into the normal range first.
  Value *tiny = b.CreateFCmpOLT(x, m.c(1.17549435e-38));
  Value *scaled = m.select(tiny, m.mul(x, m.c(8388608.0)), x); // 2^23
  Value *bits = b.CreateBitCast(scaled, m.i);
  Value *e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, m.ci(23)), m.ci(0xff)), m.ci(126));
  e = b.CreateSub(e, b.CreateSelect(tiny, m.ci(23), m.ci(0)));
  // The mantissa in [0.5, 1), then in [sqrt(1/2), sqrt(2)) with e adjusted.
  Value *mant = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, m.ci(0x807fffff)), m.ci(0x3f000000)), m.f);
  Value *low = b.CreateFCmpOLT(mant, m.c(0.707106781186547524));
  Value *ef = b.CreateSIToFP(b.CreateSub(e, b.CreateSelect(low, m.ci(1), m.ci(0))), m.f);
  Value *t = m.sub(m.select(low, m.add(mant, mant), mant), m.c(1.0));
  Value *z = m.mul(t, t);
  Value *y = m.mul(m.mul(t, z),
                   m.poly(t, {7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                              -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1}));
  y = m.add(y, m.mul(ef, m.c(kLn2Lo)));
  y = m.sub(y, m.mul(z, m.c(0.5)));
  Value *result = m.add(m.add(t, y), m.mul(ef, m.c(kLn2Hi)));
  result = m.select(b.CreateFCmpOEQ(x, m.c(INFINITY)), x, result);
  result = m.select(b.CreateFCmpOEQ(x, m.c(0.0)), m.c(-INFINITY), result);
  return m.select(b.CreateFCmpULT(x, m.c(0.0)), m.c(NAN), result); // negative or NaN
}

Value *inline_tanhf(IRBuilder<> &b, Value *x, bool fma) {
  Builder m(b, x, fma);
  Value *ax = b.CreateUnaryIntrinsic(Intrinsic::fabs, x);
  // Small |x|: x + x^3 P(x^2).
  Value *z = m.mul(x, x);
  Value *small = m.add(m.mul(m.mul(m.poly(z, {-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                                               1.33314422036e-1, -3.33332819422e-1}),
                                     z),
                               x),
                       x);
  // Otherwise 1 - 2 / (e^2|x| + 1); e^2|x| is inf past |x| = 44 and the
  // quotient then 0, so the result is ±1.
  Value *large = m.sub(m.c(1.0), b.CreateFDiv(m.c(2.0), m.add(inline_expf(b, m.add(ax, ax), fma), m.c(1.0))));
  Value *result = m.select(b.CreateFCmpOLT(ax, m.c(0.625)), small, large); // NaN takes `large`: NaN
  // tanh is odd: the sign of x, -0 included (x + x^3 P(x^2) is +0 at -0).
  return b.CreateBinaryIntrinsic(Intrinsic::copysign, result, x);
}

Value *inline_erff(IRBuilder<> &b, Value *x, bool fma) {
  Builder m(b, x, fma);
  Value *ax = b.CreateUnaryIntrinsic(Intrinsic::fabs, x), *z = m.mul(x, x);
  // |x| below 0.927734375: x + x P(x^2), an odd minimax polynomial.
  Value *small = m.add(m.mul(m.poly(z, {-5.96761703e-4, 4.99119423e-3, -2.67681349e-2, 1.12819925e-1,
                                        -3.76125336e-1, 1.28379166e-1}),
                             x),
                       x);
  // Above: 1 - e^(-|x| - |x| Q(|x|)); e^... underflows to 0 past |x| = 10 and
  // the result is ±1, as is every erf(x) of float32 there.
  Value *q = m.add(m.mul(m.add(m.mul(ax, m.c(-1.72853470e-5)), m.c(3.83197126e-4)), z),
                   m.add(m.mul(ax, m.c(-3.88396438e-3)), m.c(2.42546219e-2)));
  for (double k : {-1.06777877e-1, -6.34846687e-1, -1.28717512e-1})
    q = m.add(m.mul(q, ax), m.c(k));
  Value *large = m.sub(m.c(1.0), inline_expf(b, m.sub(m.mul(q, ax), ax), fma));
  Value *result = m.select(b.CreateFCmpOLE(ax, m.c(0.927734375)), small, large); // NaN takes `large`: NaN
  // erf is odd: the sign of x, -0 included.
  return b.CreateBinaryIntrinsic(Intrinsic::copysign, result, x);
}

} // namespace gradc::codegen
