//! kiln's GLSL and HLSL preprocessor against the reference: `glslangValidator -E`.
//!
//! **Token for token** means: both outputs are split into tokens by [`tokens`] (identifiers,
//! preprocessing numbers, string literals, the longest punctuator, any other character),
//! white space and line breaks dropped, and every line that is a `#line` directive removed
//! (glslang writes them to keep its line numbers; kiln keeps a line map instead). The two
//! token sequences must be equal. When glslang refuses a file, kiln must refuse it too.
//!
//! The corpus: the repository's GLSL shaders (`examples/`) and this test's own shaders
//! (`tests/cpp_shaders/`), each under several define sets. A shader's first comment lines
//! may say `// compare: A B=2 | C` (define sets besides none), `// include-dirs: lib inc`
//! (`-I`, relative to the shader's corpus directory), `// expect: error` (both must fail)
//! or `// expect: error unless NAME` (both fail exactly when NAME is not defined). A GLSL
//! file that includes without enabling `GL_GOOGLE_include_directive` (kiln does not need
//! it; glslangValidator does) gets that line after its `#version` in a copy given to both.
//!
//! Without glslangValidator the test prints why and passes, unless `KILN_REQUIRE_GLSLANG=1`
//! (as CI sets), which makes its absence a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln::preprocess::{preprocess, Dialect, DiskLoader, PreprocessBudget, PreprocessRequest};

const LONG_PUNCTUATORS: [&str; 25] = [
    "<<=", ">>=", "...", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "^^", "++", "--", "+=",
    "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", "::", "->",
];

/// The token sequence of a preprocessed text, `#line` lines dropped.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('#') {
            if rest.trim_start().starts_with("line") {
                continue;
            }
        }
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let start = i;
            if b.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            if b.is_ascii_alphabetic() || b == b'_' {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
            } else if b.is_ascii_digit()
                || (b == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
            {
                i += 1;
                while i < bytes.len() {
                    let c = bytes[i];
                    let sign = (c == b'+' || c == b'-') && matches!(bytes[i - 1], b'e' | b'E');
                    if !(c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || sign) {
                        break;
                    }
                    i += 1;
                }
            } else if b == b'"' {
                i += 1 + line[i + 1..]
                    .find('"')
                    .map_or(line.len() - i - 1, |n| n + 1);
            } else if let Some(p) = LONG_PUNCTUATORS.iter().find(|p| line[i..].starts_with(**p)) {
                i += p.len();
            } else {
                i += line[i..].chars().next().map_or(1, char::len_utf8);
            }
            out.push(line[start..i].to_owned());
        }
    }
    out
}

#[test]
fn the_tokenizer_follows_its_definition() {
    assert_eq!(
        tokens("#line 3 \"a\"\na<<=b . 1.5e-3f\"s x\"@\n  # line 9\n#version 450"),
        ["a", "<<=", "b", ".", "1.5e-3f", "\"s x\"", "@", "#", "version", "450"]
    );
}

fn glslang_available() -> bool {
    let found = Command::new("glslangValidator")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        if std::env::var("KILN_REQUIRE_GLSLANG").as_deref() == Ok("1") {
            panic!("glslangValidator is required (KILN_REQUIRE_GLSLANG=1) but was not found; install glslang-tools");
        }
        println!("SKIPPED: glslangValidator not found (install glslang-tools; KILN_REQUIRE_GLSLANG=1 makes this a failure)");
    }
    found
}

/// One shader of the corpus under one define set.
struct Case {
    /// Root-relative (to the corpus copy) path of the shader.
    entry: String,
    defines: Vec<(String, String)>,
    include_dirs: Vec<String>,
    expect_error: bool,
}

fn header_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .take_while(|l| l.starts_with("//"))
        .find_map(|l| {
            l.strip_prefix("//")?
                .trim()
                .strip_prefix(key)?
                .strip_prefix(':')
        })
        .map(str::trim)
}

fn is_shader(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("vert" | "frag" | "comp" | "geom" | "tesc" | "tese" | "hlsl")
    )
}

