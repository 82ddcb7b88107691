//! Issue 25 at the command line: the boundary's second ring. Each test starts from the
//! issue's repro and failed before its fix.

use kiln_test_support::TempProject;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn project() -> TempProject {
    TempProject::new(
        r#"
        //- /kiln.toml
        [project]
        targets = ["spirv"]

        [[shader]]
        name = "A"
        source = "a.wgsl"
        axes = [["_", "RED"]]

        [shader.passes.Main]
        stage = "fragment"
        entry = "fs_main"

        //- /a.wgsl
        @fragment
        fn fs_main() -> @location(0) vec4<f32> {
        #ifdef RED
            return vec4<f32>(1.0, 0.0, 0.0, 1.0);
        #else
            return vec4<f32>(1.0);
        #endif
        }
        "#,
    )
}

fn kiln(dir: &TempProject, command: &str) -> Command {
    dir.command(env!("CARGO_BIN_EXE_kiln"), command)
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Item 13: `kiln build 2>&1 | head -1` on a bad manifest exited 101, "failed printing to
/// stderr".
#[test]
fn a_closed_stderr_is_not_a_panic() {
    let dir = project();
    dir.write("kiln.toml", "[project]\ntargets = [\"spirv\"\n");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = kiln(&dir, "build")
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(2),
        "a bad manifest exits 2, even unheard"
    );
}

/// Item 6: `--manifest /dev/zero` read 10 GB in 20 s; a FIFO blocked forever.
#[test]
fn the_manifest_must_be_a_regular_file_of_bounded_size() {
    let dir = project();
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["build", "--manifest", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("not a regular file (a device)"),
        "{}",
        stderr_of(&output)
    );

    let fifo = dir.path("fifo.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let output = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["build", "--manifest"])
        .arg(&fifo)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("not a regular file (a FIFO)"),
        "{}",
        stderr_of(&output)
    );

    // A regular file past the cap is refused before it is read whole.
    let huge = dir.path("huge.toml");
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(kiln::manifest::MAX_MANIFEST_BYTES + 1)
        .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["build", "--manifest"])
        .arg(&huge)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("larger than the 16 MiB"),
        "{}",
        stderr_of(&output)
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

fn tree_of(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    kiln_test_support::tree(dir)
}

