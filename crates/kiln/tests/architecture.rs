//! The dependency rules of ARCHITECTURE.md, enforced: every `crate::<module>` path a module
//! of `kiln` names (in `use` items, grouped or not, and in qualified paths in code) must be
//! an edge the table below allows, and `kiln-incr` must not depend on `kiln`.
//!
//! Comments and string literals are skipped (a doc link is no dependency); `super::` chains
//! that climb to the crate root count as `crate::`. Code under `#[cfg(test)]` may also use
//! the edges in [`TEST_ONLY`].

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module of `kiln` and the modules it may name. Layers, bottom first:
/// `base`; `boundary`, `compile`; `key`, `preprocess`; `manifest`, `variant_cache`, `shard`;
/// `identity`; `store`; `pipeline`, which joins them all.
const ALLOWED: &[(&str, &[&str])] = &[
    // Names and value types every layer shares; depends on nothing.
    ("base", &[]),
    // The project boundary refuses kiln's own file names (`index.json`).
    ("boundary", &["base"]),
    // naga and glslang; knows nothing of manifests, keys or stores.
    ("compile", &[]),
    // Variant keys validate their names with the boundary's one validator.
    ("key", &["boundary"]),
    // The preprocessor maps source languages to dialects; `DiskLoader` reads through the
    // boundary.
    ("preprocess", &["boundary", "compile"]),
    // Names through the boundary, targets and stages from compile, source paths normalised
    // as the preprocessor names them.
    ("manifest", &["boundary", "compile", "preprocess"]),
    ("variant_cache", &["key"]),
    // Job keys are content keys.
    ("shard", &["base"]),
    // Hashes what reaches the compiler: the manifest's and compile's types, kiln's version.
    ("identity", &["base", "compile", "manifest"]),
    // Content keys from the bottom; namespaces (and their hash) from identity.
    ("store", &["base", "identity"]),
    // The top: joins everything.
    (
        "pipeline",
        &[
            "base",
            "boundary",
            "compile",
            "identity",
            "key",
            "manifest",
            "preprocess",
            "shard",
            "store",
            "variant_cache",
        ],
    ),
];

/// Edges only tests inside a module may use.
const TEST_ONLY: &[(&str, &[&str])] = &[
    // The manifest's name check is the key's: a test shows they agree.
    ("manifest", &["key"]),
];

/// Only these modules may name the incremental engine.
const USES_KILN_INCR: &[&str] = &["pipeline"];

#[test]
fn modules_depend_only_on_what_the_map_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    let mut violations = String::new();
    for module in &modules {
        let Some(allowed) = lookup(ALLOWED, module) else {
            let _ = writeln!(
                violations,
                "src/lib.rs: module `{module}` has no row in tests/architecture.rs ALLOWED: \
                 place it in the map"
            );
            continue;
        };
        let test_only = lookup(TEST_ONLY, module).unwrap_or(&[]);
        for file in module_files(&src, module) {
            let text = fs::read_to_string(&file).expect("read a source file");
            let shown = src
                .ancestors()
                .nth(3)
                .and_then(|workspace| file.strip_prefix(workspace).ok())
                .unwrap_or(&file);
            for found in references(&text, &module_path(&src, &file)) {
                let ok = match &found.target {
                    Target::Module(target) => {
                        target == module
                            || allowed.contains(&target.as_str())
                            || (found.in_test && test_only.contains(&target.as_str()))
                    }
                    Target::KilnIncr => USES_KILN_INCR.contains(&module.as_str()),
                };
                if !ok {
                    let target = match &found.target {
                        Target::Module(target) => format!("crate::{target}"),
                        Target::KilnIncr => "kiln_incr".to_owned(),
                    };
                    let _ = writeln!(
                        violations,
                        "{}:{}: `{module}` -> `{target}` is not allowed{}",
                        shown.display(),
                        found.line,
                        if found.in_test { " (in test code)" } else { "" },
                    );
                }
            }
        }
    }
    for (module, _) in ALLOWED.iter().chain(TEST_ONLY) {
        if !modules.iter().any(|m| m == module) {
            let _ = writeln!(
                violations,
                "tests/architecture.rs: `{module}` is in the map but not a module of src/lib.rs"
            );
        }
    }
    assert!(
        violations.is_empty(),
        "forbidden dependencies (see ARCHITECTURE.md, Dependency rules):\n{violations}"
    );
}

#[test]
fn the_map_has_no_cycle() {
    // A cycle would make "layers" meaningless, whatever the code does.
    fn visit<'a>(module: &'a str, path: &mut Vec<&'a str>, done: &mut BTreeSet<&'a str>) {
        if done.contains(module) {
            return;
        }
        assert!(
            !path.contains(&module),
            "the allowed map has a cycle: {} -> {module}",
            path.join(" -> ")
        );
        path.push(module);
        for next in lookup(ALLOWED, module).unwrap_or(&[]) {
            visit(next, path, done);
        }
        path.pop();
        done.insert(module);
    }
    let mut done = BTreeSet::new();
    for (module, _) in ALLOWED {
        visit(module, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_engine_does_not_depend_on_kiln() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kiln-incr/Cargo.toml");
    let text = fs::read_to_string(&manifest).expect("read kiln-incr's Cargo.toml");
    let mut section = String::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        let key = line.split(['=', '.']).next().unwrap_or("").trim();
        assert!(
            !(section.contains("dependencies") && (key == "kiln" || key == "\"kiln\"")),
            "crates/kiln-incr/Cargo.toml:{}: kiln-incr depends on kiln ({section})",
            index + 1
        );
    }
}

