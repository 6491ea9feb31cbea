"""Reads a training-step case of gpu_check.py's bundle: its entry point, how many parameters
the harness passes in and out (inout:BYTES:IN:RESULT) and how many results it compares, whether
every result's file is written by exactly one argument (an output field or an updated parameter),
whether every reference exists, whether the optimizer state and step count start at zeros, and
the learning rate passed."""
import json
import os
import sys

import numpy as np

d = sys.argv[1]
case = json.load(open(os.path.join(d, "case.json")))
args = [a.split(":") for a in case["args"][1:]]
inout = [a for a in args if a[0] == "inout"]
written = [a[3] for a in inout] + [a[2] for a in args if a[0] == "out"]
outputs = case["outputs"]
once = sorted(written) == sorted(o["file"] for o in outputs)
refs = all(os.path.exists(os.path.join(d, o["ref"])) for o in outputs)
params = case["parameters"]
state = [np.fromfile(os.path.join(d, f"in_{i}.bin"), dtype=p["dtype"]) for i, p in enumerate(params)
         if p.get("training") in ("optimizer_state", "step")]
lr = [np.fromfile(os.path.join(d, f"in_{i}.bin"), dtype=p["dtype"]) for i, p in enumerate(params)
      if p.get("training") == "learning_rate"]
print(case["function"], f"inout={len(inout)}", f"outputs={len(outputs)}", f"every-result-written-once={once}",
      f"refs={refs}", f"state-zero={bool(state) and all(not s.any() for s in state)}", f"lr={float(lr[0][0]):.6g}")
