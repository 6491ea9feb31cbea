//===- Version.cpp - the LLVM version gradc was built with ----------------===//
#include "gradc/codegen/Codegen.h"

#include <llvm/Config/llvm-config.h>

namespace gradc {

std::string llvm_version() { return LLVM_VERSION_STRING; }

} // namespace gradc
