"""peer_timing.py - the timing policy of bench/timing.h for the peers timed in
Python (OpenBLAS through numpy, PyTorch), each in a process of its own: passes of
calls timed together, warmed up until the timings stop falling (at least
MIN_WARM_MS and 3 passes, at most MAX_WARM_MS), then the best of PASSES passes
of about PASS_MS each, in milliseconds per call. bench/bench.py gives the policy
as "MIN_WARM_MS,MAX_WARM_MS,PASS_MS,PASSES"; report() prints "MS SETTLED" as
the C programs do."""
import time


def _pass_ms(f, calls):
    start = time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - start) * 1e3 / calls


def torch_peer(argv):
    """A PyTorch peer's command line, `SCRIPT THREADS WHAT POLICY [DEVICE]` (DEVICE cpu by
    default, or cuda): PyTorch's thread counts are set to THREADS before any operation, and the
    seed to 0. Returns (threads, what, policy, device)."""
    import torch

    threads, what, policy = int(argv[1]), argv[2], argv[3]
    device = argv[4] if len(argv) > 4 else "cpu"
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    torch.manual_seed(0)
    return threads, what, policy, device


def on(device, f):
    """f, or on a GPU f followed by waiting for the device (its kernels run
    asynchronously, so a call's time is only known once they are done)."""
    if device == "cpu":
        return f
    import torch

    def call():
        f()
        torch.cuda.synchronize()
    return call


def report(f, policy):
    """Warms f up and times it under `policy`; prints "MS SETTLED"."""
    min_warm_ms, max_warm_ms, pass_ms, passes = (float(v) for v in policy.split(","))
    calls, warm_passes, best, settled = 1, 0, float("inf"), 0
    start = time.perf_counter()
    while True:
        ms = _pass_ms(f, calls)
        falling = ms < 0.98 * best
        best = min(best, ms)
        calls = max(1, int(pass_ms / ms))
        elapsed_ms = (time.perf_counter() - start) * 1e3
        warm_passes += 1
        if warm_passes >= 3 and elapsed_ms >= min_warm_ms and not falling:
            settled = 1
            break
        if elapsed_ms >= max_warm_ms:
            break
    print("%.5f %d" % (min(_pass_ms(f, calls) for _ in range(int(passes))), settled))
