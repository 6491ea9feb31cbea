//===- OnnxIndex.cpp - Gather, GatherElements, GatherND, ScatterND, Einsum ===//
//
// The ONNX operators that read or write at computed positions, built from
// gradc's take (its gradient grad.take_backward scatters and adds) and the
// layout operators, so that each has its gradient:
//
//  * GatherElements moves its axis last and takes along it with the other
//    axes as one batch axis (take's batch_dims).
//  * GatherND flattens the K indexed axes of the data into one and the
//    index tuples into positions along it (row-major), then takes as above.
//  * ScatterND writes through the same positions with grad.take_backward:
//    the updates scattered, and where any lands, chosen over the data
//    (reduction "add": added to it).
//  * Einsum contracts its operands two at a time: the axes both share and
//    the result keeps are a batch, the shared ones it does not are summed
//    by nn.batch_matmul, and an axis only one operand has and nothing
//    later needs is summed first.
//
// Negative indices count from the end (take's "wrap"; GatherND's per axis).
//
//===----------------------------------------------------------------------===//
#include "OnnxMapping.h"
#include "gradc/op/Ops.h"
#include "gradc/op/attrs/index.h"
#include "gradc/op/attrs/linear.h"
#include "gradc/op/attrs/slice.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

namespace gradc::onnx_import {
namespace {

/// The number of elements of axes [begin, end) of `s`.
int64_t product(const Shape &s, size_t begin, size_t end) {
  return num_elements(Shape(s.begin() + int64_t(begin), s.begin() + int64_t(end)));
}

Shape concat_shapes(Shape a, const Shape &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The row-major positions along the K axes data[batch..batch+K) that the
/// index tuples of `indices` (..., K) name, negative entries counted from
/// the end of their axis: shape indices.shape[:-1].
ExprPtr flat_positions(NodeCtx &ctx, ExprPtr indices, const Shape &data, size_t batch) {
  Builder &b = ctx.b();
  const Shape &is = indices->type.shape;
  int64_t k = is.back();
  DType dt = indices->type.dtype;
  Shape lead(is.begin(), is.end() - 1);
  ExprPtr flat;
  int64_t stride = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    int64_t n = data[batch + size_t(j)];
    ExprPtr i = b.reshape(slice_axis(b, indices, rank(indices->type) - 1, j, j + 1), lead);
    ExprPtr neg = b.call(ops::less, {i, ctx.literal(0, dt)});
    i = b.call(ops::where, {neg, b.add(i, ctx.literal(double(n), dt)), i});
    if (stride != 1)
      i = b.mul(i, ctx.literal(double(stride), dt));
    flat = flat ? b.add(flat, i) : i;
    stride *= n;
  }
  return flat;
}

/// Checks GatherND's and ScatterND's shapes: indices (..., K) over the
/// data's axes [batch, batch + K).
bool index_tuples_fit(NodeCtx &ctx, const Type &data, const Type &indices, int64_t batch) {
  if (indices.dtype != DType::Int64 && indices.dtype != DType::Int32) {
    ctx.unsupported("indices of " + indices.str() + " (int64 or int32)");
    return false;
  }
  if (rank(indices) < 1 || indices.shape.back() < 1 || batch < 0 || batch + indices.shape.back() > rank(data) ||
      batch >= rank(indices)) {
    ctx.unsupported("indices " + shape_str(indices.shape) + " for data " + shape_str(data.shape) +
                    " and batch_dims = " + std::to_string(batch));
    return false;
  }
  for (size_t d = 0; d < size_t(batch); ++d)
    if (data.shape[d] != indices.shape[d]) {
      ctx.unsupported("batch axis " + std::to_string(d) + " differs: data " + shape_str(data.shape) +
                      ", indices " + shape_str(indices.shape));
      return false;
    }
  return true;
}

TakeAttrs take_batched(const char *mode) {
  TakeAttrs a;
  a.axis = 1;
  a.batch_dims = 1;
  a.mode = mode;
  return a;
}

/// Einsum's subscripts: one list of axis labels per operand and the
/// result's, letters as themselves and the axes an ellipsis stands for as
/// 256 + their position counted from the right.
struct Subscripts {
  std::vector<std::vector<int>> in;
  std::vector<int> out;
};

std::optional<Subscripts> parse_einsum(NodeCtx &ctx, std::string eq, const std::vector<int64_t> &ranks) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  auto bad = [&](const std::string &why) {
    ctx.unsupported("equation " + printable(eq) + ": " + why);
    return std::nullopt;
  };
  if (terms.size() != ranks.size())
    return bad(std::to_string(terms.size()) + " terms for " + std::to_string(ranks.size()) + " inputs");
  Subscripts s;
  int64_t ellipsis = 0; // the most axes an ellipsis stands for
  // Labels of one term; `r` axes to cover (-1: the result, whose ellipsis is the widest).
  auto labels = [&](const std::string &t, int64_t r) -> std::optional<std::vector<int>> {
    size_t dots = t.find("...");
    std::string letters = t;
    if (dots != std::string::npos)
      letters.erase(dots, 3);
    for (char ch : letters)
      if (!std::isalpha(static_cast<unsigned char>(ch)))
        return std::nullopt;
    int64_t covered = dots == std::string::npos ? 0 : (r < 0 ? ellipsis : r - int64_t(letters.size()));
    if (covered < 0 || (r >= 0 && dots == std::string::npos && int64_t(letters.size()) != r))
      return std::nullopt;
    std::vector<int> l;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 3, "...") == 0) {
        for (int64_t j = covered - 1; j >= 0; --j)
          l.push_back(256 + int(j));
        i += 3;
      } else {
        l.push_back(static_cast<unsigned char>(t[i++]));
      }
    }
    return l;
  };
  for (size_t i = 0; i < terms.size(); ++i) {
    std::optional<std::vector<int>> l = labels(terms[i], ranks[i]);
    if (!l)
      return bad("term " + printable(terms[i]) + " does not fit an input of rank " + std::to_string(ranks[i]));
    for (size_t a = 0; a < l->size(); ++a)
      if (std::count(l->begin(), l->end(), (*l)[a]) > 1)
        return bad("a label repeated in one term (a diagonal)");
    int64_t covered = int64_t(std::count_if(l->begin(), l->end(), [](int c) { return c >= 256; }));
    ellipsis = std::max(ellipsis, covered);
    s.in.push_back(*l);
  }
  if (arrow != std::string::npos) {
    std::optional<std::vector<int>> l = labels(eq.substr(arrow + 2), -1);
    if (!l)
      return bad("the result's term is not letters and one ellipsis");
    for (int c : *l) {
      bool known = std::any_of(s.in.begin(), s.in.end(),
                               [&](const std::vector<int> &t) { return std::find(t.begin(), t.end(), c) != t.end(); });
      if (!known || std::count(l->begin(), l->end(), c) > 1)
        return bad("the result names a label that no input has, or one twice");
    }
    s.out = *l;
  } else { // implicit: the ellipsis, then the letters seen once, in alphabetical order
    std::map<int, int> seen;
    for (const std::vector<int> &t : s.in)
      for (int c : t)
        ++seen[c];
    for (int64_t j = ellipsis - 1; j >= 0; --j)
      s.out.push_back(256 + int(j));
    for (auto [c, n] : seen)
      if (c < 256 && n == 1)
        s.out.push_back(c);
  }
  return s;
}

