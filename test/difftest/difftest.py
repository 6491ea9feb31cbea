#!/usr/bin/env python3
"""The gradc differential tester: random well-typed programs built from the operator registry,
run through gradc in several ways and compared with independent references and with each other.

    difftest.py GRADC [--seed N] [--budget SECONDS] [--programs N] [--jobs N] [--work DIR] [--keep]
                      [--only OPERATOR] [--index I]

For each program (generator.py: chains of 2-8 operators, odd and prime sizes, fan-out, float32 /
float64 / float16, checkpoint segments, helper functions and tuples, unused and non-differentiated
parameters):

  comparison                                            how
  `gradc run` forward           vs numpy float64        tolerance (reference.py)
  `gradc run --grad`            vs PyTorch float64      tolerance: result and every gradient
  `gradc run --target=cuda      vs PyTorch float64      tolerance, as --grad (the GPU's program
    --simulate --grad`                                  run on the CPU: its tiles, warps, races)
  object, 1 thread              vs `gradc run`          bitwise (same options, same codegen)
  object, 2 threads             vs object, 1 thread     bitwise (m.h: results never depend on
                                                        the number of threads)
  object -O0, -O1 or -O3        vs object -O2           bitwise (gradc keeps IEEE semantics at
                                                        every level: no fast-math, contraction
                                                        decided per target, not per level)
  object --remat=none           vs --remat=manual       bitwise (SPEC §6)
  object --cpu=x86-64 or        vs object (host CPU)    tolerance (other vector width, FMA or
    --cpu=haswell                                       not)
  the dumped adjoint            vs `gradc run --grad`   bitwise (`--dump-ir=grad` output parses
    (`--entry=main_adjoint`)                            back to the same module, SPEC §3)
  --grad of `sum(d_k)` through  vs PyTorch double       tolerance (second order: SPEC §5, the
    the dumped adjoint             backward             adjoint is ordinary IR)

The first five rows run for every program, the others for a part of them (the program's plan,
drawn with it). The object runs through a generated C harness (execute.py) linked with
`cc harness.c m.o -lm -lpthread`; it fills outputs and workspace with 0xAB garbage, checks guards
after every buffer and that the inputs are unchanged. Where `gradc run` has `--threads`, the
forward runs on 1 thread and the adjoint on 2.

Every registry operator must have an entry in operators.py (or be listed there as not generated,
with the reason); otherwise the tester fails before generating anything. Program i of a seed
always features operator (i + seed) mod N (the registry's generated operators in name order), so a
run of at least N programs covers every operator.

Output: a FAIL block per mismatch (the comparison, max abs/rel error, the command, and the
program shrunk to the fewest bindings that still fail, with its files kept under --work), a KNOWN
block for a failure of an open bug of known_bugs.py, then a summary line. The exit status is 1 on
any failure (a stale known_bugs.py entry included), 2 on a usage error.
"""
import argparse
import collections
import concurrent.futures
import functools
import glob
import itertools
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inputs"))
import execute  # noqa: E402
import host_cpus  # noqa: E402
import generator  # noqa: E402
import known_bugs  # noqa: E402
import operators  # noqa: E402
import reference  # noqa: E402

# How the object is built for each comparison, beyond the program's --grad/--wrt flags (the
# optimisation level and the CPU of a program's "olevel" and "cpu" comparisons are in its plan).
@functools.lru_cache(maxsize=None)
def runnable_cpu(cpu):
    """`cpu` if this host runs its code (test/inputs/host_cpus.py decides, independently of
    gradc), else x86-64, which every x86-64 host runs: the program's draw stays the same on
    every host, and no object is run where it would die of an illegal instruction."""
    return cpu if host_cpus.runnable(cpu, host_cpus.host_flags())[0] else "x86-64"


OBJECT_CONFIGS = {"O2": lambda prog: [], "olevel": lambda prog: [f"-O{prog.olevel}"],
                  "remat-none": lambda prog: ["--remat=none"],
                  "cpu": lambda prog: [f"--cpu={runnable_cpu(prog.cpu)}"]}
