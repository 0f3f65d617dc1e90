# lit configuration of the compiler tests: RUN lines call `g4c` and `FileCheck`.
import os
import lit.formats

config.name = "g4c-compiler"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PATH"] = os.pathsep.join([config.g4c_bin_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("%tiny_model", os.path.join(config.g4c_source_dir, "models", "gemma4-tiny")))
