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
    assert_eq!(status.code(), Some(2), "a bad manifest exits 2, even unheard");
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
    assert!(stderr_of(&output).contains("not a regular file (a device)"), "{}", stderr_of(&output));

    let fifo = dir.path("fifo.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let output = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["build", "--manifest"])
        .arg(&fifo)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("not a regular file (a FIFO)"), "{}", stderr_of(&output));

    // A regular file past the cap is refused before it is read whole.
    let huge = dir.path("huge.toml");
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(kiln::manifest::MAX_MANIFEST_BYTES + 1).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["build", "--manifest"])
        .arg(&huge)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("larger than the 16 MiB"), "{}", stderr_of(&output));
    assert!(started.elapsed() < Duration::from_secs(60));
}
