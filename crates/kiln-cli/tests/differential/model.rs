//! The generated project as a model: a manifest, WGSL and GLSL sources, nested includes,
//! and (with the Slang library) Slang sources importing modules found through the shaders'
//! `include_dirs`. Edits change the model; `render` turns it into files (relative path ->
//! text), and the harness writes only the files that changed and removes those that
//! disappeared.

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
/// Where Slang modules may live (`SlangModels::dirs`, every Slang shader's `include_dirs`, is
/// drawn from these). `SLANG_SRC_DIR`, the importing files' own directory, comes first on
/// Slang's search path whatever `include_dirs` says.
pub const SLANG_DIRS: [&str; 4] = ["mods", "mods/more", "lib/slang", "shaders/mods"];
pub const SLANG_SRC_DIR: &str = "shaders";
/// The modules Slang sources import, and the prefix of the functions each one exports
/// (`commonA()`, `commonB()`, ...). `common_k` is always imported, `detail_k` by some
/// sources, `fog_k` by some under `#ifdef FOG` only.
pub const SLANG_MODULES: [(&str, &str); 3] = [
    ("common_k", "common"),
    ("detail_k", "detail"),
    ("fog_k", "fog"),
];

/// Whether Slang shaders are drawn: the Slang compiler library is there. Without it no
/// random number is spent on Slang, so that a seed replays as it did before Slang.
pub fn slang_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| kiln::compile::slang::version().is_ok())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lang {
    Wgsl,
    Frag,
    Comp,
    Slang,
}

impl Lang {
    pub fn is_glsl(self) -> bool {
        matches!(self, Lang::Frag | Lang::Comp)
    }
    /// Which `#include` family (`Model::incs`) a source of this language includes: GLSL's
    /// (true), WGSL's (false), or none (Slang imports modules instead).
    pub fn inc_family(self) -> Option<bool> {
        (self != Lang::Slang).then_some(self.is_glsl())
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
            // Entry names no other language has: no pass edit points a WGSL or GLSL pass at
            // a Slang file or back.
            Lang::Slang => &[
                ("fragment", "fragMain"),
                ("vertex", "vertMain"),
                ("compute", "compMain"),
            ],
        }
    }
    /// Constant slots the template uses outside `#ifdef FOG`.
    fn plain_slots(self) -> &'static [usize] {
        match self {
            Lang::Wgsl => &[0, 2, 3, 4, 5, 6, 7, 8],
            Lang::Frag => &[0, 2, 3, 4, 5],
            Lang::Comp => &[0, 3, 5],
            Lang::Slang => &[0, 2, 3, 4, 5, 7, 8],
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
    /// Slang: imports `detail_k` too.
    pub import_detail: bool,
    /// Slang: imports `fog_k` under `#ifdef FOG`.
    pub import_fog: bool,
}

/// A Slang module file: `module NAME;` and two functions, one of them under `#ifdef FOG`.
#[derive(Clone, Debug)]
pub struct SlangModule {
    /// Index into `SLANG_MODULES`.
    pub which: usize,
    pub dir: String,
    /// The file is spelled with `-` for `_` (`common-k.slang` for `import common_k;`).
    pub hyphen: bool,
    pub k: [u32; 3],
    pub noise: Noise,
    pub error: Option<Injected>,
}

impl SlangModule {
    pub fn path(&self) -> String {
        slang_module_path(&self.dir, self.which, self.hyphen)
    }
}

pub fn slang_module_path(dir: &str, which: usize, hyphen: bool) -> String {
    let name = SLANG_MODULES[which].0;
    let file = if hyphen {
        name.replace('_', "-")
    } else {
        name.to_owned()
    };
    format!("{dir}/{file}.slang")
}