LABELS = {
    "forward": "gradc run forward vs numpy",
    "grad": "gradc run --grad vs numpy/PyTorch",
    "gpu": "gradc run --target=cuda --simulate --grad (the GPU program on the CPU) vs numpy/PyTorch",
    "object": "object (1 thread) vs gradc run, bitwise",
    "threads": "object 2 threads vs 1 thread, bitwise",
    "olevel": "object -O0/-O1/-O3 vs -O2, bitwise",
    "remat-none": "object --remat=none vs --remat=manual, bitwise",
    "cpu": "object --cpu=x86-64/haswell vs the host CPU",
    "roundtrip": "the dumped adjoint (--dump-ir=grad) run again vs gradc run --grad, bitwise",
    "second": "second order: --grad of a function calling the dumped adjoint vs PyTorch double backward",
    "reference": "reference self-check (numpy vs PyTorch forward): a bug in test/difftest/operators.py",
    "tester": "an exception in the tester (test/difftest): a bug there",
}
# Always compared; the generator adds some of the others to each program's plan (prog.checks).
CORE = frozenset({"reference", "forward", "grad", "gpu", "object", "threads"})
BITWISE = frozenset({"object", "threads", "olevel", "remat-none", "roundtrip"})
MAX_ATTEMPTS = 8  # programs drawn for one index before giving up (all rejected)
GRADIENT_LIMIT = {"float16": 8000.0}  # a program with larger gradients is drawn again (1e6 otherwise)
SHRINK_SECONDS = 60


# What every worker needs: the binary, the seed, the registry, where files go, whether to keep
# passing programs' files, whether `gradc run` has --threads, the open known bugs.
Setup = collections.namedtuple("Setup", "gradc seed registry work keep run_threads known")


class Failure:
    def __init__(self, kind, message, command):
        self.kind, self.message, self.command = kind, message, command


def leaf_names(prog):
    fields = ["result"] if not prog.is_tuple() else [f"result field {i}" for i in range(len(prog.result))]
    return fields, fields + [f"gradient of {p.name}" for p in prog.wrt_params()]


