#!/usr/bin/env python3
"""Checks the dependency direction of DESIGN.md §1 on the sources and the build.

1. Source includes: runtime/ and models/ never include MLIR/LLVM headers; passes/
   and frontend/ and ir/ never include runtime/ headers (codegen may include only
   the generated plan schema, runtime/plan/*_generated.h); models/ includes nothing
   of the other layers.
2. Build: compile_commands.json compiles no runtime/ or models/ file with an MLIR
   or LLVM include path, so a stray include could not even compile.
"""
import json, os, re, sys

src, build = sys.argv[1], sys.argv[2]
inc_re = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
errors = []

def sources(folder):
    for root, _, files in os.walk(os.path.join(src, folder)):
        for f in files:
            if f.endswith(('.h', '.hpp', '.cpp', '.cc', '.cu', '.cuh', '.inc')):
                yield os.path.join(root, f)

def check(folder, forbidden, allowed=()):
    for path in sources(folder):
        text = open(path, encoding='utf-8', errors='replace').read()
        for inc in inc_re.findall(text):
            if any(inc.startswith(a) for a in allowed):
                continue
            for bad in forbidden:
                if inc.startswith(bad):
                    errors.append(f"{os.path.relpath(path, src)} includes {inc} ({folder}/ must not depend on {bad})")

mlir = ("mlir/", "llvm/", "llvm-c/", "ir/", "passes/", "frontend/", "codegen/")
check("runtime", mlir)
check("models", mlir + ("runtime/", "tools/"))
check("ir", ("runtime/", "passes/", "frontend/", "codegen/", "tools/"))
check("frontend", ("runtime/", "passes/", "codegen/", "tools/"))
check("passes", ("runtime/", "codegen/", "tools/"))
check("codegen", ("passes/", "tools/", "runtime/"), allowed=("runtime/plan/",))

db_path = os.path.join(build, "compile_commands.json")
db = json.load(open(db_path))
checked = 0
for entry in db:
    f = os.path.relpath(entry["file"], src)
    if f.startswith(("runtime/", "models/")):
        checked += 1
        cmd = entry.get("command") or " ".join(entry.get("arguments", []))
        if re.search(r"(-I|-isystem)\s*\S*(llvm-22/include|/mlir/include|/include/mlir)", cmd):
            errors.append(f"{f} is compiled with an MLIR/LLVM include path")
if checked == 0:
    errors.append("no runtime/ or models/ file found in compile_commands.json")

for e in errors:
    print("LAYERING:", e)
print(f"checked {checked} runtime/models compile commands; {len(errors)} violations")
sys.exit(1 if errors else 0)