/// Item 1: `rm -rf out/A; ln -s ../outside out/A; kiln build` overwrote `outside/Main/_.spv`
/// and created `outside/Main/RED.spv`. Now those variants fail, naming the link, and
/// nothing outside changes; a linked `out/` or `.kiln/` is refused as a whole.
#[test]
fn writes_never_go_through_a_link() {
    let dir = project();
    let first = dir.build_cli(env!("CARGO_BIN_EXE_kiln"), &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let outside = dir.path("outside");
    std::fs::create_dir_all(outside.join("Main")).unwrap();
    std::fs::write(outside.join("Main/_.spv"), "precious").unwrap();
    std::fs::remove_dir_all(dir.path("out/A")).unwrap();
    std::os::unix::fs::symlink("../outside", dir.path("out/A")).unwrap();
    dir.edit("a.wgsl", "1.0, 0.0, 0.0", "0.0, 1.0, 0.0");
    let build = dir.build_cli(env!("CARGO_BIN_EXE_kiln"), &[]);
    assert_eq!(build.code, 1, "{}", build.stderr);
    assert_eq!(build.report["failed"], 2, "{}", build.report);
    assert!(
        build.report.to_string().contains("`A` is a symbolic link"),
        "{}",
        build.report
    );
    let after = tree_of(&outside);
    assert_eq!(after.len(), 1, "{:?}", after.keys());
    assert_eq!(after["Main/_.spv"], b"precious");

    // The output directory, or the store, a link in the project: refused before anything.
    for (linked, flag) in [("out", "--out"), (".kiln", "--cache-dir")] {
        let dir = project();
        let elsewhere = dir.path("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path(linked)).unwrap();
        let output = kiln(&dir, "build").output().unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("is a symbolic link in the project"),
            "{stderr}"
        );
        assert!(stderr.contains(flag), "{stderr}");
        assert!(
            tree_of(&elsewhere).is_empty(),
            "{linked}: wrote through the link"
        );
        // Named as what it is, the directory is used.
        let output = kiln(&dir, "build")
            .arg(flag)
            .arg(&elsewhere)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        assert!(!tree_of(&elsewhere).is_empty());
    }
}

/// Item 3: with a `wgsl` target, `--out <project root>` replaced the source `A/Main/_.wgsl`
/// with generated WGSL; `--out shaders` overwrote the user's `shaders/index.json`.
#[test]
fn an_output_directory_over_the_sources_is_refused() {
    let dir = TempProject::new(
        r#"
        //- /kiln.toml
        [project]
        targets = ["wgsl"]

        [[shader]]
        name = "A"
        source = "A/Main/_.wgsl"

        [shader.passes.Main]
        stage = "fragment"
        entry = "fs_main"

        //- /A/Main/_.wgsl
        // the user's source
        @fragment
        fn fs_main() -> @location(0) vec4<f32> { return vec4<f32>(1.0); }

        //- /shaders/index.json
        {"the user's": "own file"}
        //- /shaders/lit.wgsl
        // another source
        "#,
    );
    let before = tree_of(dir.root());
    for out in [".", "A", "A/Main"] {
        let output = kiln(&dir, "build")
            .args(["--out"])
            .arg(dir.path(out))
            .output()
            .unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "--out {out}: {stderr}");
        assert!(
            stderr.contains("holds the project root") || stderr.contains("a file of the project"),
            "--out {out}: {stderr}"
        );
    }
    // Not a source kiln knows of, but someone's index.json: not replaced.
    let output = kiln(&dir, "build")
        .args(["--out"])
        .arg(dir.path("shaders"))
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not an index kiln wrote"), "{stderr}");
    assert!(
        tree_of(dir.root()) == before,
        "a file of the project changed"
    );

    // A file in the way that index.json does not list is left alone; that variant fails.
    let out = dir.path("out");
    std::fs::create_dir_all(out.join("A/Main")).unwrap();
    std::fs::write(out.join("A/Main/_.wgsl"), "// mine\n").unwrap();
    let build = dir.build_cli(env!("CARGO_BIN_EXE_kiln"), &[]);
    assert_eq!(build.code, 1, "{}", build.stderr);
    let report = build.report.to_string();
    assert!(
        report.contains("a file kiln did not write is in the way"),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("A/Main/_.wgsl")).unwrap(),
        "// mine\n"
    );
    // Moved away, the build writes it, and from then on it is kiln's to replace.
    std::fs::remove_file(out.join("A/Main/_.wgsl")).unwrap();
    assert_eq!(dir.build_cli(env!("CARGO_BIN_EXE_kiln"), &[]).code, 0);
    dir.edit("A/Main/_.wgsl", "1.0", "0.5");
    let build = dir.build_cli(env!("CARGO_BIN_EXE_kiln"), &[]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    assert_eq!(build.report["outputs_written"], 1);
}

