"""Calls a function of a gradc-compiled CPU object through its C ABI (SPEC §8)
from Python: the object is linked into a shared library, the manifest says
the parameters, results and workspace, and each call fills the outputs and
the workspace with garbage first (pre-zeroed memory hides unwritten outputs).
A parameter updated in place is passed as the caller's own numpy array, which
the call changes."""
import ctypes
import json
import os
import subprocess

import numpy as np

DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


def aligned(a):
    """A copy of `a` in a buffer aligned to 64 bytes (the ABI's alignment)."""
    a = np.array(a, order="C")
    raw = np.empty(a.nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def compile_model(gradc, model, base, *flags):
    """`gradc compile MODEL -o BASE FLAGS...`, then BASE.so; returns the manifest."""
    subprocess.run([gradc, "compile", model, "-o", base, *flags], check=True)
    subprocess.run(["cc", "-shared", "-o", base + ".so", base + ".o", "-lm", "-lpthread"], check=True)
    with open(base + ".json") as f:
        return json.load(f)


class Function:
    def __init__(self, base, manifest, name):
        self.lib = ctypes.CDLL(os.path.abspath(base + ".so"))
        fns = [f for f in manifest["functions"] if f["name"] == name]
        assert fns, "no function " + name
        self.meta = fns[0]
        self.fn = getattr(self.lib, self.meta["symbol"])
        self.fn.restype = ctypes.c_int32
        self.params = self.meta["parameters"]
        self.own = [r for r in self.meta["results"] if r["role"] == "output"]
        size = max(self.meta["workspace_bytes"], 64)
        self.workspace = np.empty(size + 64, np.uint8)
        self.rng = np.random.default_rng(1)

    def param(self, name):
        return [p for p in self.params if p["name"] == name][0]

    def __call__(self, inputs):
        """`inputs`: name -> numpy array (exact dtype and shape, C order).
        Returns the function's own results; in-place ones change `inputs`."""
        ptrs = []
        for p in self.params:
            a = inputs[p["name"]]
            assert a.dtype == DTYPES[p["dtype"]] and list(a.shape) == p["shape"], (p["name"], a.dtype, a.shape)
            assert a.flags["C_CONTIGUOUS"] and a.flags["WRITEABLE"] and a.ctypes.data % 64 == 0, p["name"]
            ptrs.append(a.ctypes.data)
        outs = []
        for r in self.own:
            garbage = self.rng.integers(0, 256, r["bytes"], dtype=np.uint8)
            outs.append(aligned(garbage).view(DTYPES[r["dtype"]]).reshape(r["shape"]))
        self.workspace[...] = self.rng.integers(0, 256, self.workspace.size, dtype=np.uint8)
        off = (-self.workspace.ctypes.data) % 64
        in_struct = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
        out_struct = (ctypes.c_void_p * max(len(outs), 1))(*[o.ctypes.data for o in outs])
        status = self.fn(in_struct, out_struct, ctypes.c_void_p(self.workspace.ctypes.data + off))
        assert status == 0, "status %d" % status
        return outs
