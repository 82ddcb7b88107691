#!/usr/bin/env bash
# Builds a directory of GLSL and HLSL shaders nobody here wrote with `kiln build`, every file a
# shader of one pass (entry point `main`, stage from the extension), for all five targets, and
# counts the outputs per language and target and why the rest fail.
#
#   scripts/corpus_build.sh SHADER_DIR PROJECT_DIR [KILN]
#
# SHADER_DIR is copied into each project (kiln reads sources only inside its project);
# each kiln.toml is generated; KILN is the kiln binary (default: `cargo run --release
# -p kiln-cli --`). As in scripts/cross_corpus.sh, a directory named
# `hlsl` anywhere in a path marks HLSL (said by `language = "hlsl"`: no file is renamed).
# Two projects, as scripts/cross_corpus.sh uses two environments: PROJECT_DIR/raster
# (SPIR-V 1.0, Vulkan 1.0: vertex to compute) and PROJECT_DIR/rt (SPIR-V 1.4, Vulkan 1.2: ray tracing, mesh and task, which need it).
# Nothing is written outside PROJECT_DIR.
set -euo pipefail

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
    echo "usage: $0 SHADER_DIR PROJECT_DIR [KILN]" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
mkdir -p "$2"
top=$(cd "$2" && pwd)

for group in raster rt; do
    project="$top/$group"
    rm -rf "$project"
    mkdir -p "$project"
    cp -r "$src" "$project/shaders"
    manifest="$project/kiln.toml"
    spirv=1.0
    [ "$group" = rt ] && spirv=1.4
    printf '[project]\ntargets = [{ name = "spirv", version = "%s" }, "msl", "hlsl", "glsl", "wgsl"]\n' \
        "$spirv" >"$manifest"
    count=0
    while IFS= read -r -d '' file; do
        rel=${file#"$project"/}
        case "${file##*.}" in
            vert) stage=vertex ;; frag) stage=fragment ;; comp) stage=compute ;;
            geom) stage=geometry ;; tesc) stage=tess_control ;; tese) stage=tess_evaluation ;;
            mesh) stage=mesh ;; task) stage=task ;;
            rgen) stage=ray_generation ;; rchit) stage=closest_hit ;; rahit) stage=any_hit ;;
            rmiss) stage=miss ;; rint) stage=intersection ;; rcall) stage=callable ;;
            *) continue ;;
        esac
        case "$stage" in
            mesh | task | ray_generation | closest_hit | any_hit | miss | intersection | callable)
                [ "$group" = rt ] || continue ;;
            *) [ "$group" = raster ] || continue ;;
        esac
        language=glsl
        # HLSL named by stage (`mesh.vert`), as the public Vulkan samples name it: the
        # manifest says its language, no file is renamed.
        [[ "/$rel" == */hlsl/* ]] && language=hlsl
        count=$((count + 1))
        printf '\n[[shader]]\nname = "s%d"\nsource = "%s"\nlanguage = "%s"\n\n[shader.passes.main]\nstage = "%s"\nentry = "main"\n' \
            "$count" "$rel" "$language" "$stage" >>"$manifest"
    done < <(find "$project/shaders" -type f -print0 | sort -z)
    status=0
    if [ "$#" -eq 3 ]; then
        "$3" build --manifest "$manifest" >"$project/build.log" 2>&1 || status=$?
    else
        cargo run -q --release -p kiln-cli -- build --manifest "$manifest" \
            >"$project/build.log" 2>&1 || status=$?
    fi
    echo "$group: $count shaders, kiln build exit status $status (log: $project/build.log)"
done

python3 - "$top" <<'EOF'
import collections, json, re, sys, tomllib
top = sys.argv[1]
language, entries, failures = {}, [], []
for group in ("raster", "rt"):
    manifest = tomllib.load(open(f"{top}/{group}/kiln.toml", "rb"))
    for s in manifest.get("shader", []):
        language[(group, s["name"])] = s["language"]
    index = json.load(open(f"{top}/{group}/out/index.json"))
    entries += [(group, e) for e in index["entries"]]
    failures += [(group, f) for f in index.get("failures", [])]
built = collections.Counter((language[(g, e["shader"])], e["target"]) for g, e in entries)
totals = collections.Counter(language.values())
targets = ["spirv", "msl", "hlsl", "glsl", "wgsl"]
print("built per target, of", dict(totals))
print("language " + " ".join(f"{t:>6}" for t in targets))
for lang in ("glsl", "hlsl"):
    print(f"{lang:8} " + " ".join(f"{built[(lang, t)]:>6}" for t in targets))
# Why: the first words of each message, numbers and names stripped, per language and target.
reasons = collections.Counter()
for g, f in failures:
    message = " ".join(f["message"].split())
    message = re.sub(r"`[^`]*`|'[^']*'|%\d+|\d+", "_", message)[:110]
    reasons[(language[(g, f["shader"])], f["target"], message)] += 1
print("failures by reason:")
for (lang, target, message), n in sorted(reasons.items(), key=lambda r: (r[0][0], r[0][1], -r[1])):
    print(f"  {lang} {target:5} {n:4}  {message}")
EOF
