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
