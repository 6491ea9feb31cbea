//===- test_attrs.cpp - typed attributes: decoded once, kept on the call --===//
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/op/attrs/shape.h"

#include <catch2/catch.hpp>

using namespace gradc;

TEST_CASE("a checked call keeps its attributes decoded for its operands' types", "[attrs]") {
  std::vector<Binding> body;
  Builder b(body);
  ExprPtr x = make_var("x", Type::tensor({2, 3, 4}, DType::Float32));
  b.call(ops::transpose, {x}, TransposeAttrs{.axes = std::vector<int64_t>{-1, 0, 1}});
  const Expr &call = *body.back().value;
  const TransposeAttrs *stored = call.decoded.get<TransposeAttrs>();
  REQUIRE(stored != nullptr);
  CHECK(*stored->axes == std::vector<int64_t>{2, 0, 1}); // normalised against rank 3
  CHECK(call.decoded.get<ReshapeAttrs>() == nullptr);
  CHECK(*call_attrs<TransposeAttrs>(call).axes == *stored->axes);

  // A copy onto an operand of the same type keeps the struct.
  ExprPtr same = with_args(call, {make_var("y", x->type)});
  CHECK(same->decoded.get<TransposeAttrs>() != nullptr);

  // One of another rank drops it: call_attrs decodes for the new operand.
  ExprPtr other = with_args(call, {make_var("z", Type::tensor({2, 3, 4, 5}, DType::Float32))});
  CHECK(!other->decoded);
  CHECK(*call_attrs<TransposeAttrs>(*other).axes == std::vector<int64_t>{3, 0, 1});
}

TEST_CASE("a call built before type inference has no decoded attributes", "[attrs]") {
  Attrs attrs;
  attrs.set("axes", AttrValue::ints({1, 0}));
  ExprPtr x = make_var("x", Type::tensor({2, 3}, DType::Float32));
  ExprPtr call = make_call(ops::transpose, {x}, attrs);
  CHECK(!call->decoded);
  CHECK(*call_attrs<TransposeAttrs>(*call).axes == std::vector<int64_t>{1, 0});
}