/// Copies `dir` to `to`, adding `GL_GOOGLE_include_directive` where glslangValidator needs
/// it; returns the shaders' cases.
fn copy_corpus(dir: &Path, to: &Path, cases: &mut Vec<Case>, prefix: &str, headers: bool) {
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        for entry in std::fs::read_dir(dir.join(&relative)).unwrap() {
            let entry = entry.unwrap();
            let name = relative.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                std::fs::create_dir_all(to.join(prefix).join(&name)).unwrap();
                stack.push(name);
                continue;
            }
            let mut text = std::fs::read_to_string(entry.path()).unwrap();
            let hlsl = name.extension().is_some_and(|e| e == "hlsl");
            if is_shader(&name)
                && !hlsl
                && text.contains("#include")
                && !text.contains("GL_GOOGLE_include_directive")
            {
                let version_end = text.find("#version").map_or(0, |v| {
                    v + text[v..].find('\n').map_or(text.len() - v, |n| n + 1)
                });
                text.insert_str(
                    version_end,
                    "#extension GL_GOOGLE_include_directive : require\n",
                );
            }
            std::fs::write(to.join(prefix).join(&name), &text).unwrap();
            if !is_shader(&name) || !headers {
                continue;
            }
            let entry = format!("{prefix}/{}", name.to_str().unwrap());
            let include_dirs: Vec<String> = header_value(&text, "include-dirs")
                .map(|dirs| {
                    dirs.split_whitespace()
                        .map(|d| format!("{prefix}/{d}"))
                        .collect()
                })
                .unwrap_or_default();
            let expect = header_value(&text, "expect").unwrap_or("");
            let mut sets: Vec<Vec<(String, String)>> = vec![Vec::new()];
            if let Some(spec) = header_value(&text, "compare") {
                sets.extend(spec.split('|').map(|set| {
                    set.split_whitespace()
                        .map(|d| match d.split_once('=') {
                            Some((n, v)) => (n.to_owned(), v.to_owned()),
                            None => (d.to_owned(), "1".to_owned()),
                        })
                        .collect()
                }));
            }
            for defines in sets {
                let expect_error = match expect.strip_prefix("error unless ") {
                    Some(name) => !defines.iter().any(|(n, _)| n == name.trim()),
                    None => expect == "error",
                };
                cases.push(Case {
                    entry: entry.clone(),
                    defines,
                    include_dirs: include_dirs.clone(),
                    expect_error,
                });
            }
        }
    }
}

/// The cases of a project's GLSL passes: every variant, its keywords and the shader's
/// defines, as the pipeline preprocesses them.
fn manifest_cases(manifest: &Path, prefix: &str, cases: &mut Vec<Case>) {
    let manifest = kiln::manifest::Manifest::load(manifest).unwrap();
    for shader in &manifest.shaders {
        for pass in &shader.passes {
            if pass.language != kiln::compile::SourceLanguage::Glsl {
                continue;
            }
            // The corpus copies the project's `shaders/` directory to `prefix/`.
            let source = pass.source.to_str().unwrap();
            let entry = format!("{prefix}/{}", source.strip_prefix("shaders/").unwrap());
            for variant in &shader.variants {
                let mut defines: Vec<(String, String)> = variant
                    .iter()
                    .map(|k| (k.clone(), "1".to_owned()))
                    .collect();
                defines.extend(shader.defines.iter().map(|(n, v)| (n.clone(), v.clone())));
                cases.push(Case {
                    entry: entry.clone(),
                    defines,
                    include_dirs: shader
                        .include_dirs
                        .iter()
                        .map(|d| format!("{prefix}/{}", d.to_str().unwrap()))
                        .collect(),
                    expect_error: false,
                });
            }
        }
    }
}

fn glslang(root: &Path, case: &Case) -> Result<String, String> {
    let mut command = Command::new("glslangValidator");
    command.current_dir(root).arg("-E");
    if case.entry.ends_with(".hlsl") {
        command.args(["-D", "-S", "frag", "-e", "main"]);
    }
    for (name, value) in &case.defines {
        command.arg(format!("-D{name}={value}"));
    }
    for dir in &case.include_dirs {
        command.arg(format!("-I{dir}"));
    }
    command.arg(&case.entry);
    let output = command.output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() && !stderr.contains("ERROR") && !stdout.contains("ERROR:") {
        Ok(stdout)
    } else {
        Err(format!("{stdout}{stderr}"))
    }
}

fn kiln(root: &Path, case: &Case) -> Result<String, String> {
    let language = if case.entry.ends_with(".hlsl") {
        Dialect::Hlsl
    } else {
        Dialect::Glsl
    };
    let include_dirs: Vec<PathBuf> = case.include_dirs.iter().map(PathBuf::from).collect();
    let defines: Vec<(&str, &str)> = case
        .defines
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    preprocess(
        &PreprocessRequest {
            entry: Path::new(&case.entry),
            language,
            include_dirs: &include_dirs,
            keywords: &[],
            defines: &defines,
            budget: PreprocessBudget::default(),
        },
        &DiskLoader::new(root),
    )
    .map(|out| out.text)
    .map_err(|err| err.to_string())
}