/// An operand of an Einsum as it is contracted: its value and its labels.
struct Term {
  ExprPtr value;
  std::vector<int> labels;
};

bool has(const std::vector<int> &l, int c) { return std::find(l.begin(), l.end(), c) != l.end(); }

/// `t` with every axis that `keep` does not hold summed out.
Term sum_unneeded(Builder &b, Term t, const std::vector<int> &keep) {
  std::vector<int64_t> axes;
  std::vector<int> left;
  for (size_t a = 0; a < t.labels.size(); ++a)
    (has(keep, t.labels[a]) ? left.push_back(t.labels[a]) : axes.push_back(int64_t(a)));
  if (axes.empty())
    return t;
  return {b.sum(t.value, axes), left};
}

/// `t`'s axes in the order `order` (a permutation of its labels).
ExprPtr arranged(Builder &b, const Term &t, const std::vector<int> &order) {
  std::vector<int64_t> perm;
  for (int c : order)
    perm.push_back(int64_t(std::find(t.labels.begin(), t.labels.end(), c) - t.labels.begin()));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == int64_t(i);
  return identity ? t.value : b.transpose(t.value, perm);
}

/// x · y over their shared labels that `keep` lacks, as (batch, x's own, y's own).
Term contract(Builder &b, const Term &x, const Term &y, const std::vector<int> &keep,
              const std::map<int, int64_t> &size) {
  std::vector<int> batch, summed, left, right;
  for (int c : x.labels)
    (has(y.labels, c) ? (has(keep, c) ? batch : summed) : left).push_back(c);
  for (int c : y.labels)
    if (!has(x.labels, c))
      right.push_back(c);
  auto extent = [&](const std::vector<int> &l) {
    int64_t n = 1;
    for (int c : l)
      n *= size.at(c);
    return n;
  };
  auto dims = [&](std::initializer_list<const std::vector<int> *> parts) {
    std::vector<int> l;
    for (const std::vector<int> *p : parts)
      l.insert(l.end(), p->begin(), p->end());
    return l;
  };
  int64_t nb = extent(batch), nl = extent(left), nr = extent(right), ns = extent(summed);
  ExprPtr a = b.reshape(arranged(b, x, dims({&batch, &left, &summed})), {nb, nl, ns});
  ExprPtr c = b.reshape(arranged(b, y, dims({&batch, &summed, &right})), {nb, ns, nr});
  ExprPtr p = b.call(ops::batch_matmul, {a, c}, BatchMatmulAttrs{.transpose_b = false});
  std::vector<int> labels = dims({&batch, &left, &right});
  Shape shape;
  for (int l : labels)
    shape.push_back(size.at(l));
  return {b.reshape(p, shape), labels};
}

} // namespace

