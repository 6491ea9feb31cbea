"""Writes the models of nesting_limit.test into the current directory: each kind of
nesting N levels deep (`nesting.py N`), or models with 64 and 65 dimensions (`nesting.py
rank`)."""
import sys

HEADER = '#[version = "0.0.5"]\n'
MAIN = "def @main(%x: Tensor[(4), float32]) {\n  "

if sys.argv[1] == "rank":
    ones = ", ".join(["1"] * 62)
    with open("rank64.relay", "w") as f:
        f.write(HEADER + "def @main(%%x: Tensor[(%s, 2), float32]) {\n  expand_dims(%%x, axis=0)\n}\n" % ones)
    with open("rank65.relay", "w") as f:
        f.write(HEADER + "def @main(%%x: Tensor[(%s, 1, 1, 2), float32]) {\n  %%x\n}\n" % ones)
    with open("rank65_inferred.relay", "w") as f:
        f.write(HEADER + "def @main(%%y: Tensor[(%s, 2), float32]) {\n  %%0 = expand_dims(%%y, axis=0);\n"
                "  %%1 = reshape(%%y, newshape=[%s]);\n  (%%0, %%1)\n}\n" % (", ".join(["1"] * 63), ", ".join(["1"] * 65)))
    sys.exit(0)

n = int(sys.argv[1])
# Each model nests n levels as written; `sum(%x)` at the bottom is itself a level.
models = {
    "paren": MAIN + "(" * n + "%x" + ")" * n,
    "call": MAIN + "negative(" * (n - 1) + "sum(%x)" + ")" * (n - 1),
    "minus": MAIN + "-" * (n - 1) + "sum(%x)",
    "tuple": MAIN + "(" * n + "%x" + ",)" * n,
    "global": "def @f(%y: float32) { %y * 2f }\n" + MAIN + "@f(" * (n - 1) + "sum(%x)" + ")" * (n - 1),
    "type": "def @main(%%x: %s) {\n  %%x" % ("(" * n + "float32" + ",)" * n),
    "attr": MAIN + "sum(%x, axis=" + "[" * (n - 1) + "0" + "]" * (n - 1) + ")",
    "fn": MAIN + "%s" % ("fn (%y: float32) { " * n + "%y" + " }" * n),
}
for name, text in models.items():
    with open(name + ".relay", "w") as f:
        f.write(HEADER + text + "\n}\n")
