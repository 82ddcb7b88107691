//! The C ABI from C: `tests/c/lookup.c`, compiled by the system C compiler against
//! `include/kiln_runtime.h` and this build's `libkiln_runtime.a` (and, on Linux, the shared
//! `libkiln_runtime.so`), looks variants up in the sample pack; the header also compiles as
//! C++.
//!
//! The compilers are `$CC` and `$CXX` (they may carry arguments), else `cc` and `c++`.
//! Without one the tests fail, unless `KILN_SKIP_C_ABI=1`. `KILN_C_ABI_RUNNER` runs the program under a tool, e.g.
//! `KILN_C_ABI_RUNNER="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"`.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{temp_dir, write_sample_pack, SAMPLES};

/// Where cargo put this build's `libkiln_runtime.a` and `.so`: the test binary's own
/// directory (`target/<profile>/deps`), or the profile directory after a `cargo build`.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        if dir.join("libkiln_runtime.a").is_file() {
            return dir.to_owned();
        }
    }
    panic!(
        "no libkiln_runtime.a in {} or its parent: is `staticlib` still in the crate-type of \
         crates/kiln-runtime/Cargo.toml?",
        deps.display()
    );
}

/// Compiles `tests/c/lookup.c` into `out` with `link` (the library's arguments); `None` when
/// there is no C compiler and `KILN_SKIP_C_ABI=1`.
fn compile(out: &Path, link: &[String]) -> Option<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    compile_source(&crate_dir.join("tests/c/lookup.c"), out, link)
}

/// Compiles the C program `source` into `out/lookup`, as [`compile`] does.
fn compile_source(source: &Path, out: &Path, link: &[String]) -> Option<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cc = std::env::var("CC").unwrap_or_default();
    let mut words = cc.split_whitespace();
    let program = words.next().unwrap_or("cc").to_owned();
    let exe = out.join("lookup");
    let mut command = Command::new(&program);
    command
        .args(words)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-I",
        ])
        .arg(crate_dir.join("include"))
        .arg(source)
        .args(link)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe);
    let output = match command.output() {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if std::env::var_os("KILN_SKIP_C_ABI").is_some_and(|v| v == "1") {
                eprintln!("skipped: no C compiler `{program}` (KILN_SKIP_C_ABI=1)");
                return None;
            }
            panic!(
                "no C compiler `{program}` (set CC, install gcc, or set KILN_SKIP_C_ABI=1 to \
                 skip the C ABI test)"
            );
        }
        Err(error) => panic!("cannot run the C compiler `{program}`: {error}"),
    };
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(exe)
}

/// Runs `lookup` on the sample pack with every sample and one unbuilt set; checks its output.
fn run_lookup(exe: &Path, dir: &Path) {
    let pack = write_sample_pack(dir);
    // The variant with the most keywords first: lookup.c permutes the first one's keywords.
    let mut samples: Vec<_> = SAMPLES.iter().collect();
    samples.sort_by_key(|s| std::cmp::Reverse(s.keywords.len()));
    let runner = std::env::var("KILN_C_ABI_RUNNER").unwrap_or_default();
    let mut runner = runner.split_whitespace();
    let mut command = match runner.next() {
        Some(tool) => {
            let mut command = Command::new(tool);
            command.args(runner).arg(exe);
            command
        }
        None => Command::new(exe),
    };
    command.arg(&pack);
    let mut expected = vec![format!("ok open: {} variants", SAMPLES.len())];
    for s in &samples {
        let keywords = s.keywords.join(";");
        let bytes = String::from_utf8(s.bytes()).unwrap();
        let digest = s.digest();
        command.args([s.shader, s.pass, s.target, &keywords, &digest, &bytes]);
        expected.push(format!(
            "ok {}/{}[{keywords}] {}: {} bytes, digest {digest}",
            s.shader,
            s.pass,
            s.target,
            bytes.len()
        ));
    }
    command.args(["--not-built", "Lit", "Forward", "spirv", "SHADOWS"]);
    expected.extend([
        "ok not built: Lit/Forward[SHADOWS] was not built for target `spirv`".to_owned(),
        "ok permuted and repeated (4 keywords): same bytes pointer".to_owned(),
        "ok unknown keyword: unknown keyword `KILN_NO_SUCH_KEYWORD` for Lit/Forward: shader \
         `Lit` declares [FOG;SHADOWS;SKIN]"
            .to_owned(),
        "ok unknown pass: unknown pass `NoSuchPass` of shader `Lit` (it declares [Depth, \
         Forward])"
            .to_owned(),
        "ok NULL keyword: argument `keywords[1]` is NULL".to_owned(),
        format!(
            "ok NULL arguments; Lit has {} variants",
            SAMPLES.iter().filter(|s| s.shader == "Lit").count()
        ),
        "ok foreign file: KILN_ERR_CORRUPT".to_owned(),
        "ok 4 threads x 1000 lookups".to_owned(),
    ]);
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{command:?} exited with {}:\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    for line in &expected {
        assert!(
            lines.contains(&line.as_str()),
            "no line {line:?} in:\n{stdout}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ok invalid UTF-8: argument `shader` is not UTF-8")),
        "{stdout}"
    );
    let last = lines.last().copied().unwrap_or_default();
    assert!(
        last.starts_with("lookup: all ") && last.ends_with(" checks passed"),
        "{stdout}"
    );
}

