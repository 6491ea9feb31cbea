//===- MemoryPicture.cpp - the planned workspace drawn over the kernels ----===//
#include "gradc/driver/MemoryPicture.h"
#include "gradc/loops/Memory.h"

#include <algorithm>
#include <functional>
#include <sstream>

namespace gradc {
namespace {

constexpr double kWidth = 900, kHeight = 260, kLeft = 90, kTop = 40, kGap = 70;

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

/// A stable colour per binding (its name hashed to a hue).
std::string colour(const std::string &binding) {
  size_t hue = std::hash<std::string>{}(binding) % 360;
  return "hsl(" + std::to_string(hue) + ",55%,62%)";
}

/// One panel: `fn`'s arena at vertical position `y`, bytes scaled to `scale`.
void panel(std::ostringstream &svg, const LoweredFunction &fn, const std::string &label, double y, int64_t scale) {
  auto life = buffer_lifetimes(fn);
  double kernels = std::max<double>(1, double(fn.kernels.size()));
  auto x_of = [&](double k) { return kLeft + k / kernels * kWidth; };
  auto y_of = [&](double bytes) { return y + kHeight - bytes / double(std::max<int64_t>(scale, 1)) * kHeight; };
  svg << "<text x=\"" << kLeft << "\" y=\"" << y - 12 << "\" font-size=\"14\">" << escape(label) << "</text>\n";
  svg << "<rect x=\"" << kLeft << "\" y=\"" << y << "\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (const BufferPtr &b : fn.arena) {
    auto [first, last] = life[b.get()];
    double x0 = x_of(double(first)), x1 = x_of(double(last) + 1);
    double y1 = y_of(double(b->offset)), y0 = y_of(double(b->offset + arena_bytes(b->bytes())));
    std::string binding = b->origin.set() && b->name != "status" ? "%" + b->origin.var : "-";
    svg << "<rect class=\"buffer\" x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << std::max(0.5, x1 - x0)
        << "\" height=\"" << std::max(0.5, y1 - y0) << "\" fill=\"" << colour(binding) << "\" stroke=\"#333\" stroke-width=\"0.3\">"
        << "<title>" << escape(b->name) << " (" << escape(binding) << "): " << b->bytes() << " bytes at " << b->offset
        << ", kernels " << first << "-" << last << "</title></rect>\n";
  }
  double peak = y_of(double(fn.workspace_bytes));
  svg << "<line class=\"peak\" x1=\"" << kLeft << "\" x2=\"" << kLeft + kWidth << "\" y1=\"" << peak << "\" y2=\"" << peak
      << "\" stroke=\"#c00\" stroke-dasharray=\"6,3\"/>\n";
  svg << "<text x=\"" << kLeft + kWidth + 6 << "\" y=\"" << peak + 4 << "\" font-size=\"12\" fill=\"#c00\">peak "
      << fn.workspace_bytes << " B</text>\n";
  svg << "<text x=\"" << kLeft + kWidth / 2 << "\" y=\"" << y + kHeight + 18
      << "\" font-size=\"12\" text-anchor=\"middle\">kernels in execution order (" << fn.kernels.size() << ")</text>\n";
  svg << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + kHeight << "\" font-size=\"11\" text-anchor=\"end\">0</text>\n";
  svg << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + 4 << "\" font-size=\"11\" text-anchor=\"end\">" << scale
      << " B</text>\n";
}

} // namespace

std::string memory_picture(const CompiledModule &compiled, bool html) {
  struct Panel {
    const LoweredFunction *fn;
    std::string label;
    int64_t scale;
  };
  std::vector<Panel> panels;
  for (size_t i = 0; i < compiled.lowered.functions.size(); ++i) {
    const LoweredFunction &fn = compiled.lowered.functions[i];
    const LoweredFunction *none =
        i < compiled.unrematerialized.functions.size() ? &compiled.unrematerialized.functions[i] : nullptr;
    int64_t scale = std::max(fn.workspace_bytes, none ? none->workspace_bytes : 0);
    if (scale == 0)
      continue;
    std::string plan = i < compiled.reports.size() ? compiled.reports[i].remat_strategy : "";
    panels.push_back({&fn, "@" + fn.name + " as compiled (remat plan: " + plan + "): " +
                               std::to_string(fn.workspace_bytes) + " bytes", scale});
    if (none && none->workspace_bytes != fn.workspace_bytes)
      panels.push_back({none, "@" + fn.name + " keeping everything (--remat=none): " +
                                  std::to_string(none->workspace_bytes) + " bytes", scale});
  }
  double height = kTop + double(panels.size()) * (kHeight + kGap) + 10;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kLeft + kWidth + 120 << "\" height=\"" << height
      << "\" font-family=\"sans-serif\">\n";
  svg << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"16\">gradc: the planned workspace, buffers over the "
         "kernels that use them</text>\n";
  double y = kTop + 20;
  for (const Panel &p : panels) {
    panel(svg, *p.fn, p.label, y, p.scale);
    y += kHeight + kGap;
  }
  svg << "</svg>\n";
  if (!html)
    return svg.str();
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gradc memory</title></head><body>\n" + svg.str() +
         "</body></html>\n";
}

} // namespace gradc
