"""Running out of memory after parsing (type inference, the gradient, LLVM) is an error about
the model's size, exit 1, not an internal error (issue 14 item 12). Finds the smallest
address-space limit (RLIMIT_AS, in 16 MiB steps) under which `gradc check` reads MODEL, then
compiles it with its gradient under that limit plus 32 MiB, which needs far more.
Usage: out_of_memory_compiling.py GRADC MODEL WORKDIR; prints the exit code and stderr."""
import os
import resource
import subprocess
import sys

gradc, model, work = (os.path.abspath(a) for a in sys.argv[1:4])
os.makedirs(work, exist_ok=True)


def run(limit, *args):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return subprocess.run([gradc, *args], preexec_fn=set_limit, capture_output=True, text=True, cwd=work)


MiB = 1 << 20
for limit in range(64 * MiB, 2048 * MiB, 16 * MiB):
    if run(limit, "check", model).returncode == 0:
        break
else:
    print("skipped: gradc does not start under 2 GiB of address space: nothing measured, skipped")  # a sanitizer build
    sys.exit(0)
r = run(limit + 32 * MiB, "compile", model, "--grad", "-o", "m")  # reading surely fits
print("exit %d" % r.returncode)
print(r.stderr[:2000])
