# lit configuration for Daybreak's regression tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "DAYBREAK"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.daybreak_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "fixtures",
                   "Inputs", "corpus", "regressions"]

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
# `not` and `count` are found on PATH (Debian keeps them in llvm_tools_dir).
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
# The tests' --target=cuda compiles share one cache of NVRTC's and ptxas's
# output in the build tree (most compile the same fixtures' shapes) and
# leave the user's alone.
config.environment["DAYBREAK_CACHE_DIR"] = os.path.join(
    config.daybreak_obj_root, "test", "cache")

tool_dirs = [config.daybreak_tools_dir, config.llvm_tools_dir]
tools = ["daybreak-opt", "daybreak-eval", "daybreak-compile", "daybreak-run"]
# The fuzz targets (test/fuzz), which replay the files they are given.
tools += [name + "Fuzzer" for name in ["Safetensors", "SafetensorsIndex", "HfConfig", "Artifact",
                                       "InputsJson", "RunOptions", "CompileOptions"]]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# The runtime's step tests (GoogleTest), run on artifacts lit compiles.
config.substitutions.append(("%daybreak_step_tests", config.daybreak_step_tests))
config.substitutions.append(("%daybreak_session_tests", config.daybreak_session_tests))
config.substitutions.append(("%daybreak_obj_root", config.daybreak_obj_root))

# PTX the compiler emits is assembled with ptxas where the toolkit has one.
if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))

# CUDA artifacts need the kernel library nvcc built with the project.
if config.cuda_kernels == "ON":
    config.available_features.add("cuda-kernels")

# The compiler specialises the CUDA library kernels with NVRTC.
if config.nvrtc == "ON":
    config.available_features.add("nvrtc")
