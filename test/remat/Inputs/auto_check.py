"""Checks --remat=auto on a model against its --remat=none compile: for each
budget (a fraction of the no-remat peak), the manifest's peak is within the
budget, the workspace is the peak, what was recomputed is reported, and so
are the plans searched and the time it took; with
--max-extra, the FLOPs recomputed at that fraction are at most that many
forward passes. Budgets are monotone: a larger one never recomputes more.

usage: auto_check.py GRADC MODEL DIR FRACTION[:MAX_EXTRA_FORWARD_PASSES]...
"""
import json
import subprocess
import sys

gradc, model, out = sys.argv[1:4]


def adjoint(manifest):
    with open(manifest) as f:
        return [fn for fn in json.load(f)["functions"] if fn["name"] == "main_adjoint"][0]


subprocess.run([gradc, "compile", model, "--grad", "--remat=none", "-o", out + "/none"], check=True)
none = adjoint(out + "/none.json")
print("none: peak %d bytes, forward %d FLOPs" % (none["peak_bytes"], none["forward_flops"]))
last = None
for arg in sorted(sys.argv[4:], key=lambda a: float(a.split(":")[0])):
    fraction, _, most = arg.partition(":")
    budget = int(none["peak_bytes"] * float(fraction))
    name = "%s/auto_%s" % (out, fraction)
    subprocess.run([gradc, "compile", model, "--grad", "--remat=auto", "--memory-budget=%d" % budget, "-o", name],
                   check=True)
    fn = adjoint(name + ".json")
    ok = fn["peak_bytes"] <= budget and fn["workspace_bytes"] == fn["peak_bytes"] and fn["budget_bytes"] == budget
    ok = ok and fn["peak_bytes_no_remat"] == none["peak_bytes"] and (fn["extra_flops"] == 0) == (not fn["recomputed"])
    ok = ok and fn["remat_plans"] >= 1 and fn["remat_solver_seconds"] is not None
    ok = ok and none["remat_plans"] == 0 and none["remat_solver_seconds"] is None
    if most:
        ok = ok and fn["extra_flops"] <= float(most) * none["forward_flops"]
    if last is not None:
        ok = ok and fn["extra_flops"] <= last  # budgets ascend: never more FLOPs
    last = fn["extra_flops"]
    print("%s budget %s: peak %d <= %d, %d FLOPs recomputed (%.2f forward passes), %d values, plan %s" % (
        "PASS" if ok else "FAIL", fraction, fn["peak_bytes"], budget, fn["extra_flops"],
        fn["extra_flops"] / none["forward_flops"], len(fn["recomputed"]), fn["remat_strategy"]))
