"""Running out of memory while reading or parsing a model is an error about the input
(exit 1 and a diagnostic), not an internal error (issue 14, item 12). Finds the smallest
address-space limit (RLIMIT_AS, in 16 MiB steps) under which gradc checks a tiny model,
then checks MODEL under that limit plus 48 MiB, less than reading and parsing it needs.
Usage: out_of_memory_parsing.py GRADC MODEL WORKDIR; prints the exit code and stderr."""
import os
import resource
import subprocess
import sys

gradc, model, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
tiny = os.path.join(work, "tiny.relay")
with open(tiny, "w") as f:
    f.write('#[version = "0.0.5"]\ndef @main(%x: float32) { %x }\n')


def run(limit, path):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return subprocess.run([gradc, "check", path], preexec_fn=set_limit, capture_output=True, text=True)


MiB = 1 << 20
for limit in range(64 * MiB, 2048 * MiB, 16 * MiB):
    if run(limit, tiny).returncode == 0:
        break
else:
    # A sanitizer build reserves terabytes of address space: nothing to measure.
    print("skipped: gradc does not start under 2 GiB of address space: nothing measured, skipped")
    sys.exit(0)
r = run(limit + 48 * MiB, model)
print("exit %d" % r.returncode)
print(r.stderr[:2000])
