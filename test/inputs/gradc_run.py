"""What the Python checks under test/ share: run a one-function model through
`gradc run` on numpy inputs and read its outputs back."""
import os
import subprocess

import numpy as np


def run_model(gradc, work, name, params, body, inputs, flags=()):
    """Writes WORK/NAME.relay as `def @main(PARAMS) { BODY }`, saves each input
    as WORK/NAME_KEY.npy, runs `gradc run` (with FLAGS) into WORK/NAME/ and
    returns the outputs in order."""
    model = os.path.join(work, name + ".relay")
    with open(model, "w") as f:
        f.write('#[version = "0.0.5"]\ndef @main(%s) {\n  %s\n}\n' % (params, body))
    out = os.path.join(work, name)
    args = [gradc, "run", model, "--output-dir", out, *flags]
    for key, value in inputs.items():
        path = os.path.join(work, "%s_%s.npy" % (name, key))
        np.save(path, value)
        args += ["--input", "%s=%s" % (key, path)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    outputs = []
    while os.path.exists(os.path.join(out, "output_%d.npy" % len(outputs))):
        outputs.append(np.load(os.path.join(out, "output_%d.npy" % len(outputs))))
    return outputs
