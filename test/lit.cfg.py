import os
import lit.formats
from lit.llvm import llvm_config

config.name = "pipec"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pipec_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.pipec_tools_dir, append_path=True)

# OpenBLAS's core type for the tests (pipec's runtime and the PyTorch
# references both run OpenBLAS), as bench/train_step.py names it: where the
# environment names none, the vector kernels the CPU has. Debian's OpenBLAS
# 0.3.21 does not know newer CPUs (the Xeon of family 6 model 207) and falls
# back to its SSE3 Prescott kernels, whose float32 sums round differently
# (no FMA) from every other host's: the references' float32 error (the
# torchvision checks' slack) then measured that host's OpenBLAS, not
# PyTorch. A core type the environment names is left to OpenBLAS as before
# (DESIGN.md: there, others compute wrong results).
if not os.environ.get("OPENBLAS_CORETYPE"):
    try:
        with open("/proc/cpuinfo") as f:
            cpu_flags = set(next((l.split(":", 1)[1].split() for l in f
                                  if l.startswith("flags")), []))
    except OSError:
        cpu_flags = set()
    core = ("SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= cpu_flags
            else "Haswell" if {"avx2", "fma"} <= cpu_flags else None)
    if core:
        config.environment["OPENBLAS_CORETYPE"] = core

# Whether this host's OpenBLAS, left to itself, falls back to its Prescott
# kernels (pipe-run then names a core type for the ranks): asked of
# OpenBLAS itself, as pipe-run does.
def _openblas_falls_back():
    import subprocess
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env["OPENBLAS_NUM_THREADS"] = "1"
    probe = ("import ctypes; f = ctypes.CDLL('libopenblas.so.0').openblas_get_corename; "
             "f.restype = ctypes.c_char_p; print(f().decode())")
    try:
        name = subprocess.run(["/usr/bin/python3", "-c", probe], env=env, text=True,
                              capture_output=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return name.lower() == "prescott" if name else None


_fallback = _openblas_falls_back()
if _fallback is not None:
    config.available_features.add("openblas-fallback" if _fallback else "openblas-knows-cpu")

config.substitutions.append(("%torchpy", config.python_ref))
config.substitutions.append(("%pipec_src", config.pipec_src_root))
config.substitutions.append(("%onnx_testdata", config.onnx_testdata))
config.substitutions.append(
    ("%pipec_plugin", os.path.join(config.pipec_obj_root, "lib", "libPipecPlugin.so")))
config.substitutions.append(
    ("%malloc_count", os.path.join(config.pipec_obj_root, "test", "libpipec_malloc_count.so")))
config.substitutions.append(
    ("%stock_mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))

if getattr(config, "pipec_cuda_backend", False):
    config.available_features.add("cuda-backend")
