#!/usr/bin/env bash
# Checks kiln's reflection target against Khronos SPIRV-Cross's own `spirv-cross --reflect`
# on shaders nobody here wrote (the public Vulkan samples' `shaders/glsl`).
#
#   scripts/reflect_check.sh SHADER_DIR WORK_DIR [KILN]
#
# Every GLSL file of SHADER_DIR (HLSL under a directory named `hlsl`, as in
# scripts/corpus_build.sh) becomes a shader of one pass (entry point `main`, stage from the
# extension) of a project built by `kiln build` with `targets = [spirv, "reflection"]`: two
# projects, as scripts/corpus_build.sh makes them, WORK_DIR/raster (SPIR-V 1.0) and
# WORK_DIR/rt (SPIR-V 1.4: ray tracing, mesh and task). Then, for every variant with both
# outputs, `spirv-cross --reflect` reads the very `.spv` kiln wrote, and the two reflections
# are compared: entry point and stage, workgroup size (a dimension SPIRV-Cross gives as a
# specialization constant's id resolved to that constant's default), push-constant size
# (SPIRV-Cross's declared struct size, recomputed from its member offsets and strides),
# every binding (set, binding, kind, name, array size, readonly, and the type of images and
# samplers), every stage input and output (location, name, type with arrays).
#
# Prints counts: agree, disagree (each disagreement with its details), skipped (why: no
# SPIR-V from kiln, spirv-cross cannot read the module, kiln's reflection failed).
# KILN is the kiln binary (default: `cargo run --release -p kiln-cli --`); `spirv-cross`
# must be on PATH (Debian: `apt-get install spirv-cross`). Nothing is written outside
# WORK_DIR.
set -euo pipefail

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
    echo "usage: $0 SHADER_DIR WORK_DIR [KILN]" >&2
    exit 2
fi
command -v spirv-cross >/dev/null || {
    echo "spirv-cross is not on PATH (apt-get install spirv-cross)" >&2
    exit 2
}
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
    printf '[project]\ntargets = [{ name = "spirv", version = "%s" }, "reflection"]\n' \
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
import collections, json, subprocess, sys, tomllib

top = sys.argv[1]
STAGES = {
    "vert": "vertex", "frag": "fragment", "comp": "compute", "geom": "geometry",
    "tesc": "tess_control", "tese": "tess_evaluation", "task": "task", "mesh": "mesh",
    "rgen": "ray_generation", "rahit": "any_hit", "rchit": "closest_hit", "rmiss": "miss",
    "rint": "intersection", "rcall": "callable",
}
SCALAR_BYTES = {"float": 4, "int": 4, "uint": 4, "bool": 4, "double": 8, "half": 2,
                "float16_t": 2, "int64_t": 8, "uint64_t": 8, "int16_t": 2, "uint16_t": 2,
                "int8_t": 1, "uint8_t": 1}
VECTOR_PREFIX = {"": 4, "i": 4, "u": 4, "b": 4, "d": 8, "f16": 2, "i64": 8, "u64": 8,
                 "i16": 2, "u16": 2, "i8": 1, "u8": 1}


def spec_values(doc):
    """SPIRV-Cross's specialization constants: by SpecId and by SPIR-V id."""
    by_spec, by_id = {}, {}
    for c in doc.get("specialization_constants", []):
        by_spec[c["id"]] = c.get("default_value")
        by_id[c["variable_id"]] = c.get("default_value")
    return by_spec, by_id


def dims(item, by_id):
    """An item's array dimensions (SPIRV-Cross's order: innermost first), constants resolved."""
    out = []
    for size, literal in zip(item.get("array", []), item.get("array_size_is_literal", [])):
        out.append(size if literal else by_id.get(size, f"?{size}"))
    return out