Mapped gather(NodeCtx &ctx) {
  std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 0), rank(ctx.input_type(0)));
  if (!axis)
    return {};
  // Negative indices count from the end: "wrap" (in-range indices are as given).
  TakeAttrs a;
  a.axis = *axis;
  a.mode = "wrap";
  return {ctx.b().call(ops::take, {ctx.input(0), ctx.input(1)}, a)};
}

Mapped gather_elements(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0), &ind = ctx.input_type(1);
  int64_t r = rank(x);
  std::optional<int64_t> axis = checked_axis(ctx, "axis", ctx.attr_int("axis", 0), r);
  if (!axis)
    return {};
  if (rank(ind) != r) {
    ctx.unsupported("indices of rank " + std::to_string(rank(ind)) + " for data of rank " + std::to_string(r));
    return {};
  }
  Builder &b = ctx.b();
  ExprPtr data = ctx.input(0), indices = ctx.input(1);
  // The other axes of the data cut to the indices' (PyTorch's gather reads a corner).
  for (int64_t d = 0; d < r; ++d) {
    if (d == *axis || ind.shape[size_t(d)] == x.shape[size_t(d)])
      continue;
    if (ind.shape[size_t(d)] > x.shape[size_t(d)]) {
      ctx.unsupported("indices " + shape_str(ind.shape) + " longer than the data " + shape_str(x.shape) +
                      " along axis " + std::to_string(d));
      return {};
    }
    data = slice_axis(b, data, d, 0, ind.shape[size_t(d)]);
  }
  std::vector<int64_t> perm, back(size_t(r), 0);
  for (int64_t d = 0; d < r; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  for (size_t i = 0; i < perm.size(); ++i)
    back[size_t(perm[i])] = int64_t(i);
  bool last = *axis == r - 1;
  if (!last) {
    data = b.transpose(data, perm);
    indices = b.transpose(indices, perm);
  }
  Shape moved = indices->type.shape;
  int64_t batch = product(moved, 0, moved.size() - 1);
  data = b.reshape(data, {batch, x.shape[size_t(*axis)]});
  ExprPtr y = b.call(ops::take, {data, b.reshape(indices, {batch, moved.back()})}, take_batched("wrap"));
  y = b.reshape(y, moved);
  return {last ? y : b.transpose(y, back)};
}

Mapped gather_nd(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0), &ind = ctx.input_type(1);
  int64_t batch = ctx.attr_int("batch_dims", 0);
  if (!index_tuples_fit(ctx, x, ind, batch))
    return {};
  Builder &b = ctx.b();
  size_t bd = size_t(batch), k = size_t(ind.shape.back());
  Shape rest(x.shape.begin() + int64_t(bd + k), x.shape.end());
  int64_t nb = product(x.shape, 0, bd), nk = product(x.shape, bd, bd + k);
  int64_t m = product(ind.shape, bd, ind.shape.size() - 1);
  ExprPtr data = b.reshape(ctx.input(0), concat_shapes({nb, nk}, rest));
  ExprPtr pos = b.reshape(flat_positions(ctx, ctx.input(1), x.shape, bd), {nb, m});
  ExprPtr y = b.call(ops::take, {data, pos}, take_batched("clip"));
  Shape out(ind.shape.begin(), ind.shape.end() - 1);
  return {b.reshape(y, concat_shapes(out, rest))};
}

