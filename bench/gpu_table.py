#!/usr/bin/env python3
"""gradc's GPU benchmark table: the sample and benchmark models compiled with
--target=cuda, timed on this machine's GPU, against PyTorch CUDA eager on the
same GPU; one markdown table headed by the GPU, its driver and the date.

  python3 test/gpu/gpu_check.py prepare build/gradc gpu.tar.xz   (where gradc is built; no GPU needed)
  python3 bench/gpu_table.py gpu.tar.xz [--calls 50]              (on the machine with the GPU)

It runs `test/gpu/gpu_check.py check BUNDLE --time CALLS`, which checks every case
of the bundle against the CPU and times the models (the object's own host code
launching the PTX; the median of CALLS calls after a first, each call waiting
for its kernels), then the PyTorch peers of the two training steps
(bench/torch_gpt.py and bench/torch_cnn.py on cuda, under bench/bench.py's
timing policy: the best pass of calls that each wait for the device). A case
that fails the check is marked in the table; the exit status is the check's.

The bundle's benchmark cases (`bench:`: products at 1024^3 to 8192^3, ResNet's 3x3
convolutions forward and with gradients, the resnet18 and GPT-2 small training steps of
bench/zoo) make their inputs on the device and are timed against PyTorch there by
bench/gpu_peers.py: eager in float32, eager with tf32, and torch.compile; a product's
result is compared with PyTorch's float64 product on the same inputs.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from bench import POLICY  # noqa: E402  (one timing policy for every peer)

# The models of the bundle that have a PyTorch CUDA peer: gpu_check's case name -> bench script.
PEERS = {"bench/gpt_step.relay": "torch_gpt.py", "bench/cnn_step": "torch_cnn.py"}
LINE = re.compile(r"^(PASS|FAIL) (\S+) \((\w+), (\d+) kernels\)(.*?)(?:  time median ([0-9.]+) ms, min ([0-9.]+) ms)?$")


def query(cmd, default):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip() or default
    except (subprocess.CalledProcessError, OSError):
        return default


def parse_check(lines):
    """(case, function, kernels, passed, median_ms) of every timed case of a gpu_check report."""
    rows = []
    for line in lines:
        m = LINE.match(line.rstrip("\n"))
        if m and m.group(6):
            rows.append((m.group(2), m.group(3), int(m.group(4)), m.group(1) == "PASS", float(m.group(6))))
    return rows


def bench_peers(bundle):
    """The PyTorch peer of each benchmark case of the bundle (case.json's "bench"), by case name."""
    peers = {}
    with tarfile.open(bundle) as tar:
        for member in tar.getmembers():
            if member.name.endswith("/case.json"):
                case = json.load(tar.extractfile(member))
                if case.get("bench"):
                    peers[case["name"]] = case["bench"]
    return peers


def torch_peer(script):
    """PyTorch's milliseconds for one step on the GPU, or None if PyTorch cannot run there."""
    env = dict(os.environ, PYTHONPATH=BENCH, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(BENCH, script), "1", "step", POLICY, "cuda"], env=env,
                          capture_output=True, text=True)
    return float(proc.stdout.split()[0]) if proc.returncode == 0 and proc.stdout.strip() else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", help="a bundle written by test/gpu/gpu_check.py prepare")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per model (the median is reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "check.txt")
        check = subprocess.run([sys.executable, os.path.join(ROOT, "test", "gpu", "gpu_check.py"), "check", args.bundle,
                                "--time", str(args.calls), "--report", report], stdout=sys.stderr)
        with open(report) as f:
            lines = f.readlines()
        peers = bench_peers(args.bundle)
    summary = lines[-1].strip() if lines else "no result"
    gpu = query(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], "unknown GPU, unknown")
    gpu_name, driver = (gpu.splitlines()[0].split(", ") + ["unknown"])[:2]
    torch_version = query([sys.executable, "-c", "import torch; print(torch.__version__)"], "not installed")
    print("Host: %s (driver %s). Date: %s (gradc %s). Command: `python3 bench/gpu_table.py BUNDLE --calls %d`; "
          "the check of every case against the CPU: %s. PyTorch %s." % (
              gpu_name, driver, datetime.date.today().isoformat(),
              query(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], "unknown"), args.calls, summary,
              torch_version))
    print()
    print("| model (float32, with gradients) | kernels | gradc | PyTorch CUDA eager | PyTorch / gradc |")
    print("|---|---|---|---|---|")
    rows = parse_check(lines)
    for case, function, kernels, passed, ms in rows:
        if case.startswith("bench:"):
            continue
        theirs = torch_peer(PEERS[case]) if case in PEERS else None
        print("| %s `@%s`%s | %d | %.3f ms | %s | %s |" % (
            case, function, "" if passed else " (FAILED the check)", kernels, ms,
            "%.3f ms" % theirs if theirs else "", "%.2f×" % (theirs / ms) if theirs else ""))
    print()
    print("gradc: the median of %d calls after a first; PyTorch: the best pass of its timing policy; every call "
          "waits for the device. Above 1×, gradc is faster." % args.calls)
    bench_table([r for r in rows if r[0].startswith("bench:")], peers)
    return check.returncode


def bench_table(rows, peers):
    """The benchmark cases (gpu_check.py's bench: cases): gradc float32 against PyTorch CUDA eager
    in float32 and with tf32, and torch.compile, each ratio PyTorch / gradc."""
    if not rows:
        return
    print()
    print("| benchmark (float32) | gradc | PyTorch eager | eager / gradc | PyTorch tf32 | tf32 / gradc | "
          "torch.compile | compile / gradc |")
    print("|---|---|---|---|---|---|---|---|")
    for case, function, kernels, passed, ms in rows:
        theirs = gpu_peer(peers.get(case)) if case in peers else {}
        cells = []
        for key in ("eager", "tf32", "compile"):
            t = theirs.get(key)
            cells += ["%.3f ms" % t if t else "", "%.2f×" % (t / ms) if t else ""]
        print("| %s `@%s`%s | %.3f ms | %s |" % (case[len("bench:"):], function, "" if passed else " (FAILED)", ms,
                                                " | ".join(cells)))
    print()
    print("gradc computes in float32, `tf32` rows with --gpu-math=tf32 (compare them with PyTorch's tf32 "
          "column); `grad` rows and model steps are the loss and its gradients (no optimizer). PyTorch: "
          "bench/gpu_peers.py on the same inputs (harness.c's pattern).")


def gpu_peer(peer):
    """bench/gpu_peers.py's times for a case, in a process of its own: {"eager", "tf32", "compile"}."""
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "gpu_peers.py"), "time", json.dumps(peer)],
                          capture_output=True, text=True, timeout=1800)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


if __name__ == "__main__":
    sys.exit(main())
