"""gradc's rematerialization benchmark: for each model of
bench/remat/models.py, the planned peak workspace of the adjoint and the FLOPs
recomputed with --remat=none, --remat=sqrt and --remat=auto over a sweep of
budgets (fractions of the peak that keeps everything, down to the smallest
workspace gradc can plan), the time auto's plan search took, and, where an
exhaustive search is computable (at most 16 forward kernels), the ratio of
auto's FLOPs to it (keep sets: every subset; chains: the program's schedules)
and of what auto finds without the exhaustive search (what larger models get).

Writes a Markdown table (stdout and OUT/remat.md), the raw figures
(OUT/remat.json) and the trade-off curves, peak against FLOPs recomputed, as
OUT/remat_tradeoff.png (matplotlib). Only compiles: nothing is timed but the
compiler's own search.

usage: bench/remat/run.py [--out DIR] [--only chain16,mlp,...] [--quick]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import models  # noqa: E402

GRADC = os.path.join(ROOT, "build", "gradc")
FRACTIONS = [0.9, 0.7, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1]
EXACT_UP_TO = 16  # forward kernels: an exhaustive search takes 2^N plans


def adjoint(manifest):
    with open(manifest) as f:
        return [fn for fn in json.load(f)["functions"] if fn["name"] == "main_adjoint"][0]


def compile_model(path, out, *flags):
    """The adjoint's manifest entry, or the smallest feasible workspace (an int) when the budget is refused."""
    p = subprocess.run([GRADC, "compile", path, "--grad", "--emit=manifest", "-o", out, *flags],
                       capture_output=True, text=True)
    if p.returncode == 0:
        return adjoint(out + ".json")
    m = re.search(r"the smallest workspace gradc can plan is (\d+) bytes", p.stderr)
    if not m:
        sys.exit("gradc failed on %s %s:\n%s" % (path, " ".join(flags), p.stderr))
    return int(m.group(1))


PLAN = re.compile(r"^\[remat\]   ([a-z-]+): workspace (\d+) bytes, (\d+) FLOPs recomputed")
SEARCH = re.compile(r"plans in (\d+) ms \((\d+) forward kernels\)")


def plans(path, out, *flags):
    """Every plan auto chooses from (-vv), as (workspace, FLOPs), and the forward kernels searched."""
    p = subprocess.run([GRADC, "compile", path, "--grad", "--emit=manifest", "-o", out, "--remat=auto",
                        "--memory-budget=1000GiB", "-vv", *flags], capture_output=True, text=True, check=True)
    found = [(int(m.group(2)), int(m.group(3))) for m in map(PLAN.match, p.stderr.splitlines()) if m]
    return found, int(SEARCH.search(p.stderr).group(2))


def least_flops(found, budget):
    fits = [f for w, f in found if w <= budget]
    return min(fits) if fits else None


def run_model(name, text, work, quick):
    path = os.path.join(work, name + ".relay")
    with open(path, "w") as f:
        f.write(text)
    base = os.path.join(work, name)
    none = compile_model(path, base + "_none", "--remat=none")
    sqrt = compile_model(path, base + "_sqrt", "--remat=sqrt")
    peak0, fwd = none["peak_bytes"], max(none["forward_flops"], 1)
    smallest = compile_model(path, base + "_min", "--remat=auto", "--memory-budget=1")
    assert isinstance(smallest, int)
    budgets = sorted({int(peak0 * f) for f in FRACTIONS if peak0 * f >= smallest} | {smallest}, reverse=True)
    if quick:
        budgets = budgets[::2] + ([smallest] if budgets[-1] != smallest else [])
    _, kernels = plans(path, base + "_plans")
    exact = greedy = None
    if kernels <= EXACT_UP_TO:
        exact, _ = plans(path, base + "_exact", "--remat-exhaustive=%d" % EXACT_UP_TO)
        greedy, _ = plans(path, base + "_greedy", "--remat-exhaustive=0")
    row = {"model": name, "none": peak0, "forward_flops": fwd, "forward_kernels": kernels,
           "sqrt": {"peak": sqrt["peak_bytes"], "extra": sqrt["extra_flops"]}, "smallest": smallest, "auto": []}
    for b in budgets:
        a = compile_model(path, base + "_auto", "--remat=auto", "--memory-budget=%d" % b)
        assert a["peak_bytes"] <= b, (name, b, a["peak_bytes"])
        entry = {"budget": b, "peak": a["peak_bytes"], "extra": a["extra_flops"], "plans": a["remat_plans"],
                 "solver_s": a["remat_solver_seconds"], "strategy": a["remat_strategy"]}
        if exact is not None:
            entry["exact_extra"] = least_flops(exact, b)
            entry["greedy_extra"] = least_flops(greedy, b)
        row["auto"].append(entry)
    return row