class Checker:
    """Runs one program every way its plan says (the core comparisons, and prog.checks) and
    collects the failures; `kinds` replaces the plan when a failure is re-checked on a shrunk
    program."""

    def __init__(self, gradc, prog, workdir, kinds=None, run_threads=False, seed=0):
        self.gradc, self.prog, self.workdir = gradc, prog, workdir
        self.seed = seed  # of the perturbations of the rounding estimate
        # `gradc run --threads=N` where gradc has it: the forward on 1 thread, the adjoint on 2
        self.threads = (["--threads=1"], ["--threads=2"]) if run_threads else ([], [])
        self.kinds = kinds if kinds is not None else CORE | prog.checks
        self.failures = []
        self.gradc_calls = self.object_calls = 0  # gradc run/compile invocations; calls of m_FN
        self.comparisons = collections.Counter()

    def wanted(self, *kinds):
        return any(k in self.kinds for k in kinds)

    def compare(self, kind, command, results):
        self.comparisons[kind] += len(results)
        for r in results:
            if r is not None:
                self.failures.append(Failure(kind, str(r), command))
                return

    def run(self):
        prog = self.prog
        execute.write_program(prog, self.workdir)
        ref = reference.evaluate(prog, emulate=False)
        noises = reference.rounding_estimates(prog, ref, self.seed)
        ref_fwd = [v.data for v in prog.result]
        fwd_names, grad_names = leaf_names(prog)
        # numpy and PyTorch differ by float64 rounding, which the program's own
        # rounding noise estimates scaled down to float64's unit roundoff (a sum
        # that cancels to 0 in exact arithmetic is ~1e-14 off it on both sides)
        self.tol = reference.least_precise(prog.float_dtypes())
        scale = reference.EPSILON["float64"] / reference.EPSILON[self.tol]
        self.compare("reference", "", [reference.close(n, t, r, noise * scale, "float64")
                                       for n, t, r, noise in zip(fwd_names, ref.forward, ref_fwd, noises)])
        if self.failures:
            return self
        refs = ref_fwd + ref.grads
        self.noises = noises[:len(refs)]
        specs = [(v.dtype, v.shape) for v in prog.result] + [(p.dtype, p.shape) for p in prog.wrt_params()]
        leaves = {"main": specs[:len(prog.result)], "main_adjoint": specs}

        run_fwd = run_grad = None
        if self.wanted("forward", "object"):
            run_fwd = self.tool("forward", lambda: execute.gradc_run(self.gradc, prog, self.workdir, "run-forward",
                                                                      self.threads[0]))
            if run_fwd:
                self.against_reference("forward", run_fwd, fwd_names, specs, refs, self.noises)
        if self.wanted("grad", "object", "roundtrip", "second"):
            dump = ["--dump-ir=grad", "--dump-dir=dumps"] if self.wanted("roundtrip", "second") else []
            run_grad = self.tool("grad", lambda: execute.gradc_run(self.gradc, prog, self.workdir, "run-grad",
                                                                   prog.grad_flags() + self.threads[1] + dump))
            if run_grad:
                self.against_reference("grad", run_grad, grad_names, specs, refs, self.noises)
        if self.failures_of("forward", "grad"):
            return self
        if run_grad and self.wanted("gpu"):
            flags = ["--target=cuda", "--simulate", "--verify-each"] + prog.grad_flags()
            gpu = self.tool("gpu", lambda: execute.gradc_run(self.gradc, prog, self.workdir, "run-gpu", flags))
            if gpu:
                self.against_reference("gpu", gpu, grad_names, specs, refs, self.noises)
        if run_grad and self.wanted("roundtrip", "second"):
            self.dumped_adjoint(run_grad, grad_names, ref, noises[len(refs):])
        if self.wanted("object", "threads", "olevel", "remat-none", "cpu"):
            self.objects(run_fwd, run_grad, leaves, fwd_names, grad_names)
        return self

    def against_reference(self, kind, run, names, specs, refs, noises):
        outs, command = run
        results = [reference.check_type(n, o, *s) for n, o, s in zip(names, outs, specs)]
        if len(outs) != len(names):
            results.append(reference.Mismatch("outputs", f"{len(outs)} outputs, expected {len(names)}"))
        if not any(results):
            results = [reference.close(n, o, r, z, self.tol) for n, o, r, z in zip(names, outs, refs, noises)]
        self.compare(kind, command, results)

    def dumped_adjoint(self, run_grad, grad_names, ref, second_noises):
        """The adjoint as `--dump-ir=grad` wrote it, run again (bitwise the same), and
        differentiated again through a function that calls it (second order)."""
        prog = self.prog
        dumped = sorted(glob.glob(os.path.join(self.workdir, "dumps", "*-grad.relay")))
        if not dumped:
            self.failures.append(Failure("roundtrip", "--dump-ir=grad --dump-dir wrote no *-grad.relay", run_grad[1]))
            return
        model = os.path.relpath(dumped[0], self.workdir)
        if self.wanted("roundtrip"):
            again = self.tool("roundtrip", lambda: execute.gradc_run(self.gradc, prog, self.workdir, "run-roundtrip",
                                                                     ["--entry=main_adjoint"], model))
            if again:
                self.compare("roundtrip", again[1], [reference.bitwise(n, o, r) for n, o, r in
                                                     zip(grad_names, again[0], run_grad[0])])
        if self.wanted("second") and prog.second is not None:
            with open(dumped[0]) as f:
                text = f.read()
            params = ", ".join(f"{p.name}: {p.type_text()}" for p in prog.params)
            args = ", ".join(p.name for p in prog.params)
            text += (f"def @second({params}) {{\n  %r = @main_adjoint({args});\n"
                     f"  sum((%r.1).{prog.second})\n}}\n")
            with open(os.path.join(self.workdir, "second.relay"), "w") as f:
                f.write(text)
            flags = ["--grad=second"] + prog.grad_flags()[1:]
            run = self.tool("second", lambda: execute.gradc_run(self.gradc, prog, self.workdir, "run-second",
                                                                flags, "second.relay"))
            if run:
                wrt = prog.wrt_params()
                names = [f"sum(gradient of {wrt[prog.second].name})"] + [f"its gradient for {p.name}" for p in wrt]
                specs = [(wrt[prog.second].dtype, ())] + [(p.dtype, p.shape) for p in wrt]
                self.against_reference("second", run, names, specs, ref.second, second_noises)

    def objects(self, run_fwd, run_grad, leaves, fwd_names, grad_names):
        default = self.object("O2", [1, 2], leaves)
        if default is None:
            return
        outs, command = default
        names = {"main": fwd_names, "main_adjoint": grad_names}
        if run_fwd and run_grad and self.wanted("object"):
            for fn, run in (("main", run_fwd), ("main_adjoint", run_grad)):
                self.compare("object", command, [reference.bitwise(f"{fn} {n}", o, r)
                                                 for n, o, r in zip(names[fn], outs[(fn, 1)], run[0])])
        if self.wanted("threads"):
            for fn in names:
                self.compare("threads", command, [reference.bitwise(f"{fn} {n}", o, r)
                                                  for n, o, r in zip(names[fn], outs[(fn, 2)], outs[(fn, 1)])])
        for config in ("olevel", "remat-none"):
            if self.wanted(config):
                other = self.object(config, [1], leaves)
                if other:
                    for fn in names:
                        self.compare(config, other[1], [reference.bitwise(f"{fn} {n}", o, r) for n, o, r in
                                                        zip(names[fn], other[0][(fn, 1)], outs[(fn, 1)])])
        if self.wanted("cpu"):
            other = self.object("cpu", [2], leaves)
            if other:
                for fn in names:
                    self.compare("cpu", other[1], [
                        reference.close(f"{fn} {n}", o, r.astype(np.float64) if r.dtype.kind == "f" else r, z, self.tol)
                        for n, o, r, z in zip(names[fn], other[0][(fn, 2)], outs[(fn, 2)], self.noises)])

    def failures_of(self, *kinds):
        return [f for f in self.failures if f.kind in kinds]

    def tool(self, kind, action, invokes_gradc=True):
        self.gradc_calls += invokes_gradc
        try:
            return action()
        except execute.ToolFailure as e:
            self.failures.append(Failure(kind, f"{e.what} failed: {e.detail}", e.cmd))
            return None

    def object(self, config, threads, leaves):
        """Builds the object of CONFIG and calls both functions with each thread count."""
        kind = "object" if config == "O2" else config
        flags = self.prog.grad_flags() + OBJECT_CONFIGS[config](self.prog)
        build = self.tool(kind, lambda: execute.build_object(self.gradc, self.prog, self.workdir, config, flags,
                                                             leaves))
        if build is None:
            return None
        result = self.tool(kind, lambda: execute.run_object(self.prog, self.workdir, config, threads, leaves),
                           invokes_gradc=False)
        if result is None:
            return None
        self.object_calls += len(leaves) * len(threads)
        outs, run_command = result
        return outs, f"(cd {self.workdir} && {build}) && {run_command}"