/// The Slang side of the project. `modules` holds one file per module; `shadows` are more
/// files of the same modules, usually earlier on the search path, with other constants.
#[derive(Clone, Debug, Default)]
pub struct SlangModels {
    pub modules: Vec<SlangModule>,
    pub shadows: Vec<SlangModule>,
    /// Every Slang shader's `include_dirs`, in order.
    pub dirs: Vec<String>,
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
    /// A Slang shader (drawn only when the Slang library is there): its files are Slang,
    /// it lists `SlangModels::dirs` as `include_dirs`.
    pub slang: bool,
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
    /// `[output] layout = "both"`: a pack per target beside the loose outputs, compared with
    /// the clean build's byte for byte like every other file.
    pub packs: bool,
    pub shaders: Vec<Shader>,
    pub srcs: BTreeMap<String, SrcFile>,
    pub wgsl: Incs,
    pub glsl: Incs,
    pub slang: SlangModels,
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
        let packs = rng.chance(50);
        let mut model = Model {
            targets,
            packs,
            shaders: Vec::new(),
            srcs: BTreeMap::new(),
            wgsl: incs(rng, "wgsl"),
            glsl: incs(rng, "glsl"),
            slang: SlangModels::default(),
            manifest_noise: Noise::default(),
            next_id: 0,
        };
        if slang_available() {
            let mut pool = SLANG_DIRS.map(str::to_owned).to_vec();
            rng.shuffle(&mut pool);
            pool.truncate(rng.range(2, 3));
            for which in 0..SLANG_MODULES.len() {
                let module = SlangModule {
                    which,
                    dir: rng.pick(&pool).clone(),
                    hyphen: rng.chance(60),
                    k: consts(rng),
                    noise: Noise::default(),
                    error: None,
                };
                model.slang.modules.push(module);
            }
            model.slang.dirs = pool;
        }
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
        let (import_detail, import_fog) = if lang == Lang::Slang {
            (rng.chance(50), rng.chance(40))
        } else {
            (false, false)
        };
        self.srcs.insert(
            path,
            SrcFile {
                lang,
                k: consts(rng),
                noise: Noise::default(),
                error: None,
                direct_extra,
                import_detail,
                import_fog,
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
        // Of the others, most are Slang: drawn only with the Slang library, so that a seed
        // replays the same without it (and GLSL is drawn as often as before Slang).
        let slang = !glsl && slang_available() && rng.chance(60);
        let files: Vec<String> = if slang {
            vec![
                format!("{SLANG_SRC_DIR}/s{id}.slang"),
                format!("{SLANG_SRC_DIR}/s{id}_alt.slang"),
            ]
        } else if glsl {
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
            slang,
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
            .any(|p| self.srcs[p].lang.inc_family() == Some(glsl))
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
        let Some(glsl) = src.lang.inc_family() else {
            return false;
        };
        let incs = self.incs(glsl);
        incs.extra.is_some() && (incs.nested || src.direct_extra)
    }

    /// The modules a Slang source imports (indices into `SLANG_MODULES`).
    fn slang_imports(src: &SrcFile) -> Vec<usize> {
        let mut out = vec![0];
        if src.import_detail {
            out.push(1);
        }
        if src.import_fog {
            out.push(2);
        }
        out
    }

    /// Every Slang module file: the modules, then the shadows.
    fn slang_files(&self) -> impl Iterator<Item = &SlangModule> {
        self.slang.modules.iter().chain(&self.slang.shadows)
    }

    fn slang_file_mut(&mut self, path: &str) -> Option<&mut SlangModule> {
        self.slang
            .modules
            .iter_mut()
            .chain(self.slang.shadows.iter_mut())
            .find(|m| m.path() == path)
    }

    /// Slang's search path for an import in a source: the source's own directory, then
    /// `include_dirs` in order.
    pub fn slang_search(&self) -> Vec<String> {
        let mut out = vec![SLANG_SRC_DIR.to_owned()];
        out.extend(self.slang.dirs.iter().cloned());
        out
    }

    /// The file `import NAME;` finds from a source, as Slang 2026.12 searches (and kiln's
    /// closure lists): each directory in turn, the written spelling before the one with `-`.
    pub fn slang_resolve(&self, which: usize) -> Option<&SlangModule> {
        for dir in self.slang_search() {
            for hyphen in [false, true] {
                let path = slang_module_path(&dir, which, hyphen);
                if let Some(m) = self
                    .slang_files()
                    .find(|m| m.which == which && m.path() == path)
                {
                    return Some(m);
                }
            }
        }
        None
    }

    /// The modules that the Slang sources some pass reads import.
    fn slang_imported(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .referenced_srcs()
            .iter()
            .map(|p| &self.srcs[p])
            .filter(|s| s.lang == Lang::Slang)
            .flat_map(Model::slang_imports)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Imported modules that no file on the search path serves: their importers fail (the
    /// FOG variants only, for `fog_k`; the model just expects failures).
    fn slang_unresolved(&self) -> Vec<usize> {
        self.slang_imported()
            .into_iter()
            .filter(|w| self.slang_resolve(*w).is_none())
            .collect()
    }

    // ---------------------------------------------------------------- rendering

    pub fn render(&self) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        files.insert("kiln.toml".to_owned(), self.render_manifest());
        for (path, src) in &self.srcs {
            files.insert(path.clone(), self.render_src(path, src));
        }
        for module in self.slang_files() {
            files.insert(module.path(), render_slang_module(module));
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
        if self.packs {
            s.push_str("\n[output]\nlayout = \"both\"\n");
        }
        for shader in &self.shaders {
            let _ = writeln!(s, "\n[[shader]]\nname = \"{}\"", shader.name);
            // The model's GLSL is naga's subset, and the model predicts naga's results; a
            // shader drawn for glslang sets it on its GLSL passes (see `Shader::glslang`).
            if shader.slang {
                // Slang's default compiler; the modules are found through these.
                let dirs: Vec<String> =
                    self.slang.dirs.iter().map(|d| format!("\"{d}\"")).collect();
                let _ = writeln!(s, "include_dirs = [{}]", dirs.join(", "));
            } else {
                let _ = writeln!(s, "compiler = \"naga\"");
            }
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
        if src.lang == Lang::Slang {
            return render_slang_src(path, src);
        }
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
            Lang::Slang => unreachable!("rendered by render_slang_src"),
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
        for module in self.slang_files() {
            if fog {
                choices.push((module.path(), 1));
            } else {
                choices.push((module.path(), 0));
                choices.push((module.path(), 2));
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
        if path.ends_with(".slang") {
            return self.slang_file_mut(path)?.k.get_mut(slot);
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
                .filter(|s| s.lang.inc_family() == Some(glsl))
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
        // Every file of an imported module: the one Slang finds, and shadows it does not
        // reach (kiln tracks the whole search).
        let imported = self.slang_imported();
        out.extend(
            self.slang_files()
                .filter(|m| imported.contains(&m.which))
                .map(SlangModule::path),
        );
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
        if path.ends_with(".slang") {
            return Some(&mut self.slang_file_mut(path)?.noise);
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
            .filter(|(_, s)| s.lang.inc_family() == Some(glsl))
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
        let (new_stage, entry, source) = if matches!(lang, Lang::Wgsl | Lang::Slang) {
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
        if rng.chance(30) {
            self.packs = !self.packs;
            return Some(format!("packs {}", if self.packs { "on" } else { "off" }));
        }
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
        } else if !path.ends_with(".wgsl") && !path.ends_with(".slang") && rng.chance(50) {
            Injected::FogTargetError
        } else {
            Injected::FogError
        };
        let slot = if self.srcs.contains_key(&path) {
            &mut self.srcs.get_mut(&path).unwrap().error
        } else if path.ends_with(".slang") {
            &mut self.slang_file_mut(&path)?.error
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

    /// Whether the model expects failures: an injected error, or an import no file serves.
    pub fn has_errors(&self) -> bool {
        self.srcs.values().any(|s| s.error.is_some())
            || self.slang_files().any(|m| m.error.is_some())
            || !self.slang_unresolved().is_empty()
            || [&self.wgsl, &self.glsl].iter().any(|i| {
                i.common.error.is_some() || i.extra.as_ref().is_some_and(|e| e.error.is_some())
            })
    }

    /// Removes the injected errors, and adds the directory of each module no import finds
    /// to `include_dirs` (at the end).
    pub fn fix_errors(&mut self) -> String {
        let mut added = Vec::new();
        for which in self.slang_unresolved() {
            let dir = self
                .slang
                .modules
                .iter()
                .find(|m| m.which == which)
                .unwrap()
                .dir
                .clone();
            if !self.slang.dirs.contains(&dir) {
                self.slang.dirs.push(dir.clone());
                added.push(dir);
            }
        }
        for m in self
            .slang
            .modules
            .iter_mut()
            .chain(self.slang.shadows.iter_mut())
        {
            m.error = None;
        }
        for src in self.srcs.values_mut() {
            src.error = None;
        }
        for incs in [&mut self.wgsl, &mut self.glsl] {
            incs.common.error = None;
            if let Some(e) = &mut incs.extra {
                e.error = None;
            }
        }
        if added.is_empty() {
            "injected errors fixed".to_owned()
        } else {
            format!("include_dirs += {added:?}, injected errors fixed")
        }
    }

    // ---------------------------------------------------------------- Slang edits

    pub fn has_slang_shader(&self) -> bool {
        self.shaders.iter().any(|s| s.slang)
    }

    /// A constant of an imported module changed (usually in the file Slang finds).
    pub fn edit_slang_const(&mut self, rng: &mut Rng) -> Option<String> {
        let imported = self.slang_imported();
        if imported.is_empty() {
            return None;
        }
        let which = *rng.pick(&imported);
        let path = match self.slang_resolve(which) {
            Some(m) if rng.chance(80) => m.path(),
            _ => {
                let files: Vec<String> = self
                    .slang_files()
                    .filter(|m| m.which == which)
                    .map(SlangModule::path)
                    .collect();
                rng.pick(&files).clone()
            }
        };
        let slot = rng.below(3);
        let delta = rng.range(1, 5) as u32;
        *self.const_slot(&path, slot)? += delta;
        Some(format!(
            "{path} ({}): constant slot {slot} += {delta}",
            SLANG_MODULES[which].0
        ))
    }

    /// A file of an imported module added earlier on the search path than the one Slang
    /// finds now (in the sources' directory, an earlier include directory, or the same one
    /// with the written spelling), with other constants; or such a file removed.
    pub fn edit_slang_shadow(&mut self, rng: &mut Rng) -> Option<String> {
        if !self.slang.shadows.is_empty() && rng.chance(50) {
            let removed = self
                .slang
                .shadows
                .remove(rng.below(self.slang.shadows.len()));
            return Some(format!("shadowing module file {} removed", removed.path()));
        }
        let imported = self.slang_imported();
        if imported.is_empty() {
            return None;
        }
        let which = *rng.pick(&imported);
        let found = self.slang_resolve(which)?;
        let (found_path, found_dir, found_hyphen) = (found.path(), found.dir.clone(), found.hyphen);
        let search = self.slang_search();
        let at = search.iter().position(|d| *d == found_dir).unwrap();
        let mut spots: Vec<(String, bool)> = Vec::new();
        for dir in &search[..at] {
            spots.push((dir.clone(), false));
            spots.push((dir.clone(), true));
        }
        if found_hyphen {
            spots.push((found_dir, false));
        }
        let taken: Vec<String> = self.slang_files().map(SlangModule::path).collect();
        spots.retain(|(d, h)| !taken.contains(&slang_module_path(d, which, *h)));
        if spots.is_empty() {
            return None;
        }
        let (dir, hyphen) = rng.pick(&spots).clone();
        let shadow = SlangModule {
            which,
            dir,
            hyphen,
            k: consts(rng),
            noise: Noise::default(),
            error: None,
        };
        let desc = format!(
            "shadowing module file {} added (import {} found {found_path} before)",
            shadow.path(),
            SLANG_MODULES[which].0
        );
        self.slang.shadows.push(shadow);
        Some(desc)
    }

    /// A module moved to another directory (sometimes renamed between `_` and `-`), with
    /// `include_dirs` updated when it left them, or not (the import then fails until the
    /// next step's `fix`); or `include_dirs` reordered, shortened or lengthened.
    pub fn edit_slang_move(&mut self, rng: &mut Rng) -> Option<String> {
        if !self.has_slang_shader() {
            return None;
        }
        let dirs = &mut self.slang.dirs;
        match rng.below(10) {
            0..=5 => {}
            6 | 7 => {
                if dirs.len() < 2 {
                    return None;
                }
                let a = rng.below(dirs.len());
                let b = rng.below(dirs.len());
                if a == b {
                    return None;
                }
                dirs.swap(a, b);
                return Some(format!("include_dirs reordered: {dirs:?}"));
            }
            8 if dirs.len() > 1 => {
                let gone = dirs.remove(rng.below(dirs.len()));
                return Some(format!("include_dirs: {gone} removed: {dirs:?}"));
            }
            _ => {
                let unused: Vec<&str> = SLANG_DIRS
                    .iter()
                    .copied()
                    .filter(|d| !dirs.iter().any(|x| x == d))
                    .collect();
                if unused.is_empty() {
                    return None;
                }
                let dir = rng.pick(&unused).to_string();
                let at = rng.below(dirs.len() + 1);
                dirs.insert(at, dir.clone());
                return Some(format!("include_dirs: {dir} added: {dirs:?}"));
            }
        }
        let i = rng.below(self.slang.modules.len());
        let mut places: Vec<&str> = SLANG_DIRS.to_vec();
        places.push(SLANG_SRC_DIR);
        let new_dir = rng.pick(&places).to_string();
        let flip = rng.chance(30);
        let update = rng.chance(60);
        let at = rng.below(self.slang.dirs.len() + 1);
        let module = &self.slang.modules[i];
        let old = module.path();
        let new_hyphen = module.hyphen != flip;
        let new = slang_module_path(&new_dir, module.which, new_hyphen);
        if new == old || self.slang_files().any(|m| m.path() == new) {
            return None;
        }
        let module = &mut self.slang.modules[i];
        module.dir = new_dir.clone();
        module.hyphen = new_hyphen;
        let dirs = &mut self.slang.dirs;
        let listed = new_dir == SLANG_SRC_DIR || dirs.contains(&new_dir);
        let note = if listed {
            ""
        } else if update {
            dirs.insert(at, new_dir);
            ", include_dirs updated"
        } else {
            ", include_dirs not updated"
        };
        Some(format!("module {old} moved to {new}{note}: {dirs:?}"))
    }

    /// `import fog_k;` (under `#ifdef FOG`) or `import detail_k;` added to or removed from a
    /// Slang source (with the code that uses it).
    pub fn edit_slang_import(&mut self, rng: &mut Rng) -> Option<String> {
        if !self.has_slang_shader() {
            return None;
        }
        let slang: Vec<String> = self
            .srcs
            .iter()
            .filter(|(_, s)| s.lang == Lang::Slang)
            .map(|(p, _)| p.clone())
            .collect();
        if slang.is_empty() {
            return None;
        }
        let read = self.referenced_srcs();
        let preferred: Vec<String> = slang.iter().filter(|p| read.contains(p)).cloned().collect();
        let path = if !preferred.is_empty() && rng.chance(85) {
            rng.pick(&preferred).clone()
        } else {
            rng.pick(&slang).clone()
        };
        let src = self.srcs.get_mut(&path).unwrap();
        if rng.chance(65) {
            src.import_fog = !src.import_fog;
            Some(format!(
                "{path}: import fog_k under #ifdef FOG: {}",
                src.import_fog
            ))
        } else {
            src.import_detail = !src.import_detail;
            Some(format!("{path}: import detail_k: {}", src.import_detail))
        }
    }

    /// A syntax error (or `#error` under `#ifdef FOG`) in a module file, usually the one an
    /// import finds; fixed in the next step.
    pub fn edit_slang_error(&mut self, rng: &mut Rng) -> Option<String> {
        let imported = self.slang_imported();
        if imported.is_empty() {
            return None;
        }
        let which = *rng.pick(&imported);
        let path = match self.slang_resolve(which) {
            Some(m) if rng.chance(85) => m.path(),
            _ => {
                let files: Vec<String> = self
                    .slang_files()
                    .filter(|m| m.which == which)
                    .map(SlangModule::path)
                    .collect();
                rng.pick(&files).clone()
            }
        };
        let kind = if rng.chance(70) {
            Injected::Syntax
        } else {
            Injected::FogError
        };
        self.slang_file_mut(&path)?.error = Some(kind);
        Some(format!("{path}: error injected ({kind:?})"))
    }
}

pub fn lang_of(path: &str) -> Lang {
    if path.ends_with(".wgsl") {
        Lang::Wgsl
    } else if path.ends_with(".frag") {
        Lang::Frag
    } else if path.ends_with(".slang") {
        Lang::Slang
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

fn push_slang_error(s: &mut String, error: Option<Injected>) {
    match error {
        None => {}
        Some(Injected::Syntax) => s.push_str("static const float BROKEN = ;\n"),
        // `FogTargetError` is GLSL's only (see `edit_error`).
        Some(_) => s.push_str("#ifdef FOG\n#error injected by the differential fuzzer\n#endif\n"),
    }
}

/// A Slang source: it imports its modules (`fog_k` under `#ifdef FOG`), and its three
/// entries use their functions, its own constants and the keywords.
fn render_slang_src(path: &str, src: &SrcFile) -> String {
    let k = &src.k;
    let mut s = String::new();
    let _ = writeln!(s, "// {path}: generated by kiln's differential fuzzer");
    push_comments(&mut s, &src.noise.top);
    s.push_str("import common_k;\n");
    if src.import_detail {
        s.push_str("import detail_k;\n");
    }
    if src.import_fog {
        s.push_str("#ifdef FOG\nimport fog_k;\n#endif\n");
    }
    push_slang_error(&mut s, src.error);
    let trailing = " ".repeat(src.noise.trailing);
    let inline = src.noise.inline;
    let _ = writeln!(s, "static const float L0 = {}.0;{trailing}", k[0]);
    let _ = writeln!(
        s,
        "#ifdef FOG\nstatic const float L_FOG = {}.0;\n#elif defined(SKIN)\nstatic const float L_FOG = {}.0;\n#else\nstatic const float L_FOG = {}.0;\n#endif\n",
        k[1], k[2], k[3]
    );
    s.push_str("RWStructuredBuffer<float> buf;\n\n");
    s.push_str("[shader(\"fragment\")]\nfloat4 fragMain() : SV_Target\n{\n");
    push_comments(&mut s, &src.noise.body);
    s.push_str(&"\n".repeat(src.noise.blanks));
    let _ = writeln!(
        s,
        "    float4 c = float4(commonA() * L0 /* inline {inline} */);"
    );
    let _ = writeln!(s, "    c = c * L_FOG; // inline {inline}");
    // Q is not always defined: tested first, so that Slang does not evaluate it undefined.
    let _ = writeln!(
        s,
        "#if defined(SKIN) && defined(Q)\n#if Q > 1\n    c = c + float4({}.0);\n#endif\n#endif",
        k[4]
    );
    let _ = writeln!(s, "#ifdef Q_HIGH\n    c = c * {}.0;\n#endif", k[5]);
    if src.import_detail {
        s.push_str("    c = c + float4(detailA() * detailB());\n");
    }
    if src.import_fog {
        s.push_str("#ifdef FOG\n    c = c + float4(fogA() + fogB());\n#endif\n");
    }
    s.push_str("    return c * commonB();\n}\n\n");
    let _ = writeln!(
        s,
        "[shader(\"vertex\")]\nfloat4 vertMain(float4 p : POSITION) : SV_Position\n{{\n    return p * commonA() + float4({}.0, 0.0, 0.0, 1.0);\n}}\n",
        k[7]
    );
    let _ = writeln!(
        s,
        "[shader(\"compute\")]\n[numthreads(1, 1, 1)]\nvoid compMain()\n{{\n    buf[0] = commonB() * {}.0;\n}}",
        k[8]
    );
    s
}

/// A Slang module (or a shadow of one): `PREFIXA()` returns `k[0]`, `PREFIXB()` `k[1]` with
/// FOG and `k[2]` without.
fn render_slang_module(m: &SlangModule) -> String {
    let (name, prefix) = SLANG_MODULES[m.which];
    let mut s = String::new();
    let _ = writeln!(s, "// {}: a Slang module, imported as {name}", m.path());
    push_comments(&mut s, &m.noise.top);
    let _ = writeln!(s, "module {name};");
    push_comments(&mut s, &m.noise.body);
    s.push_str(&"\n".repeat(m.noise.blanks));
    push_slang_error(&mut s, m.error);
    let _ = writeln!(s, "public float {prefix}A() {{ return {}.0; }}", m.k[0]);
    let _ = writeln!(
        s,
        "#ifdef FOG\npublic float {prefix}B() {{ return {}.0; }}\n#else\npublic float {prefix}B() {{ return {}.0; }}\n#endif",
        m.k[1], m.k[2]
    );
    s
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
