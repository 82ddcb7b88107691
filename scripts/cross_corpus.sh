#!/usr/bin/env bash
# Compiles a directory of GLSL and HLSL shaders to SPIR-V with the reference front ends, for
# `cargo run -p kiln --example cross_coverage`, which measures how many of
# them each SPIR-V translator turns into MSL, HLSL, GLSL and WGSL.
#
#   scripts/cross_corpus.sh SHADER_DIR OUT_DIR
#
# GLSL (`*.vert *.frag *.comp *.geom *.tesc *.tese *.mesh *.task *.r*`) goes through `glslc`;
# a directory named `hlsl` anywhere in a path marks HLSL, which goes through
# `glslangValidator -V -D -e main`. Each output is OUT_DIR/<glsl|hlsl>/<path>.spv; files the
# front end rejects are listed in OUT_DIR/<glsl|hlsl>/front-end-failures.txt with the first
# line of the compiler's error. Stages run for Vulkan 1.0 (ray tracing and mesh shading, and a
# file that fails for 1.0, for Vulkan 1.2). Nothing is written outside OUT_DIR.
set -euo pipefail

if [ "$#" -ne 2 ]; then
    echo "usage: $0 SHADER_DIR OUT_DIR" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
out=$2
mkdir -p "$out/glsl" "$out/hlsl"
out=$(cd "$out" && pwd)
: >"$out/glsl/front-end-failures.txt"
: >"$out/hlsl/front-end-failures.txt"

glsl_ok=0 glsl_all=0 hlsl_ok=0 hlsl_all=0
while IFS= read -r -d '' file; do
    rel=${file#"$src"/}
    ext=${file##*.}
    case "$ext" in
        vert) stage=vert ;; frag) stage=frag ;; comp) stage=comp ;;
        geom) stage=geom ;; tesc) stage=tesc ;; tese) stage=tese ;;
        mesh) stage=mesh ;; task) stage=task ;;
        rgen) stage=rgen ;; rchit) stage=rchit ;; rahit) stage=rahit ;;
        rmiss) stage=rmiss ;; rint) stage=rint ;; rcall) stage=rcall ;;
        *) continue ;;
    esac
    # Ray tracing and mesh shading need SPIR-V 1.4 or later.
    env=vulkan1.0
    case "$stage" in r* | mesh | task) env=vulkan1.2 ;; esac
    if [[ "/$rel" == */hlsl/* ]]; then
        lang=hlsl
        hlsl_all=$((hlsl_all + 1))
    else
        lang=glsl
        glsl_all=$((glsl_all + 1))
    fi
    spv="$out/$lang/${rel#"$lang"/}.spv"
    mkdir -p "$(dirname "$spv")"
    compile() {
        if [ "$lang" = hlsl ]; then
            glslangValidator -V -D -e main -S "$stage" --target-env "$1" -o "$spv" "$file"
        else
            (cd "$(dirname "$file")" && glslc -fshader-stage="$stage" --target-env="$1" \
                -o "$spv" "$file")
        fi
    }
    # A shader that needs a later SPIR-V (ray queries in a fragment shader) gets a second try.
    log=$(compile "$env" 2>&1) && status=0 || status=$?
    if [ "$status" -ne 0 ] && [ "$env" = vulkan1.0 ]; then
        log=$(compile vulkan1.2 2>&1) && status=0 || status=$?
    fi
    if [ "$status" -eq 0 ] && [ -s "$spv" ]; then
        if [ "$lang" = hlsl ]; then hlsl_ok=$((hlsl_ok + 1)); else glsl_ok=$((glsl_ok + 1)); fi
    else
        rm -f "$spv"
        first=$(printf '%s\n' "$log" | grep -m1 -i 'error' || printf '%s\n' "$log" | head -n1)
        printf '%s\t%s\n' "$rel" "$first" >>"$out/$lang/front-end-failures.txt"
    fi
done < <(find "$src" -type f -print0 | sort -z)

echo "glslc: $glsl_ok of $glsl_all GLSL files to SPIR-V"
echo "glslangValidator: $hlsl_ok of $hlsl_all HLSL files to SPIR-V"