def draw(seed, index, registry, forced_op):
    """Program `index` of `seed`: the first drawn program whose reference is well-posed."""
    for attempt in range(MAX_ATTEMPTS):
        sub_seed = np.random.SeedSequence([seed, index, attempt]).generate_state(1)[0]
        prog = generator.generate(int(sub_seed), registry, forced_op)
        if prog is None:
            continue
        ref = reference.evaluate(prog, emulate=False)
        wrt = prog.wrt_params()
        dtypes = [p.dtype for p in wrt] + ([wrt[prog.second].dtype] + [p.dtype for p in wrt] if ref.second else [])
        if all(np.all(np.isfinite(g)) and np.all(np.abs(g) < GRADIENT_LIMIT.get(d, 1e6))
               for g, d in zip(ref.grads + (ref.second or []), dtypes)):
            return prog, attempt
    return None, MAX_ATTEMPTS


def shrink(setup, prog, failure, workdir):
    """The program with the fewest bindings that still fails the same comparison (by giving each
    binding's value as the only result, with what it needs), within SHRINK_SECONDS."""
    start = time.time()
    candidates = []
    for b in prog.bindings:
        if b.out.is_float() and b.op != "grad.start_checkpoint":
            cut = prog.restricted(b.out)
            if cut is not None and len(cut.bindings) < len(prog.bindings):
                candidates.append(cut)
    candidates.sort(key=lambda p: len(p.bindings))
    for i, cut in enumerate(candidates):
        if time.time() - start > SHRINK_SECONDS:
            break
        d = os.path.join(workdir, f"shrink{i}")
        checker = Checker(setup.gradc, cut, d, {failure.kind}, setup.run_threads).run()
        same = checker.failures_of(failure.kind)
        if same:
            return cut, same[0], d
        shutil.rmtree(d, ignore_errors=True)
    return None


