"""The training step under --remat=auto: the transformer sample's Adam step
compiled with --remat=none and with a budget below its peak (so the backward
pass recomputes), three steps of each through the C ABI on the same inputs:
every loss, weight and moment bitwise equal (SPEC §6: rematerialization never
changes results), and the planned workspace within the budget.

Usage: remat_step.py GRADC SAMPLES WORKDIR"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_abi import Function, aligned, compile_model  # noqa: E402

gradc, samples, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
WRT = "%E,%P,%ln1_g,%ln1_b,%Wqkv,%bqkv,%Wo,%bo,%ln2_g,%ln2_b,%W1,%b1,%W2,%b2"
model = os.path.join(samples, "transformer.relay")
steps = {}
for plan, flags in (("none", ["--remat=none"]), ("auto", ["--remat=auto", "--memory-budget=56000"])):
    manifest = compile_model(gradc, model, os.path.join(work, plan), "--train=adam(lr=0.01)", "--wrt=" + WRT, *flags)
    steps[plan] = Function(os.path.join(work, plan), manifest, "main_train_step")
none, auto = steps["none"].meta, steps["auto"].meta
print("peak: none %d bytes, auto %d bytes (budget 56000), %d values recomputed" % (
    none["workspace_bytes"], auto["workspace_bytes"], len(auto["recomputed"])))

rng = np.random.default_rng(11)
start = {}
for p in steps["none"].params:
    dt = {"float32": np.float32, "int64": np.int64}[p["dtype"]]
    if p.get("training") in ("optimizer_state", "step"):
        start[p["name"]] = np.zeros(p["shape"], dt)
    elif p["dtype"] == "int64":
        start[p["name"]] = rng.integers(0, 2, p["shape"]).astype(np.int64)
    else:
        start[p["name"]] = (rng.standard_normal(p["shape"]) * 0.3).astype(dt)
start["lr"] = np.array(0.01, np.float32)
bufs = {plan: {k: aligned(v) for k, v in start.items()} for plan in steps}
equal = True
for t in range(3):
    losses = {plan: steps[plan](bufs[plan])[0] for plan in steps}
    equal &= losses["none"].tobytes() == losses["auto"].tobytes()
equal &= all(bufs["none"][k].tobytes() == bufs["auto"][k].tobytes() for k in start)
print("three steps: %s" % ("bitwise equal" if equal else "DIFFERENT"))
print("within budget: %s" % (auto["workspace_bytes"] <= 56000 < none["workspace_bytes"] and len(auto["recomputed"]) > 0))
