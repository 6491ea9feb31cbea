# lit configuration: every test/<stage>/*.relay (and *.test) file with RUN lines.
import os
import shutil
import lit.formats

config.name = "gradc"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".relay", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gradc_bin_dir, "test")
config.excludes = ["inputs", "Inputs", "unit", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]

config.environment["PATH"] = os.pathsep.join(
    [config.gradc_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
# Every pass's output is verified in the tests (--verify-each).
config.environment["GRADC_VERIFY_EACH"] = "1"
config.substitutions.append(("%gradc", os.path.join(config.gradc_bin_dir, "gradc")))
config.substitutions.append(("%samples", os.path.join(config.gradc_src_dir, "samples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "inputs")))
config.substitutions.append(("%python", "/usr/bin/python3"))

# Built by tools/sanitize.sh: AddressSanitizer reserves terabytes of address
# space, so a test that runs gradc under `ulimit -v` cannot run there.
if getattr(config, "gradc_sanitized", False):
    config.available_features.add("asan")

import platform
if platform.machine() == "x86_64":
    config.available_features.add("x86_64-host")
ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# gpu_check.py prepare links its harness with cuda.h and the toolkit's stub libcuda.
if os.path.exists("/usr/local/cuda/include/cuda.h") and os.path.exists("/usr/local/cuda/lib64/stubs/libcuda.so"):
    config.available_features.add("cuda-toolkit")
try:
    import subprocess
    subprocess.run(["/usr/bin/python3", "-c", "import torch, numpy"], check=True, capture_output=True)
    config.available_features.add("torch")
except Exception:
    pass
try:
    subprocess.run(["/usr/bin/python3", "-c", "import numpy"], check=True, capture_output=True)
    config.available_features.add("numpy")
except Exception:
    pass
try:
    subprocess.run(["/usr/bin/python3", "-c", "import onnx, numpy"], check=True, capture_output=True)
    config.available_features.add("onnx")
except Exception:
    pass
try:
    subprocess.run(["/usr/bin/python3", "-c", "import torchvision"], check=True, capture_output=True)
    config.available_features.add("torchvision")
except Exception:
    pass
try:
    subprocess.run(["/usr/bin/python3", "-c", "import sklearn, matplotlib"], check=True, capture_output=True)
    config.available_features.add("sklearn")
except Exception:
    pass
if os.path.isdir("/usr/include/onnx/backend/test/data/node"):
    config.available_features.add("onnx-testdata")