/// The engine links kiln-runtime: it depends on no kiln crate and only on these small
/// crates (no naga, no SQLite, no async runtime). A new dependency is a decision: add it here.
const RUNTIME_DEPENDENCIES: &[&str] = &["thiserror", "blake3", "sha2", "memmap2"];

#[test]
fn the_runtime_stays_small() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kiln-runtime/Cargo.toml");
    let text = fs::read_to_string(&manifest).expect("read kiln-runtime's Cargo.toml");
    let mut section = String::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = line
            .split(['=', '.'])
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"');
        // Runtime (and build) dependencies, not dev-dependencies (tests may use proptest).
        let linked = section == "[dependencies]"
            || section == "[build-dependencies]"
            || (section.starts_with("[target.") && !section.contains("dev-dependencies"));
        assert!(
            !linked || RUNTIME_DEPENDENCIES.contains(&key),
            "crates/kiln-runtime/Cargo.toml:{}: kiln-runtime depends on `{key}` ({section}); \
             it must stay small (see RUNTIME_DEPENDENCIES)",
            index + 1
        );
    }
}

#[test]
fn the_scanner_reads_every_form() {
    let code = "use crate::a::X;\n\
                use crate::{b, c::{D, E}, self};\n\
                // crate::commented\n\
                let s = \"crate::quoted\"; let c = '\"'; let r = r#\"crate::raw\"#;\n\
                fn f<'a>() { crate::f::g(); super::super::h::i(); }\n\
                #[cfg(all(test, unix))]\nmod tests { use super::super::super::t; use super::super::own; }\n";
    let found: Vec<(String, usize, bool)> = references(code, &["m".into(), "n".into()])
        .into_iter()
        .filter_map(|r| match r.target {
            Target::Module(m) => Some((m, r.line, r.in_test)),
            Target::KilnIncr => None,
        })
        .collect();
    let expected = [
        ("a", 1, false),
        ("b", 2, false),
        ("c", 2, false),
        ("f", 5, false),
        ("h", 5, false),
        ("t", 7, true),
    ];
    let expected: Vec<(String, usize, bool)> = expected
        .iter()
        .map(|(m, l, t)| ((*m).to_owned(), *l, *t))
        .collect();
    assert_eq!(found, expected);
}

fn lookup<'a>(table: &'a [(&str, &'a [&'a str])], module: &str) -> Option<&'a [&'a str]> {
    table
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, deps)| *deps)
}

/// The modules `lib.rs` declares.
fn top_level_modules(src: &Path) -> Vec<String> {
    let lib = strip(&fs::read_to_string(src.join("lib.rs")).expect("read lib.rs"));
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))
                .or_else(|| line.strip_prefix("pub(crate) mod "))?;
            Some(rest.trim_end_matches(';').trim().to_owned())
        })
        .collect()
}

/// `src/<module>.rs`, or every `.rs` file under `src/<module>/` (a module may be either).
fn module_files(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let single = src.join(format!("{module}.rs"));
    if single.is_file() {
        files.push(single);
    }
    let dir = src.join(module);
    if dir.is_dir() {
        collect_rs(&dir, &mut files);
    }
    assert!(!files.is_empty(), "no source for module `{module}`");
    files.sort();
    files
}

fn collect_rs(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect_rs(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The module path of a file: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_owned());
    }
    parts
}

enum Target {
    /// `crate::<module>`.
    Module(String),
    /// The incremental engine crate.
    KilnIncr,
}

struct Reference {
    target: Target,
    line: usize,
    in_test: bool,
}