#[test]
fn glsl_and_hlsl_preprocess_token_for_token_as_glslang_does() {
    if !glslang_available() {
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for (dir, prefix, headers) in [
        ("examples/demo/shaders", "demo", false),
        ("crates/kiln/tests/cpp_shaders", "own", true),
    ] {
        std::fs::create_dir_all(corpus.path().join(prefix)).unwrap();
        copy_corpus(&repo.join(dir), corpus.path(), &mut cases, prefix, headers);
    }
    manifest_cases(&repo.join("examples/demo/kiln.toml"), "demo", &mut cases);
    cases.sort_by(|a, b| a.entry.cmp(&b.entry));
    let mut failures = Vec::new();
    let (mut equal, mut both_failed) = (0, 0);
    for case in &cases {
        let label = format!(
            "{} {:?} -I{:?}",
            case.entry, case.defines, case.include_dirs
        );
        match (glslang(corpus.path(), case), kiln(corpus.path(), case)) {
            (Ok(reference), Ok(ours)) => {
                let (reference, ours) = (tokens(&reference), tokens(&ours));
                if reference == ours {
                    equal += 1;
                } else {
                    let at = reference
                        .iter()
                        .zip(&ours)
                        .position(|(a, b)| a != b)
                        .unwrap_or(reference.len().min(ours.len()));
                    let window =
                        |t: &[String]| t[at.saturating_sub(8)..(at + 8).min(t.len())].join(" ");
                    failures.push(format!(
                        "{label}: tokens differ at {at}\n  glslang: {}\n  kiln:    {}",
                        window(&reference),
                        window(&ours)
                    ));
                }
                if case.expect_error {
                    failures.push(format!("{label}: expected both to fail, both succeeded"));
                }
            }
            (Err(_), Err(_)) => {
                both_failed += 1;
                if !case.expect_error {
                    failures.push(format!("{label}: both failed, but the shader should build"));
                }
            }
            (Ok(_), Err(ours)) => failures.push(format!("{label}: kiln failed: {ours}")),
            (Err(reference), Ok(_)) => failures.push(format!(
                "{label}: glslang failed, kiln did not: {reference}"
            )),
        }
    }
    println!(
        "{} cases: {equal} token-for-token equal, {both_failed} refused by both",
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        equal >= 20 && both_failed >= 5,
        "the corpus shrank: {equal} equal, {both_failed} failed"
    );
}

/// SplitMix64: a fixed seed gives the same expressions on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// The macros every generated file defines before its `#if`.
const EXPR_PRELUDE: &str =
    "#version 450\n#define A 5\n#define B 0\n#define C (A + 1)\n#define D -3\n#define E 0x10\n";

const BINARY: [&str; 18] = [
    "*", "/", "%", "+", "-", "<<", ">>", "<", ">", "<=", ">=", "==", "!=", "&", "^", "|", "&&",
    "||",
];

/// An operand: a literal (decimal, hex or octal, some at or past the 32-bit edges, a few
/// with a suffix), a macro (defined or not), or `defined`.
fn expr_atom(rng: &mut Rng) -> String {
    match rng.below(12) {
        0..=3 => rng.below(20).to_string(),
        4 => rng
            .pick(&[
                "2147483647",
                "2147483648",
                "4294967295",
                "4294967296",
                "65536",
            ])
            .to_owned(),
        5 => format!("0x{:x}", rng.next() >> (31 + rng.below(33))),
        6 => format!("0{:o}", rng.below(64)),
        7 => rng
            .pick(&[
                "037777777777",
                "040000000000",
                "0xffffffff",
                "0x7fffffff",
                "08",
                "1u",
            ])
            .to_owned(),
        8 | 9 => rng.pick(&["A", "B", "C", "D", "E", "UNDEFINED"]).to_owned(),
        _ => rng
            .pick(&[
                "defined(A)",
                "defined B",
                "defined(UNDEFINED)",
                "defined UNDEFINED",
            ])
            .to_owned(),
    }
}

/// An expression of at most `depth` levels, with `top` as its operator when given, and
/// whether it holds a shift. A shift's count is a literal below 32 or `(... & 31)`, and an
/// operand holding a shift is parenthesised, so that no count is out of range (undefined
/// behaviour in glslang's C++).
fn expr(rng: &mut Rng, depth: u32, top: Option<&str>) -> (String, bool) {
    if depth == 0 || (top.is_none() && rng.below(4) == 0) {
        return (expr_atom(rng), false);
    }
    let operand = |rng: &mut Rng| {
        let (text, shift) = expr(rng, depth - 1, None);
        let atomic = !text.contains(' ');
        if shift || (!atomic && rng.below(2) == 0) {
            (format!("({text})"), shift)
        } else {
            (text, false)
        }
    };
    let op = match top {
        Some(op) => op,
        None if rng.below(5) == 0 => {
            let (text, shift) = operand(rng);
            let unary = rng.pick(&["-", "+", "~", "!"]);
            // `- -1` stays two operators (`--` would be a decrement).
            return (format!("{unary} {text}"), shift);
        }
        None => rng.pick(&BINARY),
    };
    let (lhs, lhs_shift) = operand(rng);
    if op == "<<" || op == ">>" {
        let count = if rng.below(2) == 0 {
            rng.below(32).to_string()
        } else {
            let (inner, _) = expr(rng, depth - 1, None);
            format!("(({inner}) & 31)")
        };
        return (format!("{lhs} {op} {count}"), true);
    }
    let (rhs, rhs_shift) = operand(rng);
    (format!("{lhs} {op} {rhs}"), lhs_shift || rhs_shift)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Taken,
    NotTaken,
    Error,
}

/// `#if` expressions generated over every operator glslang's preprocessor has (unary
/// `- + ~ !`, binary `* / % + - << >> < > <= >= == != & ^ | && ||`, parentheses, `defined`,
/// decimal, hex and octal literals, macros), compared with glslangValidator's verdict: which
/// branch it takes, or that it refuses the file. glslang has no `?:`; both must refuse it.
/// All files go to one glslangValidator call.
#[test]
fn generated_if_expressions_take_the_branch_glslang_takes() {
    if !glslang_available() {
        return;
    }
    let mut rng = Rng(0x6b69_6c6e_2025);
    let mut expressions: Vec<String> = vec![
        "(1 << 2) == 4".into(),
        "1 ? 2 : 0".into(),
        "A ? B : C".into(),
        "(0 ? 1 : 1) == 1".into(),
    ];
    for i in 0..400 {
        // Each operator is the top one of some expressions.
        let (text, _) = expr(&mut rng, 3, Some(BINARY[i % BINARY.len()]));
        expressions.push(text);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut loader = kiln::preprocess::MemoryLoader::new();
    let mut names = Vec::new();
    for (i, expression) in expressions.iter().enumerate() {
        let name = format!("e{i}.frag");
        let text = format!("{EXPR_PRELUDE}#if {expression}\nt{i}\n#else\nf{i}\n#endif\n");
        std::fs::write(dir.path().join(&name), &text).unwrap();
        loader.insert(name.clone(), text);
        names.push(name);
    }
    let output = Command::new("glslangValidator")
        .current_dir(dir.path())
        .arg("-E")
        .args(&names)
        .output()
        .unwrap();
    let all = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut reference = vec![None; expressions.len()];
    for word in all.split(|c: char| !c.is_ascii_alphanumeric() && c != '.') {
        let verdict = match word.as_bytes().first() {
            Some(b't') => Verdict::Taken,
            Some(b'f') => Verdict::NotTaken,
            _ => continue,
        };
        if let Ok(i) = word[1..].parse::<usize>() {
            reference[i] = Some(verdict);
        }
    }
    for line in all.lines() {
        let file = line
            .strip_prefix("ERROR: e")
            .and_then(|rest| rest.split_once(".frag:"))
            .and_then(|(i, _)| i.parse::<usize>().ok());
        if let Some(i) = file {
            reference[i] = Some(Verdict::Error);
        }
    }
    let mut counts = [0usize; 3];
    let mut failures = Vec::new();
    for (i, expression) in expressions.iter().enumerate() {
        let Some(expected) = reference[i] else {
            failures.push(format!(
                "#if {expression}: no verdict from glslangValidator"
            ));
            continue;
        };
        let ours = match preprocess(
            &PreprocessRequest {
                entry: Path::new(&names[i]),
                language: Dialect::Glsl,
                include_dirs: &[],
                keywords: &[],
                defines: &[],
                budget: PreprocessBudget::default(),
            },
            &loader,
        ) {
            Ok(out) if out.text.contains(&format!("t{i}")) => Verdict::Taken,
            Ok(_) => Verdict::NotTaken,
            Err(_) => Verdict::Error,
        };
        counts[expected as usize] += 1;
        if ours != expected {
            failures.push(format!(
                "#if {expression}: glslang {expected:?}, kiln {ours:?}"
            ));
        }
    }
    println!(
        "{} expressions: {} taken, {} not taken, {} refused by both",
        expressions.len(),
        counts[0],
        counts[1],
        counts[2]
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The generator must keep producing all three outcomes.
    assert!(counts.iter().all(|&n| n >= 40), "{counts:?}");
}
