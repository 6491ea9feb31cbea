#!/usr/bin/env bash
# Installs gradc's build and test dependencies from Debian's archive (bookworm).
# Skips the install when everything is already present.
set -euo pipefail
PKGS=(cmake ninja-build ccache g++ clang-19 llvm-19-dev llvm-19-tools libcli11-dev nlohmann-json3-dev
      libspdlog-dev catch2 libonnx-dev python3-onnx libonnx-testdata zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev libcurl4-openssl-dev
      python3 python3-numpy python3-torch python3-torchvision libopenblas0-pthread
      python3-sklearn python3-matplotlib)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
