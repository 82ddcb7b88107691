//! The generated project as a model: a manifest, WGSL and GLSL sources, nested includes.
//! Edits change the model; `render` turns it into files (relative path -> text), and the
//! harness writes only the files that changed and removes those that disappeared.

use super::rng::Rng;
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const TARGETS: [&str; 5] = ["spirv", "msl", "hlsl", "glsl", "wgsl"];
/// The axes a shader may have; the code tests FOG, SKIN, Q_HIGH and DETAIL (EXTRA is only
/// a variant multiplier). No keyword is a substring of another.
pub const AXES: [[&str; 2]; 5] = [
    ["_", "FOG"],
    ["_", "SKIN"],
    ["Q_LOW", "Q_HIGH"],
    ["_", "DETAIL"],
    ["_", "EXTRA"],
];
/// Variants (keyword sets x passes) over all shaders: a clean build stays fast.
pub const MAX_VARIANTS: usize = 40;
const INCLUDE_DIRS: [&str; 5] = ["inc", "inc/more", "lib", "shaders/inc", "lib/deep/er"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lang {
    Wgsl,
    Frag,
    Comp,
}

impl Lang {
    pub fn is_glsl(self) -> bool {
        self != Lang::Wgsl
    }
    /// The (stage, entry) pairs a file of this language can serve.
    pub fn combos(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Lang::Wgsl => &[
                ("fragment", "fs_a"),
                ("fragment", "fs_b"),
                ("vertex", "vs_main"),
                ("compute", "cs_main"),
            ],
            Lang::Frag => &[("fragment", "main")],
            Lang::Comp => &[("compute", "main")],
        }
    }
    /// Constant slots the template uses outside `#ifdef FOG`.
    fn plain_slots(self) -> &'static [usize] {
        match self {
            Lang::Wgsl => &[0, 2, 3, 4, 5, 6, 7, 8],
            Lang::Frag => &[0, 2, 3, 4, 5],
            Lang::Comp => &[0, 3, 5],
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Injected {
    /// A syntax error every variant reading the file hits.
    Syntax,
    /// `#error` under `#ifdef FOG`: only FOG variants fail.
    FogError,
    /// Under `#ifdef FOG`, a GLSL function calling `inverse`, which naga's MSL and HLSL
    /// back ends do not implement: only FOG variants' MSL and HLSL pairs fail (if those are
    /// targets); their other targets are written (issue 11).
    FogTargetError,
}

/// Text that must not change any compiled output: whole-line comments, blank lines,
/// trailing whitespace, and the text of inline comments.
#[derive(Clone, Debug, Default)]
pub struct Noise {
    pub top: Vec<String>,
    pub body: Vec<String>,
    pub blanks: usize,
    pub trailing: usize,
    pub inline: u32,
}

#[derive(Clone, Debug)]
pub struct SrcFile {
    pub lang: Lang,
    pub k: [u32; 9],
    pub noise: Noise,
    pub error: Option<Injected>,
    /// Includes the extra include directly too (it is also reached through common when
    /// nested): `#pragma once` must keep it single.
    pub direct_extra: bool,
}

#[derive(Clone, Debug)]
pub struct IncFile {
    pub path: String,
    pub k: [u32; 3],
    pub noise: Noise,
    pub error: Option<Injected>,
}

/// The includes of one language: `common` (every source includes it) and an optional
/// `extra`, included by common (`nested`) and/or directly by sources.
#[derive(Clone, Debug)]
pub struct Incs {
    pub common: IncFile,
    pub extra: Option<IncFile>,
    pub nested: bool,
}

#[derive(Clone, Debug)]
pub struct Pass {
    pub name: String,
    pub stage: &'static str,
    pub entry: &'static str,
    pub source: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Shader {
    pub name: String,
    pub source: Option<String>,
    pub axes: Vec<[&'static str; 2]>,
    pub q: Option<u32>,
    pub passes: Vec<Pass>,
    /// The source files created with this shader (its passes may use any of them).
    pub files: Vec<String>,
    /// Its GLSL passes compile with glslang (drawn only when kiln links it), its WGSL
    /// passes with naga.
    pub glslang: bool,
}

impl Shader {
    pub fn keyword_sets(&self) -> usize {
        1 << self.axes.len()
    }
    pub fn variant_count(&self) -> usize {
        self.keyword_sets() * self.passes.len()
    }
    pub fn effective_source(&self, pass: &Pass) -> Option<String> {
        pass.source.clone().or_else(|| self.source.clone())
    }
    /// Variants whose keyword set contains FOG.
    pub fn fog_variants(&self) -> usize {
        if self.axes.iter().any(|a| a.contains(&"FOG")) {
            self.variant_count() / 2
        } else {
            0
        }
    }
}

#[derive(Clone, Debug)]
pub struct Model {
    pub targets: Vec<usize>,
    pub shaders: Vec<Shader>,
    pub srcs: BTreeMap<String, SrcFile>,
    pub wgsl: Incs,
    pub glsl: Incs,
    pub manifest_noise: Noise,
    pub next_id: usize,
}

fn konst(rng: &mut Rng) -> u32 {
    rng.range(1, 60) as u32
}

fn consts<const N: usize>(rng: &mut Rng) -> [u32; N] {
    std::array::from_fn(|_| konst(rng))
}

impl Model {
    pub fn generate(rng: &mut Rng) -> Model {
        let mut others = vec![1, 2, 3, 4];
        rng.shuffle(&mut others);
        let mut targets = vec![0];
        targets.extend(&others[..rng.range(1, 2)]);
        targets.sort();
        let incs = |rng: &mut Rng, ext: &str| Incs {
            common: IncFile {
                path: format!("inc/common.{ext}"),
                k: consts(rng),
                noise: Noise::default(),
                error: None,
            },
            extra: rng.chance(70).then(|| IncFile {
                path: format!("inc/more/extra.{ext}"),
                k: consts(rng),
                noise: Noise::default(),
                error: None,
            }),
            nested: rng.chance(50),
        };
        let mut model = Model {
            targets,
            shaders: Vec::new(),
            srcs: BTreeMap::new(),
            wgsl: incs(rng, "wgsl"),
            glsl: incs(rng, "glsl"),
            manifest_noise: Noise::default(),
            next_id: 0,
        };
        for _ in 0..rng.range(2, 3) {
            model.add_shader(rng);
        }
        assert!(!model.shaders.is_empty());
        model
    }

    pub fn variant_count(&self) -> usize {
        self.shaders.iter().map(Shader::variant_count).sum()
    }

    pub fn fog_variants(&self) -> usize {
        self.shaders.iter().map(Shader::fog_variants).sum()
    }

    fn new_src(&mut self, rng: &mut Rng, path: String, lang: Lang) {
        let direct_extra = rng.chance(30);
        self.srcs.insert(
            path,
            SrcFile {
                lang,
                k: consts(rng),
                noise: Noise::default(),
                error: None,
                direct_extra,
            },
        );
    }

    /// Adds a shader with fresh source files, if the variant budget allows one.
    pub fn add_shader(&mut self, rng: &mut Rng) -> Option<String> {
        let room = MAX_VARIANTS.saturating_sub(self.variant_count());
        if room < 4 {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        let name = format!("S{id}");
        let mut passes_n = rng.range(1, 2);
        let mut axes_n = rng.range(2, 4);
        while (1 << axes_n) * passes_n > room {
            if axes_n > 2 {
                axes_n -= 1;
            } else {
                passes_n = 1;
            }
        }
        let mut pool: Vec<[&'static str; 2]> = AXES.to_vec();
        rng.shuffle(&mut pool);
        // FOG is the most interesting axis: usually present.
        if rng.chance(80) {
            let fog = pool.iter().position(|a| a[1] == "FOG").unwrap();
            pool.swap(0, fog);
        }
        let axes: Vec<[&'static str; 2]> = pool[..axes_n].to_vec();
        let q = match rng.below(3) {
            0 => None,
            n => Some(n as u32),
        };
        // The first shader is usually WGSL (several entries a file), later ones often GLSL.
        let glsl = rng.chance(if self.shaders.is_empty() { 25 } else { 45 });
        let files: Vec<String> = if glsl {
            vec![
                format!("shaders/g{id}_a.frag"),
                format!("shaders/g{id}_b.frag"),
                format!("shaders/g{id}.comp"),
            ]
        } else {
            vec![
                format!("shaders/w{id}.wgsl"),
                format!("shaders/w{id}_alt.wgsl"),
            ]
        };
        for f in &files {
            let lang = lang_of(f);
            self.new_src(rng, f.clone(), lang);
        }
        let source = if glsl {
            rng.chance(50).then(|| files[0].clone())
        } else {
            Some(files[0].clone())
        };
        let mut passes = Vec::new();
        for p in 0..passes_n {
            let first = passes
                .first()
                .map(|p: &Pass| p.source.clone().or_else(|| source.clone()).unwrap());
            let file = if p > 0 && rng.chance(60) {
                // A second pass on another file: swapping the two keeps the shader's files.
                let others: Vec<&String> = files
                    .iter()
                    .filter(|f| Some(*f) != first.as_ref())
                    .collect();
                Some((*rng.pick(&others)).clone())
            } else if source.is_some() && rng.chance(60) {
                None
            } else {
                Some(rng.pick(&files).clone())
            };
            let eff = file.clone().or_else(|| source.clone()).unwrap();
            let (stage, entry) = *rng.pick(lang_of(&eff).combos());
            passes.push(Pass {
                name: format!("P{p}"),
                stage,
                entry,
                source: file,
            });
        }
        // Drawn only with glslang linked, so that a seed replays the same without it.
        let glslang = glsl && kiln::compile::glslang::AVAILABLE && rng.chance(50);
        self.shaders.push(Shader {
            name: name.clone(),
            source,
            axes,
            q,
            passes,
            files,
            glslang,
        });
        Some(name)
    }

    /// Every source file some pass reads.
    pub fn referenced_srcs(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .shaders
            .iter()
            .flat_map(|s| s.passes.iter().filter_map(|p| s.effective_source(p)))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn uses_lang(&self, glsl: bool) -> bool {
        self.referenced_srcs()
            .iter()
            .any(|p| self.srcs[p].lang.is_glsl() == glsl)
    }

    pub fn incs(&self, glsl: bool) -> &Incs {
        if glsl {
            &self.glsl
        } else {
            &self.wgsl
        }
    }

    pub fn incs_mut(&mut self, glsl: bool) -> &mut Incs {
        if glsl {
            &mut self.glsl
        } else {
            &mut self.wgsl
        }
    }

    /// Whether `src` sees the extra include (and so may use `K_E`).
    fn sees_extra(&self, src: &SrcFile) -> bool {
        let incs = self.incs(src.lang.is_glsl());
        incs.extra.is_some() && (incs.nested || src.direct_extra)
    }

    // ---------------------------------------------------------------- rendering

    pub fn render(&self) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        files.insert("kiln.toml".to_owned(), self.render_manifest());
        for (path, src) in &self.srcs {
            files.insert(path.clone(), self.render_src(path, src));
        }
        for glsl in [false, true] {
            let incs = self.incs(glsl);
            let extra_path = incs.extra.as_ref().map(|e| e.path.clone());
            files.insert(
                incs.common.path.clone(),
                render_common(
                    &incs.common,
                    glsl,
                    extra_path.as_deref().filter(|_| incs.nested),
                ),
            );
            if let Some(extra) = &incs.extra {
                files.insert(extra.path.clone(), render_extra(extra, glsl));
            }
        }
        files
    }

    fn render_manifest(&self) -> String {
        let mut s = String::new();
        for c in &self.manifest_noise.top {
            let _ = writeln!(s, "# {c}");
        }
        s.push_str("[project]\n");
        let targets: Vec<String> = self
            .targets
            .iter()
            .map(|t| format!("\"{}\"", TARGETS[*t]))
            .collect();
        let _ = writeln!(
            s,
            "targets = [{}]{}",
            targets.join(", "),
            " ".repeat(self.manifest_noise.trailing)
        );
        s.push_str(&"\n".repeat(self.manifest_noise.blanks));
        for shader in &self.shaders {
            let _ = writeln!(s, "\n[[shader]]\nname = \"{}\"", shader.name);
            // The model's GLSL is naga's subset, and the model predicts naga's results; a
            // shader drawn for glslang sets it on its GLSL passes (see `Shader::glslang`).
            let _ = writeln!(s, "compiler = \"naga\"");
            if let Some(src) = &shader.source {
                let _ = writeln!(s, "source = \"{src}\"");
            }
            let axes: Vec<String> = shader
                .axes
                .iter()
                .map(|a| format!("[\"{}\", \"{}\"]", a[0], a[1]))
                .collect();
            let _ = writeln!(s, "axes = [{}]", axes.join(", "));
            if let Some(q) = shader.q {
                let _ = writeln!(s, "defines = {{ Q = {q} }}");
            }
            for pass in &shader.passes {
                let _ = writeln!(
                    s,
                    "\n[shader.passes.{}]\nstage = \"{}\"\nentry = \"{}\"",
                    pass.name, pass.stage, pass.entry
                );
                if let Some(src) = &pass.source {
                    let _ = writeln!(s, "source = \"{src}\"");
                }
                let glsl = shader
                    .effective_source(pass)
                    .is_some_and(|src| lang_of(&src).is_glsl());
                if shader.glslang && glsl {
                    let _ = writeln!(s, "compiler = \"glslang\"");
                }
            }
        }
        s
    }

    fn render_src(&self, path: &str, src: &SrcFile) -> String {
        let glsl = src.lang.is_glsl();
        let incs = self.incs(glsl);
        let k = &src.k;
        let mut s = String::new();
        if glsl {
            s.push_str("#version 450\n");
        }
        let _ = writeln!(s, "// {path}: generated by kiln's differential fuzzer");
        push_comments(&mut s, &src.noise.top);
        let _ = writeln!(s, "#include \"{}\"", relative(path, &incs.common.path));
        if let (Some(extra), true) = (&incs.extra, src.direct_extra) {
            let _ = writeln!(s, "#include \"{}\"", relative(path, &extra.path));
        }
        push_error(&mut s, src.error, glsl);
        let sees_extra = self.sees_extra(src);
        let trailing = " ".repeat(src.noise.trailing);
        let inline = src.noise.inline;
        let (ty, decl) = if glsl {
            ("float", "const float")
        } else {
            ("f32", "const")
        };
        let c = |name: &str, v: u32| {
            if glsl {
                format!("{decl} {name} = {v}.0;\n")
            } else {
                format!("{decl} {name}: {ty} = {v}.0;\n")
            }
        };
        s.push_str(&c("L0", k[0]).replace(";\n", &format!(";{trailing}\n")));
        s.push_str("#ifdef FOG\n");
        s.push_str(&c("L_FOG", k[1]));
        if src.lang != Lang::Comp {
            s.push_str("#elif defined(SKIN)\n");
            s.push_str(&c("L_FOG", k[2]));
        }
        s.push_str("#else\n");
        s.push_str(&c("L_FOG", k[3]));
        s.push_str("#endif\n\n");
        let body_noise = |s: &mut String| {
            push_comments(s, &src.noise.body);
            s.push_str(&"\n".repeat(src.noise.blanks));
        };
        match src.lang {
            Lang::Wgsl => {
                s.push_str("@group(0) @binding(0) var<storage, read_write> buf: array<f32>;\n\n");
                s.push_str("@fragment\nfn fs_a() -> @location(0) vec4<f32> {\n");
                body_noise(&mut s);
                let _ = writeln!(s, "    var c = vec4<f32>(K_A * L0 /* inline {inline} */);");
                let _ = writeln!(s, "    c = c * L_FOG; // inline {inline}");
                let _ = writeln!(
                    s,
                    "#if defined(SKIN) && Q > 1\n    c = c + vec4<f32>({}.0);\n#endif",
                    k[4]
                );
                let _ = writeln!(s, "#ifdef Q_HIGH\n    c = c * {}.0;\n#endif", k[5]);
                if sees_extra {
                    s.push_str("    c = c + vec4<f32>(K_E);\n");
                }
                s.push_str("    return c;\n}\n\n");
                let _ = writeln!(
                    s,
                    "@fragment\nfn fs_b() -> @location(0) vec4<f32> {{\n    return vec4<f32>(K_B * {}.0);\n}}\n",
                    k[6]
                );
                let _ = writeln!(
                    s,
                    "@vertex\nfn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {{\n    return vec4<f32>(f32(i) * K_A, {}.0, 0.0, 1.0);\n}}\n",
                    k[7]
                );
                let _ = writeln!(
                    s,
                    "@compute @workgroup_size(1)\nfn cs_main() {{\n    buf[0] = K_B * {}.0;\n}}",
                    k[8]
                );
            }
            Lang::Frag => {
                s.push_str("layout(location = 0) out vec4 o_color;\n\nvoid main() {\n");
                body_noise(&mut s);
                let _ = writeln!(s, "    vec4 c = vec4(K_A * L0 /* inline {inline} */);");
                let _ = writeln!(s, "    c = c * L_FOG; // inline {inline}");
                let _ = writeln!(
                    s,
                    "#if defined(SKIN) && Q > 1\n    c = c + vec4({}.0);\n#endif",
                    k[4]
                );
                let _ = writeln!(s, "#ifdef Q_HIGH\n    c = c * {}.0;\n#endif", k[5]);
                if sees_extra {
                    s.push_str("    c = c + vec4(K_E);\n");
                }
                s.push_str("    o_color = c * K_B;\n}\n");
            }
            Lang::Comp => {
                s.push_str("layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;\n");
                s.push_str("layout(std430, set = 0, binding = 0) buffer Buf { float data[]; };\n\nvoid main() {\n");
                body_noise(&mut s);
                let _ = writeln!(s, "    float c = K_A * L0 * L_FOG; // inline {inline}");
                let _ = writeln!(s, "#ifdef Q_HIGH\n    c = c * {}.0;\n#endif", k[5]);
                if sees_extra {
                    s.push_str("    c = c + K_E;\n");
                }
                s.push_str("    data[0] = c * K_B;\n}\n");
            }
        }
        s
    }

    // ---------------------------------------------------------------- model edits
    // Each returns a description, or None when it does not apply to this model.

    /// Every (file, slot) of a constant: `fog` selects those under `#ifdef FOG` only.
    pub fn edit_const(&mut self, rng: &mut Rng, fog: bool) -> Option<String> {
        let mut choices: Vec<(String, usize)> = Vec::new();
        for (path, src) in &self.srcs {
            if fog {
                choices.push((path.clone(), 1));
            } else {
                for slot in src.lang.plain_slots() {
                    choices.push((path.clone(), *slot));
                }
            }
        }
        for glsl in [false, true] {
            let incs = self.incs(glsl);
            if fog {
                choices.push((incs.common.path.clone(), 1));
            } else {
                choices.push((incs.common.path.clone(), 0));
                choices.push((incs.common.path.clone(), 2));
                if let Some(extra) = &incs.extra {
                    choices.push((extra.path.clone(), 0));
                    choices.push((extra.path.clone(), 1));
                }
            }
        }
        // Prefer files the build reads.
        let read = self.read_files();
        let preferred: Vec<(String, usize)> = choices
            .iter()
            .filter(|(p, _)| read.contains(p))
            .cloned()
            .collect();
        let (path, slot) = if !preferred.is_empty() && rng.chance(85) {
            rng.pick(&preferred).clone()
        } else {
            rng.pick(&choices).clone()
        };
        let delta = rng.range(1, 5) as u32;
        let value = self.const_slot(&path, slot)?;
        *value += delta;
        Some(format!("{path}: constant slot {slot} += {delta}"))
    }

    fn const_slot(&mut self, path: &str, slot: usize) -> Option<&mut u32> {
        if self.srcs.contains_key(path) {
            return self.srcs.get_mut(path).unwrap().k.get_mut(slot);
        }
        for incs in [&mut self.wgsl, &mut self.glsl] {
            if incs.common.path == path {
                return incs.common.k.get_mut(slot);
            }
            if let Some(extra) = incs.extra.as_mut().filter(|e| e.path == path) {
                return extra.k.get_mut(slot);
            }
        }
        None
    }

    /// Files the build reads (referenced sources and the includes they reach).
    pub fn read_files(&self) -> Vec<String> {
        let mut out = self.referenced_srcs();
        for glsl in [false, true] {
            let srcs: Vec<&SrcFile> = out
                .iter()
                .filter_map(|p| self.srcs.get(p))
                .filter(|s| s.lang.is_glsl() == glsl)
                .collect();
            if srcs.is_empty() {
                continue;
            }
            let incs = self.incs(glsl);
            let extra_read =
                incs.extra.is_some() && (incs.nested || srcs.iter().any(|s| s.direct_extra));
            out.push(incs.common.path.clone());
            if extra_read {
                out.push(incs.extra.as_ref().unwrap().path.clone());
            }
        }
        out.push("kiln.toml".to_owned());
        out
    }

    fn noise_of(&mut self, path: &str) -> Option<&mut Noise> {
        if path == "kiln.toml" {
            return Some(&mut self.manifest_noise);
        }
        if self.srcs.contains_key(path) {
            return Some(&mut self.srcs.get_mut(path).unwrap().noise);
        }
        for incs in [&mut self.wgsl, &mut self.glsl] {
            if incs.common.path == path {
                return Some(&mut incs.common.noise);
            }
            if let Some(extra) = incs.extra.as_mut().filter(|e| e.path == path) {
                return Some(&mut extra.noise);
            }
        }
        None
    }

    fn pick_noise_file(&self, rng: &mut Rng) -> String {
        let read = self.read_files();
        rng.pick(&read).clone()
    }

    /// Adds or removes a whole-line or block comment, or edits an inline comment's text.
    pub fn edit_comment(&mut self, rng: &mut Rng) -> Option<String> {
        let path = self.pick_noise_file(rng);
        let manifest = path == "kiln.toml";
        let is_src = self.srcs.contains_key(&path);
        let n = rng.next_u64() % 10_000;
        let noise = self.noise_of(&path)?;
        let op = rng.below(4);
        if op == 0 && is_src {
            noise.inline += 1;
            return Some(format!("{path}: inline comment text changed"));
        }
        let removable = noise.top.len() + noise.body.len();
        if op == 1 && removable > 0 {
            let i = rng.below(removable);
            if i < noise.top.len() {
                noise.top.remove(i);
            } else {
                noise.body.remove(i - noise.top.len());
            }
            return Some(format!("{path}: comment removed"));
        }
        let text = if manifest {
            format!("comment {n}")
        } else if rng.chance(50) {
            format!("// comment {n}")
        } else {
            format!("/* block comment {n}\n   spanning #ifdef FOG lines */")
        };
        let body = is_src && rng.chance(50);
        if body {
            noise.body.push(text);
        } else {
            noise.top.push(text);
        }
        Some(format!(
            "{path}: comment added ({})",
            if body {
                "in a function body"
            } else {
                "at the top"
            }
        ))
    }

    /// Adds or removes blank lines or trailing whitespace.
    pub fn edit_whitespace(&mut self, rng: &mut Rng) -> Option<String> {
        let path = self.pick_noise_file(rng);
        let is_src = self.srcs.contains_key(&path) || path == "kiln.toml";
        let noise = self.noise_of(&path)?;
        if is_src && rng.chance(50) {
            noise.trailing = if noise.trailing > 0 {
                0
            } else {
                rng.range(1, 4)
            };
            return Some(format!("{path}: trailing whitespace -> {}", noise.trailing));
        }
        noise.blanks = if noise.blanks > 0 && rng.chance(50) {
            noise.blanks - 1
        } else {
            noise.blanks + rng.range(1, 3)
        };
        Some(format!("{path}: blank lines -> {}", noise.blanks))
    }

    /// Includes: the extra include created or deleted, nested or not, included directly by a
    /// source or not.
    pub fn edit_include_toggle(&mut self, rng: &mut Rng) -> Option<String> {
        let glsl = rng.chance(50) && self.uses_lang(true) || !self.uses_lang(false);
        let lang = if glsl { "glsl" } else { "wgsl" };
        let srcs: Vec<String> = self
            .srcs
            .iter()
            .filter(|(_, s)| s.lang.is_glsl() == glsl)
            .map(|(p, _)| p.clone())
            .collect();
        let id = self.next_id;
        self.next_id += 1;
        let k = consts(rng);
        let dir = *rng.pick(&INCLUDE_DIRS);
        let op = rng.below(3);
        let incs = self.incs_mut(glsl);
        if incs.extra.is_none() {
            incs.extra = Some(IncFile {
                path: format!("{dir}/extra{id}.{lang}"),
                k,
                noise: Noise::default(),
                error: None,
            });
            incs.nested = rng.chance(60);
            return Some(format!(
                "{lang} extra include added at {dir}/extra{id}.{lang} (nested: {})",
                incs.nested
            ));
        }
        match op {
            0 => {
                let old = incs.extra.take().unwrap();
                Some(format!("{lang} extra include {} removed", old.path))
            }
            1 => {
                incs.nested = !incs.nested;
                Some(format!("{lang} common includes extra: {}", incs.nested))
            }
            _ => {
                if srcs.is_empty() {
                    return None;
                }
                let path = rng.pick(&srcs).clone();
                let src = self.srcs.get_mut(&path).unwrap();
                src.direct_extra = !src.direct_extra;
                Some(format!(
                    "{path} includes extra directly: {}",
                    src.direct_extra
                ))
            }
        }
    }

    fn pick_include(&mut self, rng: &mut Rng) -> &mut IncFile {
        let glsl = rng.chance(50);
        let extra = rng.chance(50);
        let incs = self.incs_mut(glsl);
        match (&mut incs.extra, extra) {
            (Some(e), true) => e,
            _ => &mut incs.common,
        }
    }

    pub fn edit_include_rename(&mut self, rng: &mut Rng) -> Option<String> {
        let id = self.next_id;
        self.next_id += 1;
        let inc = self.pick_include(rng);
        let old = inc.path.clone();
        let (dir, name) = old.rsplit_once('/').unwrap();
        let (stem, ext) = name.rsplit_once('.').unwrap();
        let stem = stem.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_');
        inc.path = format!("{dir}/{stem}_{id}.{ext}");
        Some(format!("include {old} renamed to {}", inc.path))
    }

    pub fn edit_include_move(&mut self, rng: &mut Rng) -> Option<String> {
        let dir = *rng.pick(&INCLUDE_DIRS);
        let inc = self.pick_include(rng);
        let old = inc.path.clone();
        let (old_dir, name) = old.rsplit_once('/').unwrap();
        if old_dir == dir {
            return None;
        }
        inc.path = format!("{dir}/{name}");
        Some(format!("include {old} moved to {}", inc.path))
    }

    pub fn edit_axes(&mut self, rng: &mut Rng) -> Option<String> {
        let room = MAX_VARIANTS - self.variant_count();
        let i = rng.below(self.shaders.len());
        let shader = &mut self.shaders[i];
        let name = shader.name.clone();
        let unused: Vec<[&'static str; 2]> = AXES
            .iter()
            .filter(|a| !shader.axes.contains(a))
            .copied()
            .collect();
        match rng.below(5) {
            0 if shader.axes.len() < 4 && shader.variant_count() <= room && !unused.is_empty() => {
                let axis = *rng.pick(&unused);
                let at = rng.below(shader.axes.len() + 1);
                shader.axes.insert(at, axis);
                Some(format!("{name}: axis {axis:?} added"))
            }
            1 if shader.axes.len() > 2 => {
                let axis = shader.axes.remove(rng.below(shader.axes.len()));
                Some(format!("{name}: axis {axis:?} removed"))
            }
            2 if !unused.is_empty() => {
                let at = rng.below(shader.axes.len());
                let axis = *rng.pick(&unused);
                let old = std::mem::replace(&mut shader.axes[at], axis);
                Some(format!("{name}: axis {old:?} replaced by {axis:?}"))
            }
            3 => {
                let a = rng.below(shader.axes.len());
                let b = rng.below(shader.axes.len());
                if a == b {
                    return None;
                }
                shader.axes.swap(a, b);
                Some(format!(
                    "{name}: axes {a} and {b} reordered (no output change)"
                ))
            }
            4 => {
                let a = rng.below(shader.axes.len());
                shader.axes[a].swap(0, 1);
                Some(format!(
                    "{name}: keywords of axis {a} reordered (no output change)"
                ))
            }
            _ => None,
        }
    }

    pub fn edit_shader_add(&mut self, rng: &mut Rng) -> Option<String> {
        let name = self.add_shader(rng)?;
        Some(format!("shader {name} added"))
    }

    pub fn edit_shader_remove(&mut self, rng: &mut Rng) -> Option<String> {
        if self.shaders.len() < 2 {
            return None;
        }
        let removed = self.shaders.remove(rng.below(self.shaders.len()));
        let delete_files = rng.chance(50);
        if delete_files {
            let still: Vec<String> = self.referenced_srcs();
            for f in &removed.files {
                if !still.contains(f) && !self.shaders.iter().any(|s| s.files.contains(f)) {
                    self.srcs.remove(f);
                }
            }
        }
        Some(format!(
            "shader {} removed (files deleted: {delete_files})",
            removed.name
        ))
    }

    fn all_passes(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (s, shader) in self.shaders.iter().enumerate() {
            for p in 0..shader.passes.len() {
                out.push((s, p));
            }
        }
        out
    }

    fn lang_of_pass(&self, s: usize, p: usize) -> Lang {
        let shader = &self.shaders[s];
        self.srcs[&shader.effective_source(&shader.passes[p]).unwrap()].lang
    }

    /// Switches a WGSL fragment pass between its two fragment entries.
    pub fn edit_pass_entry(&mut self, rng: &mut Rng) -> Option<String> {
        let candidates: Vec<(usize, usize)> = self
            .all_passes()
            .into_iter()
            .filter(|&(s, p)| {
                self.lang_of_pass(s, p) == Lang::Wgsl
                    && self.shaders[s].passes[p].stage == "fragment"
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let (s, p) = *rng.pick(&candidates);
        let shader = &mut self.shaders[s];
        let pass = &mut shader.passes[p];
        pass.entry = if pass.entry == "fs_a" { "fs_b" } else { "fs_a" };
        Some(format!(
            "{}/{}: entry -> {}",
            shader.name, pass.name, pass.entry
        ))
    }

    /// Switches a pass to another stage (and the entry or GLSL file that serves it).
    pub fn edit_pass_stage(&mut self, rng: &mut Rng) -> Option<String> {
        let (s, p) = *rng.pick(&self.all_passes());
        let lang = self.lang_of_pass(s, p);
        let shader = &self.shaders[s];
        let stage = shader.passes[p].stage;
        let (new_stage, entry, source) = if lang == Lang::Wgsl {
            let combos: Vec<_> = lang
                .combos()
                .iter()
                .filter(|(st, _)| *st != stage)
                .collect();
            let (st, e) = **rng.pick(&combos);
            (st, e, shader.passes[p].source.clone())
        } else {
            let want = if lang == Lang::Frag {
                Lang::Comp
            } else {
                Lang::Frag
            };
            let files: Vec<&String> = shader
                .files
                .iter()
                .filter(|f| self.srcs.get(*f).is_some_and(|x| x.lang == want))
                .collect();
            if files.is_empty() {
                return None;
            }
            let f = (*rng.pick(&files)).clone();
            (want.combos()[0].0, "main", Some(f))
        };
        let shader = &mut self.shaders[s];
        let pass = &mut shader.passes[p];
        pass.stage = new_stage;
        pass.entry = entry;
        pass.source = source;
        Some(format!(
            "{}/{}: stage {stage} -> {new_stage}, entry {entry}, source {:?}",
            shader.name, pass.name, pass.source
        ))
    }

    /// Points a pass at another source file that serves its stage and entry.
    pub fn edit_pass_source(&mut self, rng: &mut Rng) -> Option<String> {
        let (s, p) = *rng.pick(&self.all_passes());
        let shader = &self.shaders[s];
        let pass = &shader.passes[p];
        let current = shader.effective_source(pass);
        let serves = |f: &String| {
            self.srcs[f]
                .lang
                .combos()
                .contains(&(pass.stage, pass.entry))
        };
        if pass.source.is_some() && shader.source.as_ref().is_some_and(serves) && rng.chance(30) {
            let shader = &mut self.shaders[s];
            shader.passes[p].source = None;
            return Some(format!(
                "{}/{}: source removed (the shader's {:?} now)",
                shader.name, shader.passes[p].name, shader.source
            ));
        }
        let files: Vec<&String> = self
            .srcs
            .keys()
            .filter(|f| Some(*f) != current.as_ref() && serves(f))
            .collect();
        if files.is_empty() {
            return None;
        }
        let f = (*rng.pick(&files)).clone();
        let shader = &mut self.shaders[s];
        shader.passes[p].source = Some(f.clone());
        Some(format!(
            "{}/{}: source {current:?} -> {f}",
            shader.name, shader.passes[p].name
        ))
    }

    /// Swaps the sources of two passes that can serve each other's stage and entry.
    pub fn edit_pass_swap(&mut self, rng: &mut Rng) -> Option<String> {
        let passes = self.all_passes();
        let mut pairs = Vec::new();
        for (i, &(s1, p1)) in passes.iter().enumerate() {
            for &(s2, p2) in &passes[i + 1..] {
                let a = &self.shaders[s1];
                let b = &self.shaders[s2];
                let (pa, pb) = (&a.passes[p1], &b.passes[p2]);
                let (fa, fb) = (
                    a.effective_source(pa).unwrap(),
                    b.effective_source(pb).unwrap(),
                );
                if fa != fb
                    && self.srcs[&fb].lang.combos().contains(&(pa.stage, pa.entry))
                    && self.srcs[&fa].lang.combos().contains(&(pb.stage, pb.entry))
                {
                    pairs.push(((s1, p1, fa), (s2, p2, fb)));
                }
            }
        }
        if pairs.is_empty() {
            return None;
        }
        // Within one shader the set of files it reads stays the same: the harder case.
        let same: Vec<_> = pairs
            .iter()
            .filter(|((s1, _, _), (s2, _, _))| s1 == s2)
            .cloned()
            .collect();
        let ((s1, p1, fa), (s2, p2, fb)) = if !same.is_empty() && rng.chance(70) {
            rng.pick(&same).clone()
        } else {
            rng.pick(&pairs).clone()
        };
        self.shaders[s1].passes[p1].source = Some(fb.clone());
        self.shaders[s2].passes[p2].source = Some(fa.clone());
        Some(format!(
            "sources swapped: {}/{} now reads {fb}, {}/{} now reads {fa}",
            self.shaders[s1].name,
            self.shaders[s1].passes[p1].name,
            self.shaders[s2].name,
            self.shaders[s2].passes[p2].name
        ))
    }

    pub fn edit_targets(&mut self, rng: &mut Rng) -> Option<String> {
        let t = rng.range(1, TARGETS.len() - 1);
        if let Some(at) = self.targets.iter().position(|x| *x == t) {
            if self.targets.len() <= 2 {
                return None;
            }
            self.targets.remove(at);
            Some(format!("target {} removed", TARGETS[t]))
        } else {
            if self.targets.len() >= 4 {
                return None;
            }
            self.targets.push(t);
            self.targets.sort();
            Some(format!("target {} added", TARGETS[t]))
        }
    }

    pub fn edit_defines(&mut self, rng: &mut Rng) -> Option<String> {
        let i = rng.below(self.shaders.len());
        let shader = &mut self.shaders[i];
        let old = shader.q;
        shader.q = match old {
            None => Some(rng.range(1, 2) as u32),
            Some(1) => Some(2),
            Some(_) => {
                if rng.chance(50) {
                    Some(1)
                } else {
                    None
                }
            }
        };
        Some(format!(
            "{}: defines Q {old:?} -> {:?}",
            shader.name, shader.q
        ))
    }

    /// Injects an error into a file the build reads (fixed by `fix_errors`).
    pub fn edit_error(&mut self, rng: &mut Rng) -> Option<String> {
        let read: Vec<String> = self
            .read_files()
            .into_iter()
            .filter(|p| p != "kiln.toml")
            .collect();
        let path = rng.pick(&read).clone();
        let kind = if rng.chance(50) {
            Injected::Syntax
        } else if !path.ends_with(".wgsl") && rng.chance(50) {
            Injected::FogTargetError
        } else {
            Injected::FogError
        };
        let slot = if self.srcs.contains_key(&path) {
            &mut self.srcs.get_mut(&path).unwrap().error
        } else {
            let mut found = None;
            for incs in [&mut self.wgsl, &mut self.glsl] {
                if incs.common.path == path {
                    found = Some(&mut incs.common.error);
                } else if let Some(e) = incs.extra.as_mut().filter(|e| e.path == path) {
                    found = Some(&mut e.error);
                }
            }
            found?
        };
        *slot = Some(kind);
        Some(format!("{path}: error injected ({kind:?})"))
    }

    pub fn has_errors(&self) -> bool {
        self.srcs.values().any(|s| s.error.is_some())
            || [&self.wgsl, &self.glsl].iter().any(|i| {
                i.common.error.is_some() || i.extra.as_ref().is_some_and(|e| e.error.is_some())
            })
    }

    pub fn fix_errors(&mut self) -> String {
        for src in self.srcs.values_mut() {
            src.error = None;
        }
        for incs in [&mut self.wgsl, &mut self.glsl] {
            incs.common.error = None;
            if let Some(e) = &mut incs.extra {
                e.error = None;
            }
        }
        "injected errors fixed".to_owned()
    }
}

pub fn lang_of(path: &str) -> Lang {
    if path.ends_with(".wgsl") {
        Lang::Wgsl
    } else if path.ends_with(".frag") {
        Lang::Frag
    } else {
        Lang::Comp
    }
}

fn push_comments(s: &mut String, comments: &[String]) {
    for c in comments {
        s.push_str(c);
        s.push('\n');
    }
}

fn push_error(s: &mut String, error: Option<Injected>, glsl: bool) {
    match error {
        None => {}
        Some(Injected::Syntax) if glsl => s.push_str("const float BROKEN = ;\n"),
        Some(Injected::Syntax) => s.push_str("const BROKEN: f32 = ;\n"),
        Some(Injected::FogError) => {
            s.push_str("#ifdef FOG\n#error injected by the differential fuzzer\n#endif\n")
        }
        // Only GLSL files get it (see `edit_error`); WGSL has no `inverse`.
        Some(Injected::FogTargetError) => s.push_str(
            "#ifdef FOG\nfloat fuzz_inverse(mat2 m) { return inverse(m)[0][0]; }\n#endif\n",
        ),
    }
}

fn render_common(inc: &IncFile, glsl: bool, extra: Option<&str>) -> String {
    let mut s = String::from("#pragma once\n");
    let _ = writeln!(s, "// {}: shared constants", inc.path);
    push_comments(&mut s, &inc.noise.top);
    push_comments(&mut s, &inc.noise.body);
    s.push_str(&"\n".repeat(inc.noise.blanks));
    push_error(&mut s, inc.error, glsl);
    let c = |name: &str, v: u32| {
        if glsl {
            format!("const float {name} = {v}.0;\n")
        } else {
            format!("const {name}: f32 = {v}.0;\n")
        }
    };
    s.push_str(&c("K_A", inc.k[0]));
    s.push_str("#ifdef FOG\n");
    s.push_str(&c("K_B", inc.k[1]));
    s.push_str("#else\n");
    s.push_str(&c("K_B", inc.k[2]));
    s.push_str("#endif\n");
    if let Some(extra) = extra {
        let _ = writeln!(s, "#include \"{}\"", relative(&inc.path, extra));
    }
    s
}

fn render_extra(inc: &IncFile, glsl: bool) -> String {
    let mut s = String::from("#pragma once\n");
    let _ = writeln!(s, "// {}: the extra include", inc.path);
    push_comments(&mut s, &inc.noise.top);
    push_comments(&mut s, &inc.noise.body);
    s.push_str(&"\n".repeat(inc.noise.blanks));
    push_error(&mut s, inc.error, glsl);
    let c = |name: &str, v: u32| {
        if glsl {
            format!("const float {name} = {v}.0;\n")
        } else {
            format!("const {name}: f32 = {v}.0;\n")
        }
    };
    s.push_str("#if defined(DETAIL)\n");
    s.push_str(&c("K_E", inc.k[0]));
    s.push_str("#else\n");
    s.push_str(&c("K_E", inc.k[1]));
    s.push_str("#endif\n");
    s
}

/// The path of `to` relative to the directory of `from` (both relative to the root).
pub fn relative(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = from
        .rsplit_once('/')
        .map(|(dir, _)| dir.split('/').collect())
        .unwrap_or_default();
    let to_parts: Vec<&str> = to.split('/').collect();
    let common = from_dir
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count()
        .min(to_parts.len() - 1);
    let mut parts: Vec<&str> = vec![".."; from_dir.len() - common];
    parts.extend(&to_parts[common..]);
    parts.join("/")
}