def type_bytes(doc, name, member, by_id):
    """The declared size of a struct member, as SPIRV-Cross's get_declared_struct_member_size."""
    if member.get("physical_pointer"):
        # A buffer_reference member is a 64-bit address, whatever it points to.
        return 8
    array = dims(member, by_id)
    if array:
        count = 1
        for d in array:
            count *= d if isinstance(d, int) else 0
        return member.get("array_stride", 0) * count
    if name in doc.get("types", {}):
        return struct_bytes(doc, name, by_id)
    if name in SCALAR_BYTES:
        return SCALAR_BYTES[name]
    for prefix, scalar in VECTOR_PREFIX.items():
        for kind in ("vec", "mat"):
            if name.startswith(prefix + kind):
                rest = name[len(prefix + kind):]
                if kind == "vec":
                    return scalar * int(rest)
                columns, _, rows = rest.partition("x")
                rows = rows or columns
                stride = member.get("matrix_stride", 0)
                return stride * (int(rows) if member.get("row_major") else int(columns))
    return None


def struct_bytes(doc, type_id, by_id):
    members = doc["types"][type_id]["members"]
    if not members:
        return 0
    last = members[-1]
    size = type_bytes(doc, last["type"], last, by_id)
    return None if size is None else last.get("offset", 0) + size


def glsl_type(item, by_id, doc):
    text = item["type"]
    if text in doc.get("types", {}):
        text = doc["types"][text]["name"] or text
    for d in reversed(dims(item, by_id)):
        text += "[]" if d == 0 else f"[{d}]"
    return text


def product(values):
    n = 1
    for v in values:
        n *= v if isinstance(v, int) else 0
    return n


def theirs(doc):
    """SPIRV-Cross's reflection in kiln's terms."""
    by_spec, by_id = spec_values(doc)
    entry = doc["entryPoints"][0]
    out = {"entry_point": entry["name"], "stage": STAGES.get(entry["mode"], entry["mode"])}
    if "workgroup_size" in entry:
        size = entry["workgroup_size"]
        spec = entry.get("workgroup_size_is_spec_constant_id", [False] * 3)
        out["workgroup_size"] = [by_spec.get(v, f"?{v}") if s else v for v, s in zip(size, spec)]
    bindings = []
    for category, kind in [("ubos", "uniform_buffer"), ("ssbos", "storage_buffer"),
                           ("textures", "combined_image_sampler"),
                           ("separate_images", "sampled_image"), ("images", "storage_image"),
                           ("separate_samplers", "sampler"), ("subpass_inputs", "subpass_input"),
                           ("acceleration_structures", "acceleration_structure")]:
        for r in doc.get(category, []):
            k = kind
            if "Buffer" in r["type"] and category in ("textures", "separate_images"):
                k = "uniform_texel_buffer"
            if "Buffer" in r["type"] and category == "images":
                k = "storage_texel_buffer"
            b = {"set": r.get("set", 0), "binding": r.get("binding", 0), "kind": k,
                 "name": r["name"], "array_size": product(dims(r, by_id)) if "array" in r else 1}
            if k in ("storage_buffer", "storage_image", "storage_texel_buffer"):
                b["readonly"] = bool(r.get("readonly", False))
            if not r["type"].startswith("_"):
                # One opcode is both NV's and KHR's acceleration structure; SPIRV-Cross's
                # --reflect spells it the NV way unless a compile told it the module is KHR.
                b["type"] = r["type"].replace("accelerationStructureNV", "accelerationStructureEXT")
            bindings.append(b)
    out["bindings"] = sorted(bindings, key=lambda b: (b["set"], b["binding"], b["name"], b["kind"]))
    for push in doc.get("push_constants", []):
        out["push_constant_size"] = struct_bytes(doc, push["type"], by_id)
    for io in ("inputs", "outputs"):
        out[io] = sorted(({"location": v.get("location"), "name": v["name"],
                           "type": glsl_type(v, by_id, doc)} for v in doc.get(io, [])),
                         key=lambda v: (v["location"] is not None, v["location"] or 0, v["name"]))
    return out


def ours(doc):
    """kiln's reflection, restricted to what is compared (buffer types are struct names that
    SPIRV-Cross's --reflect gives as type ids)."""
    out = {k: doc[k] for k in ("entry_point", "stage")}
    if "workgroup_size" in doc:
        out["workgroup_size"] = doc["workgroup_size"]
    bindings = []
    for b in doc["bindings"]:
        b = dict(b)
        if b["kind"] in ("uniform_buffer", "storage_buffer"):
            b.pop("type")
        bindings.append(b)
    out["bindings"] = bindings
    if "push_constant_size" in doc:
        out["push_constant_size"] = doc["push_constant_size"]
    for io in ("inputs", "outputs"):
        out[io] = sorted(({"location": v.get("location"), "name": v["name"], "type": v["type"]}
                          for v in doc[io]),
                         key=lambda v: (v["location"] is not None, v["location"] or 0, v["name"]))
    return out