def test_program(setup, index, forced_op):
    """One program, every comparison; returns a summary dict for the parent process. An exception
    in the tester itself is reported as a failure too (kind "tester")."""
    summary = {"index": index, "rejected": 0, "gradc_calls": 0, "object_calls": 0, "comparisons": {},
               "failures": [], "ops": []}
    prog = None
    try:
        prog, summary["rejected"] = draw(setup.seed, index, setup.registry, forced_op)
        if prog is None:
            return summary
        workdir = os.path.join(setup.work, f"p{index}")
        checker = Checker(setup.gradc, prog, workdir, run_threads=setup.run_threads, seed=index).run()
        summary.update(gradc_calls=checker.gradc_calls, object_calls=checker.object_calls,
                       comparisons=dict(checker.comparisons), ops=sorted(prog.ops()))
        for failure in checker.failures:
            report = {"kind": failure.kind, "message": failure.message, "command": failure.command,
                      "program": prog.text(), "flags": " ".join(prog.grad_flags()), "dir": workdir,
                      "bindings": len(prog.bindings)}
            known = next((b.name for b in setup.known if b.matches(failure.kind, failure.message)), None)
            if known:
                report["known"] = known
            small = shrink(setup, prog, failure, workdir) if failure.kind != "reference" and not known else None
            if small:
                cut, cut_failure, cut_dir = small
                report.update(shrunk=cut.text(), shrunk_flags=" ".join(cut.grad_flags()),
                              shrunk_message=cut_failure.message, shrunk_command=cut_failure.command,
                              shrunk_dir=cut_dir, shrunk_bindings=len(cut.bindings))
            summary["failures"].append(report)
        if not checker.failures and not setup.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    except Exception:
        summary["failures"].append({
            "kind": "tester", "message": traceback.format_exc().rstrip().replace("\n", "\n  "),
            "command": f"{sys.executable} {os.path.abspath(__file__)} {setup.gradc} --seed {setup.seed} "
                       f"--index {index}",
            "program": prog.text() if prog else "(not drawn)", "flags": "", "dir": setup.work, "bindings": 0})
    return summary


def init_worker():
    """Each worker process uses one core: the machine's other core runs the other worker."""
    reference.torch.set_num_threads(1)