def ratio(a, b):
    if a is None or b is None:
        return "-"
    if b == 0:
        return "1.00" if a == 0 else "inf"
    return "%.2f" % (a / b)


def table(rows):
    out = ["| model | none: peak | sqrt: peak, extra | budget | auto: peak | extra (fwd passes) | strategy | plans | "
           "search | auto / exact | greedy / exact |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fwd = r["forward_flops"]
        for i, a in enumerate(r["auto"]):
            head = ["%s (%d kernels)" % (r["model"], r["forward_kernels"]), "%d" % r["none"],
                    "%d (%.0f%%), %.2f" % (r["sqrt"]["peak"], 100 * r["sqrt"]["peak"] / r["none"], r["sqrt"]["extra"] / fwd)
                    ] if i == 0 else ["", "", ""]
            exact = a.get("exact_extra")
            out.append("| " + " | ".join(head + [
                "%.0f%%" % (100 * a["budget"] / r["none"]) + (" (least)" if a["budget"] == r["smallest"] else ""),
                "%d" % a["peak"], "%.2f" % (a["extra"] / fwd), a["strategy"], "%d" % a["plans"],
                "%.0f ms" % (1000 * a["solver_s"]),
                ratio(a["extra"], exact) if "exact_extra" in a else "-",
                ratio(a.get("greedy_extra"), exact) if "exact_extra" in a else "-"]) + " |")
    return "\n".join(out)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 6))
    for r in rows:
        fwd = r["forward_flops"]
        pts = [(1.0, 0.0)] + [(a["peak"] / r["none"], a["extra"] / fwd) for a in r["auto"]]
        pts.sort()
        line, = ax.plot([p[1] for p in pts], [p[0] for p in pts], marker="o", ms=3, label=r["model"])
        ax.plot([r["sqrt"]["extra"] / fwd], [r["sqrt"]["peak"] / r["none"]], marker="x", ms=9, color=line.get_color())
    ax.set_xlabel("FLOPs recomputed (forward passes)")
    ax.set_ylabel("planned peak workspace / --remat=none")
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_title("gradc --remat=auto over a sweep of --memory-budget (x: --remat=sqrt)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "bench_remat"))
    parser.add_argument("--only", default=",".join(models.MODELS))
    parser.add_argument("--quick", action="store_true", help="every other budget")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    rows = []
    for name in args.only.split(","):
        print("... %s" % name, file=sys.stderr, flush=True)
        rows.append(run_model(name, models.MODELS[name](), work, args.quick))
    host = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p' | head -1"], capture_output=True,
                          text=True).stdout.strip()
    text = ("Host: %s (%d cores). Peaks in bytes; extra FLOPs in forward passes of the model; search: "
            "auto's plan search in the compiler (manifest remat_solver_seconds).\n\n" % (host, os.cpu_count()) + table(rows))
    print(text)
    with open(os.path.join(args.out, "remat.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "remat.json"), "w") as f:
        json.dump(rows, f, indent=1)
    plot(rows, os.path.join(args.out, "remat_tradeoff.png"))
    print("\nwrote %s/remat.md, remat.json, remat_tradeoff.png" % args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
