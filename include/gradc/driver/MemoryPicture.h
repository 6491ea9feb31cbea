//===- MemoryPicture.h - the planned workspace drawn over the kernels ------===//
//
// `--report=FILE.svg` (or `.html`): for each function with a workspace, its
// arena as planned, kernels in execution order across and bytes up, every
// buffer a bar over the kernels it is live for at its offset (hover: name,
// binding, bytes), the peak marked; beside the plan as compiled, the plan
// keeping everything (--remat=none) at the same scale, so that what
// rematerialization bought is the difference in height.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/driver/Pipeline.h"

#include <string>

namespace gradc {

/// The picture as an SVG document, or an HTML page holding it (`html`).
std::string memory_picture(const CompiledModule &compiled, bool html);

} // namespace gradc