Mapped scatter_nd(NodeCtx &ctx) {
  const Type &x = ctx.input_type(0), &ind = ctx.input_type(1), &upd = ctx.input_type(2);
  std::string reduction = ctx.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add") {
    ctx.unsupported("reduction = " + printable(reduction) + " (none or add)");
    return {};
  }
  if (!index_tuples_fit(ctx, x, ind, 0))
    return {};
  size_t k = size_t(ind.shape.back());
  Shape rest(x.shape.begin() + int64_t(k), x.shape.end());
  Shape want = concat_shapes(Shape(ind.shape.begin(), ind.shape.end() - 1), rest);
  if (upd.shape != want) {
    ctx.unsupported("updates " + shape_str(upd.shape) + " (indices and data make " + shape_str(want) + ")");
    return {};
  }
  Builder &b = ctx.b();
  int64_t nk = product(x.shape, 0, k), m = product(ind.shape, 0, ind.shape.size() - 1);
  ExprPtr data = b.reshape(ctx.input(0), concat_shapes({1, nk}, rest));
  ExprPtr pos = b.reshape(flat_positions(ctx, ctx.input(1), x.shape, 0), {1, m});
  ExprPtr updates = b.reshape(ctx.input(2), concat_shapes({1, m}, rest));
  TakeAttrs a = take_batched("clip");
  ExprPtr scattered = b.call(ops::take_backward, {updates, data, pos}, a);
  ExprPtr y;
  if (reduction == "add") {
    y = b.add(data, scattered);
  } else {
    ExprPtr hits = b.call(ops::take_backward, {b.ones_like(updates), data, pos}, a);
    ExprPtr hit = b.call(ops::greater, {hits, ctx.literal(0, x.dtype)});
    y = b.call(ops::where, {hit, scattered, data});
  }
  return {b.reshape(y, x.shape)};
}

Mapped einsum(NodeCtx &ctx) {
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    ranks.push_back(rank(ctx.input_type(i)));
  std::optional<Subscripts> s = parse_einsum(ctx, ctx.attr_string("equation", ""), ranks);
  if (!s)
    return {};
  // Each label's length; an axis of 1 against a longer one is broadcast.
  std::map<int, int64_t> size;
  for (size_t i = 0; i < s->in.size(); ++i)
    for (size_t a = 0; a < s->in[i].size(); ++a) {
      int64_t n = ctx.input_type(i).shape[a];
      auto [it, fresh] = size.emplace(s->in[i][a], n);
      if (!fresh && it->second != n && it->second != 1 && n != 1) {
        ctx.unsupported("label axes of lengths " + std::to_string(it->second) + " and " + std::to_string(n));
        return {};
      }
      it->second = std::max(it->second, n);
    }
  Builder &b = ctx.b();
  std::vector<Term> terms;
  for (size_t i = 0; i < s->in.size(); ++i) {
    Term t{ctx.input(i), s->in[i]};
    Shape full;
    for (int c : t.labels)
      full.push_back(size[c]);
    if (full != ctx.input_type(i).shape)
      t.value = b.broadcast_to(t.value, full);
    terms.push_back(t);
  }
  // The labels still needed after operand i: the result's and those of the operands after it.
  auto needed_after = [&](size_t i) {
    std::vector<int> keep = s->out;
    for (size_t j = i + 1; j < terms.size(); ++j)
      keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    return keep;
  };
  Term acc = sum_unneeded(b, terms[0], needed_after(0));
  for (size_t j = 1; j < terms.size(); ++j) {
    std::vector<int> keep = needed_after(j);
    std::vector<int> with_acc = keep;
    with_acc.insert(with_acc.end(), acc.labels.begin(), acc.labels.end());
    std::vector<int> with_term = keep;
    with_term.insert(with_term.end(), terms[j].labels.begin(), terms[j].labels.end());
    acc = contract(b, sum_unneeded(b, acc, with_term), sum_unneeded(b, terms[j], with_acc), keep, size);
  }
  acc = sum_unneeded(b, acc, s->out);
  return {arranged(b, acc, s->out)};
}

} // namespace gradc::onnx_import
