"""Two gradc processes commit to the same outputs at once (issue 14 item 7).

Each rename of a commit is atomic, but a set of them is not: two compiles to one -o could
leave the object of one beside the header of the other, and `run --output-dir`'s removal of
stale files could delete a concurrent run's outputs. GRADC_TEST_COMMIT_DELAY_MS stretches
every commit so that the two always overlap; the outputs must be one process's whole set.
Usage: concurrent_commits.py GRADC WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
env = dict(os.environ, GRADC_TEST_COMMIT_DELAY_MS="150")


def model(path, fn, outputs, value):
    fields = ", ".join('full(%sf, shape=[2], dtype="float32")' % value for _ in range(outputs))
    with open(path, "w") as f:
        f.write('#[version = "0.0.5"]\ndef @main() { (%s,) }\ndef @%s() { ones(shape=[1], dtype="float32") }\n'
                % (fields, fn))


def both(cmd_a, cmd_b):
    a = subprocess.Popen(cmd_a, env=env)
    b = subprocess.Popen(cmd_b, env=env)
    assert a.wait() == 0 and b.wait() == 0


model(os.path.join(work, "a.relay"), "fa", 2, 1)
model(os.path.join(work, "b.relay"), "fb", 4, 2)
failed = 0
for trial in range(3):
    out = os.path.join(work, "out%d" % trial)
    os.makedirs(out)
    base = os.path.join(out, "m")
    both([gradc, "compile", os.path.join(work, "a.relay"), "-o", base],
         [gradc, "compile", os.path.join(work, "b.relay"), "-o", base])
    symbols = subprocess.run(["llvm-nm", base + ".o"], capture_output=True, text=True, check=True).stdout
    header, manifest = open(base + ".h").read(), open(base + ".json").read()
    owners = {"a" if "m_fa" in symbols else "b", "a" if "m_fa(" in header else "b",
              "a" if '"fa"' in manifest else "b"}
    ok = len(owners) == 1
    failed += not ok
    print("%s compile set %d: object, header and manifest from %s" % ("PASS" if ok else "FAIL", trial, owners))

    runs = os.path.join(work, "runs%d" % trial)
    both([gradc, "run", os.path.join(work, "a.relay"), "--output-dir", runs],
         [gradc, "run", os.path.join(work, "b.relay"), "--output-dir", runs])
    names = sorted(os.listdir(runs))
    values = {float(np.load(os.path.join(runs, n))[0]) for n in names}
    ok = (names, values) in [(["output_0.npy", "output_1.npy"], {1.0}),
                             (["output_%d.npy" % i for i in range(4)], {2.0})]
    failed += not ok
    print("%s run set %d: %s holding %s" % ("PASS" if ok else "FAIL", trial, names, values))
print("%d passed, %d failed" % (6 - failed, failed))
sys.exit(1 if failed else 0)
