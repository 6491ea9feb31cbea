//===- ArtifactKinds.h - the files `gradc compile --emit` can write -------===//
//
// One table of the artifact kinds (SPEC §1): the --emit item, the file it
// writes beside the others, and when it is written. The command line checks
// --emit against it and lists it in its help and errors, compile_command
// derives the defaults, the code generation request and the file set from
// it, and an llvm, asm or ptx dump file takes its extension.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace gradc {

enum class Artifact { Obj, Header, Manifest, Llvm, Asm, Ptx };

struct ArtifactKind {
  Artifact kind;
  const char *name;      // the --emit item: "obj"
  const char *extension; // the file is BASE + extension: ".o"
  bool cpu_default;      // written without --emit for --target=cpu
  bool cuda_default;     // written without --emit for --target=cuda
  bool cuda_only;        // --emit of it needs --target=cuda
};

/// Every kind, in the order of SPEC §1 (and of the files in a set).
std::span<const ArtifactKind> artifact_kinds();

/// The kind whose --emit item is `name`, or nullptr.
const ArtifactKind *find_artifact(std::string_view name);

/// The --emit items joined by `separator`: "obj, header, manifest, ...".
std::string artifact_names(std::string_view separator);

} // namespace gradc