agree, disagree, explained, skipped = 0, [], [], collections.Counter()
compared = collections.Counter()
for group in ("raster", "rt"):
    manifest = tomllib.load(open(f"{top}/{group}/kiln.toml", "rb"))
    sources = {s["name"]: s["source"] for s in manifest.get("shader", [])}
    index = json.load(open(f"{top}/{group}/out/index.json"))
    outputs = collections.defaultdict(dict)
    for e in index["entries"]:
        outputs[(e["shader"], e["pass"])][e["target"]] = e["path"]
    failed = collections.defaultdict(dict)
    for f in index.get("failures", []):
        failed[(f["shader"], f["pass"])][f["target"]] = f["message"]
    for name in sorted(sources, key=lambda n: int(n[1:])):
        key = (name, "main")
        what = f"{group}/{sources[name]}"
        paths = outputs.get(key, {})
        if "spirv" not in paths:
            skipped["kiln wrote no SPIR-V (the shader does not compile)"] += 1
            continue
        spv = f"{top}/{group}/out/{paths['spirv']}"
        run = subprocess.run(["spirv-cross", spv, "--reflect", "--output", "/dev/stdout"],
                             capture_output=True, text=True)
        if "reflection" not in paths:
            message = failed.get(key, {}).get("reflection", "no output, no failure")
            if run.returncode != 0:
                skipped[f"neither reads the module; kiln: {' '.join(message.split())[:120]}"] += 1
            else:
                disagree.append((what, [f"kiln's reflection failed: {message}"]))
            continue
        if run.returncode != 0:
            first = (run.stderr.strip().splitlines() or ["?"])[0][:100]
            skipped[f"spirv-cross --reflect failed: {first}"] += 1
            continue
        mine = ours(json.load(open(f"{top}/{group}/out/{paths['reflection']}")))
        reference = theirs(json.loads(run.stdout))
        if mine == reference:
            agree += 1
            for field in ("bindings", "inputs", "outputs"):
                compared[field] += len(mine[field])
            compared["push-constant blocks"] += "push_constant_size" in mine
            compared["workgroup sizes"] += "workgroup_size" in mine
            continue
        if reference["stage"] == "???" and mine["stage"] in ("task", "mesh"):
            # This spirv-cross predates names for the EXT mesh and task models: it writes
            # `???` and no workgroup size. Everything else is compared.
            explained.append((what, f"spirv-cross names no {mine['stage']} stage (mode `???`) and gives no workgroup size; kiln: {mine['stage']}, {mine.get('workgroup_size')}"))
            rest = {k: v for k, v in mine.items() if k not in ("stage", "workgroup_size")}
            if rest == {k: v for k, v in reference.items() if k not in ("stage", "workgroup_size")}:
                continue

        details = []
        for field in sorted(set(mine) | set(reference)):
            a, b = mine.get(field), reference.get(field)
            if a == b:
                continue
            if isinstance(a, list) and isinstance(b, list):
                for item in a:
                    if item not in b:
                        details.append(f"{field}: kiln only {item}")
                for item in b:
                    if item not in a:
                        details.append(f"{field}: spirv-cross only {item}")
            else:
                details.append(f"{field}: kiln {a!r}, spirv-cross {b!r}")
        disagree.append((what, details))

kiln_failed = sum(1 for _, d in disagree if d and d[0].startswith("kiln's reflection failed"))
print(f"agree: {agree} ({', '.join(f'{n} {what}' for what, n in compared.items())} equal)")
print(f"agree but for what this spirv-cross cannot say: {len(explained)}")
for what, why in explained:
    print(f"  {what}: {why}")
print(f"disagree: {len(disagree)}" + (f" ({kiln_failed} of them kiln's reflection failing)" if kiln_failed else ""))
for what, details in disagree:
    print(f"  {what}")
    for d in details:
        print(f"    {d}")
print(f"skipped: {sum(skipped.values())}")
for reason, n in skipped.most_common():
    print(f"  {n:4}  {reason}")
EOF
