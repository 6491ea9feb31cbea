#!/usr/bin/env python3
"""Fails when an operator definition in lib/op tests the target.

Usage: check_op_targets.py SOURCE_DIR   (run on every build, with check_layers.py)

An operator family (lib/op/*.cpp and its internal headers) defines the
operator: attributes, relation, gradient, generic kernel, registration.
What a target does differently is a strategy in lib/op/<target>/, which the
target registers (OpRegistry::strategy). So outside those folders no file of
lib/op may read the target or name one: the registry (Registry.cpp, which
looks strategies up) is the only exception.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
forbidden = re.compile(r"\b(is_gpu|is_cpu|cpu_tuning|vector_lanes|vector_registers|TargetKind|gemm_cpu_packed)\b"
                       r"|\bk\.target\b")
allowed = {"Registry.cpp"}
errors = []
for path in sorted((root / "lib" / "op").glob("*")):
    if path.suffix not in (".h", ".cpp") or path.name in allowed:
        continue
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("//", 1)[0]
        m = forbidden.search(code)
        if m:
            errors.append(f"{path.relative_to(root)}:{lineno}: an operator definition tests the target "
                          f"('{m.group(0)}'): put it in a strategy under lib/op/<target>/")
for e in errors:
    print(e, file=sys.stderr)
sys.exit(1 if errors else 0)
