"""Random programs that write results into their parameters, against the
same programs without inplace_indices: every result bitwise equal (an
update in place must not change what any kernel reads). Each program mixes
elementwise operators (written in place), transposes and products (which
read other elements), parameters returned as results, repeated results and
results read by later bindings. Usage: inplace_random.py GRADC DIR SEED N"""
import os
import random
import subprocess
import sys

import numpy as np

gradc, work, seed, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
T = "Tensor[(4, 4), float32]"
PARAMS = ["a", "b", "c"]


def program():
    values = ["%" + p for p in PARAMS]
    lines = []
    for i in range(rng.randint(1, 6)):
        x, y = rng.choice(values), rng.choice(values)
        op = rng.choice(["add", "mul", "sub", "transpose", "dense", "relu", "scale"])
        expr = {"add": f"{x} + {y}", "mul": f"{x} * {y}", "sub": f"{x} - {y}", "transpose": f"transpose({x})",
                "dense": f"nn.dense({x}, {y})", "relu": f"nn.relu({x})", "scale": f"{x} * 0.5f"}[op]
        lines.append(f"  %{i} = {expr};")
        values.append(f"%{i}")
    leaves = [rng.choice(values) for _ in range(rng.randint(1, 4))]
    free = list(range(len(PARAMS)))
    rng.shuffle(free)
    inplace = [free.pop() if free and rng.random() < 0.7 else -1 for _ in leaves]
    result = leaves[0] if len(leaves) == 1 else "(" + ", ".join(leaves) + ")"
    return lines, result, inplace


def text(lines, result, inplace):
    params = ", ".join(f"%{p}: {T}" for p in PARAMS)
    attrs = ", inplace_indices=[%s]" % ", ".join(map(str, inplace)) if inplace else ""
    return "\n".join(['#[version = "0.0.5"]', f"def @main({params}{attrs}) {{", *lines, f"  {result}", "}", ""])


def run(model, d):
    args = [gradc, "run", model, "--output-dir", d] + [f"--input={p}={work}/{p}.npy" for p in PARAMS]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    outs, i = [], 0
    while os.path.exists(f"{d}/output_{i}.npy"):
        outs.append(np.load(f"{d}/output_{i}.npy"))
        i += 1
    return outs


os.makedirs(work, exist_ok=True)
data = np.random.default_rng(seed)
for p in PARAMS:
    np.save(f"{work}/{p}.npy", data.uniform(-1, 1, (4, 4)).astype(np.float32))
bad = 0
for n in range(count):
    lines, result, inplace = program()
    for name, body in (("in_place", text(lines, result, inplace)), ("plain", text(lines, result, []))):
        with open(f"{work}/{n}.{name}.relay", "w") as f:
            f.write(body)
    got = run(f"{work}/{n}.in_place.relay", f"{work}/{n}.in_place.out")
    want = run(f"{work}/{n}.plain.relay", f"{work}/{n}.plain.out")
    if len(got) != len(want) or not all(np.array_equal(g, w) for g, w in zip(got, want)):
        bad += 1
        print(f"FAIL program {n}: {work}/{n}.in_place.relay")
print(f"{count - bad} of {count} programs equal")
