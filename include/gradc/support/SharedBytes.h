//===- SharedBytes.h - bytes owned, or borrowed from a mapped file --------===//
//
// An immutable run of bytes that keeps what holds it alive: a string it
// owns, or a range of a model file mapped into memory (the mapping is
// released with the last SharedBytes that refers to it). An imported
// model's weights are such ranges: `gradc compile model.onnx` never reads
// them, and `gradc import` writes each straight from the file's pages.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace gradc {

class SharedBytes {
public:
  SharedBytes() = default;
  /// Takes `owned` (moved, not copied).
  SharedBytes(std::string owned) {
    auto s = std::make_shared<const std::string>(std::move(owned));
    data_ = s->data();
    size_ = s->size();
    owner_ = std::move(s);
  }
  /// `size` bytes at `data`, valid while `owner` lives.
  SharedBytes(std::shared_ptr<const void> owner, const char *data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}

  const char *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {data_, size_}; }
  std::string str() const { return std::string(view()); }

private:
  std::shared_ptr<const void> owner_;
  const char *data_ = nullptr;
  size_t size_ = 0;
};

} // namespace gradc