def print_failure(seed, report):
    if "known" in report:
        print(f"KNOWN program {report['index']} (seed {seed}): {LABELS[report['kind']]}")
        print(f"  a known gradc bug (test/difftest/known_bugs.py): {report['known']}")
    else:
        print(f"FAIL program {report['index']} (seed {seed}): {LABELS[report['kind']]}")
    print(f"  {report['message']}")
    if "shrunk" in report:
        print(f"  shrunk from {report['bindings']} to {report['shrunk_bindings']} bindings "
              f"({report['shrunk_dir']}), where it fails with:")
        print(f"  {report['shrunk_message']}")
        print(f"  command: {report['shrunk_command']}")
        print(f"  the program's flags: {report['shrunk_flags']}")
        text = report["shrunk"]
    else:
        print(f"  command: {report['command']}")
        print(f"  the program's flags: {report['flags']}  (files in {report['dir']})")
        text = report["program"]
    print("  " + text.rstrip().replace("\n", "\n  "))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gradc", help="the gradc binary")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", type=float, default=110.0, help="seconds: no new program starts after it")
    ap.add_argument("--programs", type=int, default=None, help="at most this many programs")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--work", default=None, help="keep programs' files here (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the files of passing programs too")
    ap.add_argument("--only", default=None, help="feature only this operator in every program")
    ap.add_argument("--index", type=int, default=None, help="run program INDEX of the seed alone (reproduces it)")
    args = ap.parse_args()

    start = time.time()
    gradc = os.path.abspath(args.gradc)
    registry = json.loads(subprocess.run([gradc, "ops", "--json"], check=True, capture_output=True,
                                         text=True).stdout)
    problems = operators.check_registry(registry)
    if problems:
        print("\n".join(problems))
        return 1
    generated = sorted(op["name"] for op in registry if op["name"] not in operators.NOT_GENERATED
                       and op["name"] not in operators.SEGMENT_MARKERS)
    if args.only and args.only not in generated:
        ap.error(f"--only {args.only}: not a generated operator")
    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(prefix="gradc-difftest-")
    os.makedirs(work, exist_ok=True)

    run_help = subprocess.run([gradc, "run", "--help"], capture_output=True, text=True).stdout
    known, stale = [], []
    for i, bug in enumerate(known_bugs.KNOWN_BUGS):
        (known if bug.still_open(gradc, os.path.join(work, f"known{i}")) else stale).append(bug)
    for bug in stale:
        print(f"FAIL: known bug no longer reproduces: remove its entry from test/difftest/known_bugs.py: {bug.name}")
    setup = Setup(gradc, args.seed, registry, work, args.keep, "--threads" in run_help, known)
    totals = {"programs": 0, "rejected": 0, "gradc_calls": 0, "object_calls": 0, "failures": len(stale),
              "known": 0}
    comparisons, covered = collections.Counter(), collections.Counter()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx,
                                                initializer=init_worker) as pool:
        indices = iter([args.index]) if args.index is not None else itertools.count()
        pending, submitted = set(), 0

        def submit():
            nonlocal submitted
            index = next(indices, None)
            if index is None or time.time() - start > args.budget or submitted == args.programs:
                return
            forced = args.only or generated[(index + args.seed) % len(generated)]
            pending.add(pool.submit(test_program, setup, index, forced))
            submitted += 1

        for _ in range(2 * args.jobs):
            submit()
        while pending:
            done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in done:
                pending.remove(fut)
                s = fut.result()
                totals["rejected"] += s["rejected"]
                totals["programs"] += bool(s["ops"])
                totals["gradc_calls"] += s["gradc_calls"]
                totals["object_calls"] += s["object_calls"]
                comparisons.update(s["comparisons"])
                covered.update(s["ops"])
                for report in s["failures"]:
                    totals["known" if "known" in report else "failures"] += 1
                    print_failure(args.seed, {**report, "index": s["index"]})
                submit()

    missing = [op for op in generated if op not in covered]
    bitwise = sum(n for k, n in comparisons.items() if k in BITWISE)
    print(f"difftest: seed {args.seed}: {totals['programs']} programs ({totals['rejected']} drawn and rejected), "
          f"{totals['gradc_calls']} gradc runs and compiles, {totals['object_calls']} calls of compiled "
          f"functions, {sum(comparisons.values())} output comparisons ({bitwise} bitwise), "
          f"{len(generated) - len(missing)}/{len(generated)} generated operators covered, "
          f"{covered['grad.start_checkpoint']} with checkpoint segments, {totals['failures']} failures, "
          f"{totals['known']} failures from known bugs, {time.time() - start:.0f} s")
    print("comparisons: " + ", ".join(f"{k} {comparisons[k]}" for k in LABELS if comparisons[k]))
    if missing:
        print("operators not covered in this run (more programs cover them): " + ", ".join(missing))
    print("not generated: " + "; ".join(f"{k} ({v})" for k, v in operators.NOT_GENERATED.items()))
    if not args.work and totals["failures"] == 0:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if totals["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
