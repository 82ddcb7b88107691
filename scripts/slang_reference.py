#!/usr/bin/env python3
"""The Slang library called directly on a directory of Slang samples, as the reference kiln's
Slang builds are counted against: every `[shader("<stage>")]` entry point `<stage>Main` of
every `.slang` file, compiled with the options the public Vulkan samples' own script gives
slangc (`-profile spirv_1_4 -matrix-layout-column-major -warnings-disable 39001`), once per
target. Each compile runs in a forked child of a process holding a warm global session, so a
crash in Slang (its Metal back end segfaults on some ray-tracing entry points) costs that
compile alone and is counted as a crash.

    scripts/slang_reference.py SHADER_DIR [LIBRARY]

LIBRARY is libslang-compiler.so (default: $KILN_SLANG_LIBRARY, else python's slangpy
package). Prints one line per target: built, failed, crashed, of the entry points found.
"""
import ctypes
import glob
import os
import sys

STAGES = ["vertex", "fragment", "raygeneration", "miss", "closesthit", "callable",
          "intersection", "anyhit", "compute", "amplification", "mesh", "geometry", "hull",
          "domain"]
# kiln's target names, and slangc's.
TARGETS = {"spirv": "spirv", "msl": "metal", "hlsl": "hlsl", "glsl": "glsl", "wgsl": "wgsl"}


def library_path():
    if len(sys.argv) > 2:
        return sys.argv[2]
    if os.environ.get("KILN_SLANG_LIBRARY"):
        return os.environ["KILN_SLANG_LIBRARY"]
    import importlib.util
    spec = importlib.util.find_spec("slangpy")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no Slang library: pip install slangpy, or pass its path")
    found = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "libslang-compiler.so*")))
    if not found:
        sys.exit("slangpy has no libslang-compiler.so")
    return found[0]


def entry_points(root):
    for path in sorted(glob.glob(os.path.join(root, "**", "*.slang"), recursive=True)):
        text = open(path, encoding="utf-8", errors="replace").read()
        for stage in STAGES:
            if f'[shader("{stage}")]' in text:
                yield path, stage


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    lib = ctypes.CDLL(library_path())
    lib.spCreateSession.restype = ctypes.c_void_p
    lib.spCreateSession.argtypes = [ctypes.c_char_p]
    lib.spCreateCompileRequest.restype = ctypes.c_void_p
    lib.spCreateCompileRequest.argtypes = [ctypes.c_void_p]
    lib.spProcessCommandLineArguments.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]
    lib.spCompile.argtypes = [ctypes.c_void_p]
    lib.spGetEntryPointCode.restype = ctypes.c_void_p
    lib.spGetEntryPointCode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
    lib.spGetCompileRequestCode.restype = ctypes.c_void_p
    lib.spGetCompileRequestCode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    session = lib.spCreateSession(None)
    points = list(entry_points(root))
    counts = {t: {"built": 0, "failed": 0, "crashed": 0} for t in TARGETS}
    for target, slang_target in TARGETS.items():
        for path, stage in points:
            caps = ["-capability", "spvDescriptorHeapEXT"] if "descriptorheapuntyped" in path else []
            args = [path, "-profile", "spirv_1_4", "-matrix-layout-column-major", "-target", slang_target,
                    "-entry", f"{stage}Main", "-stage", stage, "-warnings-disable", "39001"] + caps
            pid = os.fork()
            if pid == 0:
                request = lib.spCreateCompileRequest(session)
                argv = (ctypes.c_char_p * len(args))(*[a.encode() for a in args])
                ok = lib.spProcessCommandLineArguments(request, argv, len(args)) >= 0
                ok = ok and lib.spCompile(request) >= 0
                # Text targets answer per entry point; SPIR-V is written for the whole request.
                size = ctypes.c_size_t(0)
                code = ok and (lib.spGetEntryPointCode(request, 0, ctypes.byref(size))
                               or lib.spGetCompileRequestCode(request, ctypes.byref(size)))
                ok = bool(code) and size.value > 0
                os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                counts[target]["crashed"] += 1
            elif os.WEXITSTATUS(status) == 0:
                counts[target]["built"] += 1
            else:
                counts[target]["failed"] += 1
    print(f"slang reference: {len(points)} entry points in {root}")
    for target in TARGETS:
        c = counts[target]
        print(f"  {target:5} built {c['built']:4}  failed {c['failed']:4}  crashed {c['crashed']:3}")


if __name__ == "__main__":
    main()
