"""Which --cpu names this host can run, decided independently of gradc.

A CPU name implies instruction-set extensions; clang (`clang-19 -march=NAME -dM -E`) names
them as macros (__AVX2__, __FMA__, ...), and /proc/cpuinfo says which ones this machine (or
the VM it is) has. gradc's `run` must accept exactly the names whose code features the host
has: system instructions (invpcid, xsaves, rdseed, pku, ...) are no concern of generated code.

  host_cpus.py pick avx2          a name with AVX2 (no AVX-512) tiles that the host can run,
                                  or x86-64 with a note on stderr when it has none
  host_cpus.py check GRADC MODEL  for each candidate name: `gradc run --cpu=NAME` runs it
                                  iff the host has what the name implies; PASS/FAIL lines
"""
import shutil
import subprocess
import sys

# clang's ISA macro -> the /proc/cpuinfo flag of the same extension.
MACRO_FLAGS = {
    "__SSE__": "sse", "__SSE2__": "sse2", "__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1",
    "__SSE4_2__": "sse4_2", "__SSE4A__": "sse4a", "__POPCNT__": "popcnt", "__CRC32__": "sse4_2",
    "__AVX__": "avx", "__AVX2__": "avx2", "__FMA__": "fma", "__FMA4__": "fma4", "__XOP__": "xop",
    "__F16C__": "f16c", "__BMI__": "bmi1", "__BMI2__": "bmi2", "__LZCNT__": "abm", "__TBM__": "tbm",
    "__MOVBE__": "movbe", "__ADX__": "adx", "__AES__": "aes", "__PCLMUL__": "pclmulqdq", "__SHA__": "sha_ni",
    "__VAES__": "vaes", "__VPCLMULQDQ__": "vpclmulqdq", "__GFNI__": "gfni", "__LAHF_SAHF__": "lahf_lm",
    "__AVX512F__": "avx512f", "__AVX512CD__": "avx512cd", "__AVX512DQ__": "avx512dq", "__AVX512BW__": "avx512bw",
    "__AVX512VL__": "avx512vl", "__AVX512IFMA__": "avx512ifma", "__AVX512VBMI__": "avx512vbmi",
    "__AVX512VBMI2__": "avx512_vbmi2", "__AVX512VNNI__": "avx512_vnni", "__AVX512BITALG__": "avx512_bitalg",
    "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq", "__AVX512BF16__": "avx512_bf16", "__AVX512FP16__": "avx512_fp16",
    "__AVX512VP2INTERSECT__": "avx512_vp2intersect", "__AVXVNNI__": "avx_vnni", "__AVXIFMA__": "avx_ifma",
    "__AVXNECONVERT__": "avx_ne_convert", "__AVXVNNIINT8__": "avx_vnni_int8", "__AVXVNNIINT16__": "avx_vnni_int16",
}
# Macros of extensions whose instructions only intrinsics reach (AMX tiles, ...): not code features.
PREFIXES = ("__SSE", "__AVX", "__FMA", "__F16C", "__BMI", "__LZCNT", "__MOVBE", "__ADX", "__AES", "__PCLMUL",
            "__SHA__", "__VAES", "__VPCLMUL", "__GFNI", "__POPCNT", "__XOP", "__TBM", "__LAHF", "__CRC32")
CANDIDATES = ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "haswell", "broadwell", "skylake", "skylake-avx512",
              "icelake-server", "sapphirerapids", "alderlake", "znver2", "znver3", "znver4", "znver5"]
AVX2_NAMES = ["x86-64-v3", "haswell", "znver2", "znver3"]


# CPUID leaf 0x80000001, ECX: bits of the AMD extensions, by their cpuinfo flag. Some VMs leave
# these out of /proc/cpuinfo while the CPU (and CPUID) has them; the instruction is what counts.
EXTENDED_ECX_BITS = {"lahf_lm": 0, "abm": 5, "sse4a": 6, "xop": 11, "fma4": 16, "tbm": 21}
CPUID_PROBE = r"""
#include <cpuid.h>
#include <stdio.h>
int main(void) {
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000001, &a, &b, &c, &d))
    printf("%u\n", c);
  return 0;
}
"""


def cpuid_flags():
    """The extended flags CPUID reports, read by a probe compiled here."""
    import os
    import tempfile
    clang = shutil.which("clang-19") or shutil.which("cc")
    if not clang:
        return set()
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        with open(src, "w") as f:
            f.write(CPUID_PROBE)
        if subprocess.run([clang, src, "-o", exe], capture_output=True).returncode != 0:
            return set()
        out = subprocess.run([exe], capture_output=True, text=True).stdout.strip()
    ecx = int(out) if out.isdigit() else 0
    return {flag for flag, bit in EXTENDED_ECX_BITS.items() if ecx >> bit & 1}


def host_flags():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    return flags | cpuid_flags()


def implied_flags(cpu):
    """The cpuinfo flags of the code features `cpu` implies; None if clang does not know it."""
    clang = shutil.which("clang-19") or "/usr/bin/clang-19"
    r = subprocess.run([clang, "-march=" + cpu, "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    flags = set()
    for line in r.stdout.splitlines():
        macro = line.split()[1]
        if macro.endswith("_MATH__") or not macro.startswith(PREFIXES):
            continue
        flags.add(MACRO_FLAGS.get(macro, "unknown:" + macro))  # an unknown one counts as missing
    return flags


def runnable(cpu, have):
    need = implied_flags(cpu)
    return need is not None and need <= have, sorted((need or set()) - have)


def main():
    have = host_flags()
    if sys.argv[1] == "pick":
        for cpu in AVX2_NAMES:
            if runnable(cpu, have)[0]:
                print(cpu)
                return 0
        print("note: this host runs none of %s; the AVX2 tiling is checked as x86-64" % AVX2_NAMES, file=sys.stderr)
        print("x86-64")
        return 0
    gradc, model = sys.argv[2], sys.argv[3]
    # The name gradc itself detects for this host is a candidate too (`-v` logs the target).
    log = subprocess.run([gradc, "run", model, "-v"], capture_output=True, text=True).stderr
    detected = [line.split()[3].rstrip(",") for line in log.splitlines() if line.startswith("[target] cpu ")]
    failed = 0
    candidates = CANDIDATES + [c for c in detected if c not in CANDIDATES]
    for cpu in candidates:
        ok, missing = runnable(cpu, have)
        r = subprocess.run([gradc, "run", model, "--cpu=" + cpu], capture_output=True,
                           text=True)
        ran = r.returncode == 0
        refused = r.returncode == 2 and "whose CPU lacks what --cpu=" in r.stderr
        if (ok and ran) or (not ok and refused):
            print("PASS %s: %s" % (cpu, "runs" if ran else "refused, host lacks " + ", ".join(missing)))
        else:
            failed += 1
            print("FAIL %s: host %s it, gradc exit %d: %s" % (cpu, "has" if ok else "lacks " + ", ".join(missing),
                                                             r.returncode, r.stderr.strip()))
    print("detected: %s" % " ".join(detected))
    print("%d passed, %d failed" % (len(candidates) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
