#!/usr/bin/env python3
"""Fails when a layer of gradc includes a header of a layer above it.

Usage: check_layers.py SOURCE_DIR LAYER...   (layers lowest first, as in CMakeLists.txt)
A file under lib/L/ or include/gradc/L/ belongs to layer L; it may include
"gradc/M/..." only for M at or below L. Run on every build, so that a
back-edge fails to build even though every layer shares one include root.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
rank = {name: i for i, name in enumerate(sys.argv[2:])}
include = re.compile(r'#\s*include\s+"gradc/([a-z_]+)/')
errors = []
for layer in rank:
    for base in (root / "lib" / layer, root / "include" / "gradc" / layer):
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".h", ".cpp"):
                continue
            for lineno, line in enumerate(path.read_text().splitlines(), 1):
                m = include.search(line)
                if m and rank.get(m.group(1), -1) > rank[layer]:
                    errors.append(f"{path.relative_to(root)}:{lineno}: layer '{layer}' includes "
                                  f"'gradc/{m.group(1)}/', a layer above it")
for e in errors:
    print(e, file=sys.stderr)
unknown = [p.name for p in (root / "lib").iterdir() if p.is_dir() and p.name not in rank]
for name in unknown:
    print(f"lib/{name}: not a layer listed in CMakeLists.txt", file=sys.stderr)
sys.exit(1 if errors or unknown else 0)