#[test]
fn lookup_c_against_the_static_library() {
    let dir = temp_dir("c-abi-static");
    let library = library_dir().join("libkiln_runtime.a");
    let link = [library.to_str().unwrap().to_owned()];
    if let Some(exe) = compile(&dir, &link) {
        run_lookup(&exe, &dir);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn lookup_c_against_the_shared_library() {
    let dir = temp_dir("c-abi-shared");
    let library_dir = library_dir();
    assert!(
        library_dir.join("libkiln_runtime.so").is_file(),
        "no libkiln_runtime.so beside libkiln_runtime.a: is `cdylib` still in the crate-type?"
    );
    // `-lkiln_runtime` with both in one directory: the linker takes the shared one.
    let dir_arg = library_dir.to_str().unwrap();
    let link = [
        format!("-L{dir_arg}"),
        "-lkiln_runtime".to_owned(),
        format!("-Wl,-rpath,{dir_arg}"),
    ];
    if let Some(exe) = compile(&dir, &link) {
        let ldd = Command::new("ldd").arg(&exe).output();
        if let Ok(ldd) = ldd {
            let ldd = String::from_utf8_lossy(&ldd.stdout);
            assert!(
                ldd.contains("libkiln_runtime.so"),
                "not linked shared:\n{ldd}"
            );
        }
        run_lookup(&exe, &dir);
    }
}

/// The header compiles as C++ too (cbindgen's `cpp_compat`: `extern "C"`), with `$CXX`, else
/// `c++`.
#[test]
fn the_header_compiles_as_cpp() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = temp_dir("c-abi-cpp");
    let source = dir.join("header.cpp");
    std::fs::write(
        &source,
        "#include \"kiln_runtime.h\"\n\
         static_assert(sizeof(KilnVariant::digest) == 13, \"digest\");\n\
         KilnStatus open_it(KilnLibrary **out) { return kiln_library_open(\"x\", out); }\n",
    )
    .unwrap();
    let cxx = std::env::var("CXX").unwrap_or_default();
    let mut words = cxx.split_whitespace();
    let program = words.next().unwrap_or("c++").to_owned();
    let mut command = Command::new(&program);
    command
        .args(words)
        .args([
            "-std=c++11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
        ])
        .arg(crate_dir.join("include"))
        .arg(&source);
    let output = match command.output() {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if std::env::var_os("KILN_SKIP_C_ABI").is_some_and(|v| v == "1") {
                eprintln!("skipped: no C++ compiler `{program}` (KILN_SKIP_C_ABI=1)");
                return;
            }
            panic!(
                "no C++ compiler `{program}` (set CXX, install g++, or set KILN_SKIP_C_ABI=1 to \
                 skip the C ABI tests)"
            );
        }
        Err(error) => panic!("cannot run the C++ compiler `{program}`: {error}"),
    };
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The README's "From C" example, compiled as it stands (inside a `main`, with an `upload`
/// that prints) and run where `out/demo.kpack` is the sample pack.
#[test]
fn the_readme_example_compiles_and_runs() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(crate_dir.join("README.md")).unwrap();
    let example = readme
        .split_once("## From C")
        .and_then(|(_, rest)| rest.split_once("```c\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(example, _)| example)
        .expect("README.md has a ```c block under \"## From C\"");
    let (include, body) = example.split_once('\n').unwrap();
    assert_eq!(include, "#include \"kiln_runtime.h\"");
    assert!(example.lines().count() < 15, "the example is over 15 lines");
    let dir = temp_dir("c-abi-readme");
    std::fs::create_dir(dir.join("out")).unwrap();
    std::fs::write(dir.join("out/demo.kpack"), common::sample_pack()).unwrap();
    let source = dir.join("readme.c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n{include}\n\
             static void upload(const uint8_t *bytes, size_t len, const char *digest) {{\n\
             printf(\"upload %zu bytes, digest %s, from %c\\n\", len, digest, bytes[0]);\n}}\n\
             int main(void) {{\n{body}return s == KILN_OK ? 0 : 3;\n}}\n"
        ),
    )
    .unwrap();
    let library = library_dir().join("libkiln_runtime.a");
    let Some(exe) = compile_source(&source, &dir, &[library.to_str().unwrap().to_owned()]) else {
        return;
    };
    let output = Command::new(exe).current_dir(&dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}:\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let lit = SAMPLES
        .iter()
        .find(|s| {
            (s.shader, s.pass, s.text().as_str(), s.target)
                == ("Lit", "Forward", "FOG;SKIN", "spirv")
        })
        .unwrap();
    assert_eq!(
        stdout,
        format!(
            "upload {} bytes, digest {}, from a\n",
            lit.bytes().len(),
            lit.digest()
        )
    );
}
