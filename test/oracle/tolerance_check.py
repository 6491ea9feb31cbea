"""Checks of the oracle's float comparison (oracle.compare, oracle.term_magnitudes): a sum of
products is held to its terms' magnitudes, not to its own (cancellation), and a wrong value
still fails. Prints PASS or FAIL per check."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

REGISTRY = {"alias": {}, "defaults": {}}


def check(name, ok):
    print(("PASS " if ok else "FAIL ") + name)


def main():
    rng = np.random.default_rng(5)
    x = (rng.uniform(0.5, 1.5, (70, 45)) * rng.choice([-1.0, 1.0], (70, 45))).astype(np.float32)
    w = (rng.uniform(0.5, 1.5, (100, 45)) * rng.choice([-1.0, 1.0], (100, 45))).astype(np.float32)
    tree = oracle.Parser("nn.dense(%x, %w)").body()
    env = {"%x": x, "%w": w}
    want = np.asarray(oracle.evaluate(tree, env, REGISTRY)).astype(np.float32)
    scale = oracle.term_magnitudes(tree, env, REGISTRY)
    check("dense is multilinear", scale is not None and np.allclose(scale[0], np.abs(x) @ np.abs(w).T, rtol=1e-6))
    # The output nearest zero, off by a few ulps of its terms' sum (float32 rounding of 45 terms).
    at = np.unravel_index(np.argmin(np.abs(want)), want.shape)
    rounded = want.copy()
    rounded[at] += np.float32(4 * np.finfo(np.float32).eps * float(np.asarray(scale[0])[at]))
    check("rounding at the terms' scale passes", oracle.compare(rounded, want, scale[0]) is None)
    check("the same fails against the output's own scale", oracle.compare(rounded, want) is not None)
    wrong = want.copy()
    wrong[at] += np.float32(1e-3 * float(np.asarray(scale[0])[at]))
    check("an error of 1e-3 of the terms' sum fails", oracle.compare(wrong, want, scale[0]) is not None)
    exp_tree = oracle.Parser("exp(nn.dense(%x, %w))").body()
    check("exp of a product is not multilinear", oracle.term_magnitudes(exp_tree, env, REGISTRY) is None)
    nan = want.copy()
    nan[at] = np.nan
    check("a NaN where the reference has none fails", oracle.compare(nan, want, scale[0]) is not None)


if __name__ == "__main__":
    main()
