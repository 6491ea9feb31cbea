//===- ArtifactKinds.cpp - the files `gradc compile --emit` can write -----===//
#include "gradc/driver/ArtifactKinds.h"

namespace gradc {
namespace {

constexpr ArtifactKind kArtifactKinds[] = {
    // kind, --emit item, extension, cpu default, cuda default, cuda only
    {Artifact::Obj, "obj", ".o", true, true, false},
    {Artifact::Header, "header", ".h", true, true, false},
    {Artifact::Manifest, "manifest", ".json", true, true, false},
    {Artifact::Llvm, "llvm", ".ll", false, false, false},
    {Artifact::Asm, "asm", ".s", false, false, false},
    {Artifact::Ptx, "ptx", ".ptx", false, true, true},
};

} // namespace

std::span<const ArtifactKind> artifact_kinds() { return kArtifactKinds; }

const ArtifactKind *find_artifact(std::string_view name) {
  for (const ArtifactKind &a : kArtifactKinds)
    if (name == a.name)
      return &a;
  return nullptr;
}

std::string artifact_names(std::string_view separator) {
  std::string names;
  for (const ArtifactKind &a : kArtifactKinds)
    names += (names.empty() ? "" : std::string(separator)) + a.name;
  return names;
}

} // namespace gradc
