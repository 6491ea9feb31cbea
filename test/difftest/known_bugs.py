"""Open gradc bugs the differential tester keeps finding, so that a run still finds the others.

Each entry has a minimal reproducer that the tester runs at start-up:

  * while the reproducer still shows the bug, a failure of the entry's comparison kinds whose
    message matches the entry's pattern is printed as KNOWN (with its program) and does not fail
    the run; every other failure still does;
  * once the reproducer passes, the bug is fixed and the entry is stale: the run fails with
    "known bug ... no longer reproduces: remove its entry", so no entry outlives its bug.

An entry is added only for a bug that is reported with its reproducer; it is not a way to skip
operators or comparisons.
"""
import glob
import os
import re
import subprocess


class KnownBug:
    def __init__(self, name, kinds, pattern, reproduce):
        self.name = name  # what is wrong, in a line
        self.kinds = frozenset(kinds)  # the comparisons (difftest.LABELS) it makes fail
        self.pattern = pattern  # a regular expression on the failure's message
        self.reproduce = reproduce  # (gradc, workdir) -> gradc's diagnostics while the bug is there

    def matches(self, kind, message):
        return kind in self.kinds and re.search(self.pattern, message) is not None

    def still_open(self, gradc, workdir):
        os.makedirs(workdir, exist_ok=True)
        return re.search(self.pattern, self.reproduce(gradc, workdir)) is not None


def _gradc(gradc, workdir, *args):
    """gradc's stderr when it fails, "" when it succeeds."""
    proc = subprocess.run([gradc, *args], cwd=workdir, capture_output=True, text=True)
    return proc.stderr if proc.returncode != 0 else ""


def _second_order(gradc, workdir, params, body, field):
    """gradc's diagnostics for the second order of a one-call model: its adjoint dumped by
    --dump-ir=grad, and --grad=second of the sum of its gradient for the `field`-th parameter
    (through a function that calls the adjoint)."""
    with open(os.path.join(workdir, "model.relay"), "w") as f:
        f.write('#[version = "0.0.5"]\ndef @main(%s) {\n  %s\n}\n' % (params, body))
    error = _gradc(gradc, workdir, "compile", "model.relay", "--grad", "--emit=obj", "-o", "m",
                   "--dump-ir=grad", "--dump-dir=dumps")
    dumps = glob.glob(os.path.join(workdir, "dumps", "*-grad.relay"))
    if error or not dumps:
        return error
    with open(dumps[0]) as f:
        dump = f.read()
    args = ", ".join(re.findall(r"%\w+(?=:)", params))
    with open(os.path.join(workdir, "second.relay"), "w") as f:
        f.write(dump + "def @second(%s) {\n  %%r = @main_adjoint(%s);\n  sum((%%r.1).%d)\n}\n" % (params, args, field))
    return _gradc(gradc, workdir, "compile", "second.relay", "--grad=second", "--emit=obj", "-o", "s")


KNOWN_BUGS = []
