#!/usr/bin/env bash
# Builds a directory of Slang samples with `kiln build`, as scripts/slang_reference.py builds
# them with the Slang library alone: every `[shader("<stage>")]` entry point `<stage>Main` of
# every `.slang` file, column-major matrices, SPIR-V 1.4, for all five targets. Counts the
# outputs per target, validates every SPIR-V output with the vendored SPIRV-Tools, and lists
# why the rest failed.
#
#   scripts/slang_corpus.sh SHADER_DIR PROJECT_DIR [KILN]
#
# SHADER_DIR is copied into PROJECT_DIR/shaders (kiln reads sources only inside its project);
# the kiln.toml is generated. KILN is the kiln binary (default: `cargo run --release -p
# kiln-cli --`); VALIDATE_SPIRV the validator (default: `cargo run --release -p kiln --example
# validate_spirv --`). Needs the Slang library (pip install slangpy, or KILN_SLANG_LIBRARY).
set -euo pipefail

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
    echo "usage: $0 SHADER_DIR PROJECT_DIR [KILN]" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
mkdir -p "$2"
project=$(cd "$2" && pwd)
rm -rf "$project/shaders" "$project/out" "$project/.kiln"
cp -r "$src" "$project/shaders"
manifest="$project/kiln.toml"
printf '[project]\ntargets = [{ name = "spirv", version = "1.4" }, "msl", "hlsl", "glsl", "wgsl"]\n' >"$manifest"

# Slang's stage names, and kiln's.
declare -A stages=(
    [vertex]=vertex [fragment]=fragment [compute]=compute [geometry]=geometry
    [hull]=tess_control [domain]=tess_evaluation [mesh]=mesh [amplification]=task
    [raygeneration]=ray_generation [closesthit]=closest_hit [anyhit]=any_hit [miss]=miss
    [intersection]=intersection [callable]=callable
)
count=0
points=0
while IFS= read -r -d '' file; do
    rel=${file#"$project"/}
    passes=""
    for stage in vertex fragment raygeneration miss closesthit callable intersection anyhit \
        compute amplification mesh geometry hull domain; do
        if grep -qF "[shader(\"$stage\")]" "$file"; then
            passes+=$(printf '\n[shader.passes.%s]\nstage = "%s"\nentry = "%sMain"\n' \
                "$stage" "${stages[$stage]}" "$stage")
            points=$((points + 1))
        fi
    done
    [ -n "$passes" ] || continue
    count=$((count + 1))
    printf '\n[[shader]]\nname = "s%d"\nsource = "%s"\n\n[shader.slang]\nmatrix_layout = "column_major"\n%s\n' \
        "$count" "$rel" "$passes" >>"$manifest"
done < <(find "$project/shaders" -type f -name '*.slang' -print0 | sort -z)

status=0
if [ "$#" -eq 3 ]; then
    "$3" build --manifest "$manifest" >"$project/build.log" 2>&1 || status=$?
else
    cargo run -q --release -p kiln-cli -- build --manifest "$manifest" \
        >"$project/build.log" 2>&1 || status=$?
fi
echo "$count Slang files, $points entry points; kiln build exit status $status (log: $project/build.log)"
tail -n 1 "$project/build.log"

# Every SPIR-V output through the vendored SPIRV-Tools validator (Vulkan 1.2, SPIR-V 1.4).
find "$project/out" -name '*.spv' -print0 | sort -z | xargs -0 -r \
    ${VALIDATE_SPIRV:-cargo run -q --release -p kiln --example validate_spirv --} --target-env vulkan1.2 \
    || echo "some SPIR-V outputs were rejected"

python3 - "$project" <<'PY'
import collections, json, re, sys
top = sys.argv[1]
index = json.load(open(f"{top}/out/index.json"))
built = collections.Counter(e["target"] for e in index["entries"])
print("built per target:", " ".join(f"{t} {built[t]}" for t in ["spirv", "msl", "hlsl", "glsl", "wgsl"]))
reasons = collections.Counter()
for f in index.get("failures", []):
    message = " ".join(f["message"].split())
    message = re.sub(r"`[^`]*`|'[^']*'|%\d+|\d+", "_", message)[:110]
    reasons[(f["target"], message)] += 1
print("failures by reason:")
for (target, message), n in sorted(reasons.items(), key=lambda r: (r[0][0], -r[1])):
    print(f"  {target:5} {n:4}  {message}")
PY