/// Item 8: ten axes of 29-character keywords made 11 of 1,024 variants fail at write time
/// with "File name too long". Every variant is written now, under a name of at most 255
/// bytes, and `index.json` holds its keywords in full.
#[test]
fn long_keyword_sets_are_written() {
    let axes: Vec<String> = (0..10)
        .map(|axis| format!("[\"_\", \"{:_<29}\"]", format!("AXIS{axis:02}_ON")))
        .collect();
    let manifest = format!(
        "[project]\ntargets = [\"spirv\"]\n\n[[shader]]\nname = \"A\"\nsource = \"a.wgsl\"\n\
         axes = [{}]\n\n[shader.passes.Main]\nstage = \"fragment\"\nentry = \"fs_main\"\n",
        axes.join(", ")
    );
    let source = "@fragment\nfn fs_main() -> @location(0) vec4<f32> { return vec4<f32>(1.0); }\n";
    let dir = TempProject::from_files([("kiln.toml", manifest.as_str()), ("a.wgsl", source)]);
    let build = dir.build_cli(env!("CARGO_BIN_EXE_kiln"), &[]);
    assert_eq!(build.code, 0, "{}\n{}", build.stderr, build.report);
    assert_eq!(build.report["variants"], 1024);
    assert_eq!(build.report["failed"], 0);
    let files = tree_of(&dir.path("out/A/Main"));
    assert_eq!(files.len(), 1024);
    assert!(files.keys().all(|name| name.len() <= 255));
    let index: serde_json::Value = serde_json::from_str(&dir.read("out/index.json")).unwrap();
    let entries = index["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1024);
    let all_on = entries
        .iter()
        .find(|e| e["keywords"].as_array().is_some_and(|k| k.len() == 10))
        .unwrap();
    let path = all_on["path"].as_str().unwrap();
    assert!(path.contains('~'), "{path}");
    assert!(dir.path(&format!("out/{path}")).is_file());
    // A second build finds every output current.
    let again = dir.build_cli(env!("CARGO_BIN_EXE_kiln"), &[]);
    assert_eq!(again.report["outputs_written"], 0, "{}", again.report);
}

/// Starts `kiln watch` on `dir` and waits for its first build (saves included) to be done:
/// it says it is watching. Returns the child and its stderr so far, and the rest to come.
fn watching(
    dir: &TempProject,
) -> (
    std::process::Child,
    Vec<String>,
    std::sync::mpsc::Receiver<String>,
) {
    let mut child = kiln(dir, "watch")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen: Vec<String> = Vec::new();
    while !seen.iter().any(|line| line.starts_with("watching")) {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("no first build");
        seen.push(line);
    }
    (child, seen, rx)
}

/// Waits up to 20 s for `child` to exit; returns its exit code and all it said.
fn stopped(
    mut child: std::process::Child,
    seen: Vec<String>,
    rx: std::sync::mpsc::Receiver<String>,
) -> (Option<i32>, String) {
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if stopping.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("kiln watch outlived its project: {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = seen
        .into_iter()
        .chain(rx.iter())
        .collect::<Vec<_>>()
        .join("\n");
    (status.code(), said)
}

/// Item 14: after `rm -rf` of the project, `kiln watch` kept running and never rebuilt the
/// project made again at the same path. It stops now, saying why.
#[test]
fn watch_stops_when_its_project_directory_is_removed() {
    let dir = project();
    let (child, seen, rx) = watching(&dir);
    // Again if a rebuild (of the first build's own late events) was writing meanwhile, as
    // `rm -rf` would be run again.
    let mut tries = 0;
    while let Err(e) = std::fs::remove_dir_all(dir.root()) {
        tries += 1;
        assert!(tries < 50, "cannot remove the project: {e}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, said) = stopped(child, seen, rx);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("was removed or replaced while watching"),
        "{said}"
    );
}

/// Item 14, the project made again at its path (moved away first, as a fresh checkout
/// replaces an old one): watch stops and makes nothing in the new directory. (Removed file
/// by file instead, its deletions can start a rebuild that is still writing when the new
/// directory appears: the watch stops after it.)
#[test]
fn watch_stops_when_its_project_directory_is_replaced_and_builds_nothing_there() {
    let dir = project();
    let root = dir.root().to_owned();
    let manifest = std::fs::read(dir.path("kiln.toml")).unwrap();
    let source = std::fs::read(dir.path("a.wgsl")).unwrap();
    let (child, seen, rx) = watching(&dir);
    let old = root.with_extension("old");
    std::fs::rename(&root, &old).unwrap();
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("kiln.toml"), manifest).unwrap();
    std::fs::write(root.join("a.wgsl"), source).unwrap();
    std::fs::remove_dir_all(&old).unwrap();
    let (code, said) = stopped(child, seen, rx);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("was removed or replaced while watching"),
        "{said}"
    );
    assert!(
        !root.join("out").exists(),
        "it built into the new directory"
    );
}