/// Every top-level module (and `kiln_incr`) that `text`, the file of module `path`, names.
fn references(text: &str, path: &[String]) -> Vec<Reference> {
    let code = strip(text);
    let bytes = code.as_bytes();
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    // Inline modules open at a brace depth; `in_test` when one of them is `#[cfg(test)]`.
    let mut inline: Vec<(usize, bool)> = Vec::new();
    let mut depth = 0usize;
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let c = bytes[at];
        if c == b'{' {
            depth += 1;
            at += 1;
            continue;
        }
        if c == b'}' {
            depth = depth.saturating_sub(1);
            while inline.last().is_some_and(|(d, _)| *d > depth) {
                inline.pop();
            }
            at += 1;
            continue;
        }
        let previous = at.checked_sub(1).map(|p| bytes[p]);
        if !is_ident_start(c) || previous.is_some_and(|p| is_ident(p) || p == b'$') {
            at += 1;
            continue;
        }
        let word_end = ident_end(bytes, at);
        let word = &code[at..word_end];
        let in_test = inline.iter().any(|(_, test)| *test);
        match word {
            "mod" => {
                let name_end = ident_end(bytes, skip_space(bytes, word_end));
                let after = skip_space(bytes, name_end);
                if bytes.get(after) == Some(&b'{') {
                    let before = &code[..at];
                    let attributes = before
                        .rfind([';', '}', '{'])
                        .map_or(before, |cut| &before[cut + 1..]);
                    let test = attributes.contains("cfg(") && attributes.contains("test");
                    inline.push((depth + 1, test));
                }
            }
            "crate" => {
                for (module, offset) in path_heads(&code, word_end) {
                    found.push(Reference {
                        target: Target::Module(module),
                        line: line_at(offset),
                        in_test,
                    });
                }
            }
            "super" => {
                // Climb `super::super::...`; from the crate root the next name is a module.
                let mut level = path.len() + inline.len();
                let mut end = word_end;
                loop {
                    level = level.saturating_sub(1);
                    match code[end..].strip_prefix("::") {
                        Some(rest) if rest.starts_with("super") && !is_ident_at(rest, 5) => {
                            end += 2 + 5;
                        }
                        _ => break,
                    }
                }
                if level == 0 {
                    for (module, offset) in path_heads(&code, end) {
                        found.push(Reference {
                            target: Target::Module(module),
                            line: line_at(offset),
                            in_test,
                        });
                    }
                }
                at = end;
                continue;
            }
            "kiln_incr" => found.push(Reference {
                target: Target::KilnIncr,
                line: line_at(at),
                in_test,
            }),
            _ => {}
        }
        at = word_end;
    }
    found
}

/// After `crate` (or a `super` chain) ending at `at`: the first name of each path, whether
/// `::name` or a group `::{a, b::c, d::{e}}`; `self` names nothing.
fn path_heads(code: &str, at: usize) -> Vec<(String, usize)> {
    let bytes = code.as_bytes();
    let Some(rest) = code[at..].strip_prefix("::") else {
        return Vec::new();
    };
    let start = skip_space(bytes, at + 2);
    let mut heads = Vec::new();
    if rest.trim_start().starts_with('{') {
        // Names at the group's first level, each after `{` or `,`.
        let mut level = 0;
        let mut expect_name = true;
        let mut i = start;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    level += 1;
                    expect_name = level == 1;
                    i += 1;
                }
                b'}' => {
                    level -= 1;
                    i += 1;
                    if level == 0 {
                        break;
                    }
                }
                b',' => {
                    expect_name = level == 1;
                    i += 1;
                }
                c if is_ident_start(c) => {
                    let end = ident_end(bytes, i);
                    if expect_name && &code[i..end] != "self" {
                        heads.push((code[i..end].to_owned(), i));
                    }
                    expect_name = false;
                    i = end;
                }
                _ => i += 1,
            }
        }
    } else if bytes.get(start).copied().is_some_and(is_ident_start) {
        let end = ident_end(bytes, start);
        if &code[start..end] != "self" {
            heads.push((code[start..end].to_owned(), start));
        }
    }
    heads
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn is_ident_at(text: &str, at: usize) -> bool {
    text.as_bytes().get(at).copied().is_some_and(is_ident)
}

fn ident_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && is_ident(bytes[at]) {
        at += 1;
    }
    at
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && bytes[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

/// The code with comments, string and character literals blanked (newlines kept, so line
/// numbers stay right).
fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut out[from..to] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |n| at + n);
            blank(&mut out, at, end);
            at = end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest in Rust.
            let mut level = 0;
            let mut i = at;
            while i < bytes.len() {
                if bytes[i..].starts_with(b"/*") {
                    level += 1;
                    i += 2;
                } else if bytes[i..].starts_with(b"*/") {
                    level -= 1;
                    i += 2;
                    if level == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            blank(&mut out, at, i);
            at = i;
        } else if (rest.starts_with(b"r\"") || rest.starts_with(b"r#"))
            && (at == 0 || !is_ident(bytes[at - 1]) || bytes[at - 1] == b'b')
        {
            let hashes = rest[1..].iter().take_while(|&&b| b == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                at += 1;
                continue;
            }
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = at + 2 + hashes;
            let end = bytes[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(bytes.len(), |n| body + n + close.len());
            blank(&mut out, at, end);
            at = end;
        } else if rest[0] == b'"' {
            let mut i = at + 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            let end = (i + 1).min(bytes.len());
            blank(&mut out, at, end);
            at = end;
        } else if rest[0] == b'\'' {
            // A character literal, or a lifetime (left alone).
            let end = if rest.get(1) == Some(&b'\\') {
                rest[2..]
                    .iter()
                    .position(|&b| b == b'\'')
                    .map(|n| at + 2 + n + 1)
            } else {
                let width = text[at + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + width) == Some(&b'\'')).then_some(at + 2 + width)
            };
            match end {
                Some(end) => {
                    blank(&mut out, at, end);
                    at = end;
                }
                None => at += 1,
            }
        } else {
            at += 1;
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 intact")
}
