//! Issue 9 at the command line: a closed stdout, absurd `--jobs`, SIGTERM.

use kiln_test_support::TempProject;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn project() -> TempProject {
    TempProject::new(
        r#"
        //- /kiln.toml
        [project]
        targets = ["spirv"]

        [[shader]]
        name = "Lit"
        source = "lit.wgsl"
        axes = [["_", "FOG"]]

        [shader.passes.Forward]
        stage = "fragment"
        entry = "fs_main"

        //- /lit.wgsl
        @fragment
        fn fs_main() -> @location(0) vec4<f32> {
        #ifdef FOG
            return vec4<f32>(0.5);
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

/// Item 6: `kiln build --json | true` used to panic on the broken pipe.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = project();
    let mut child = kiln(&dir, "build")
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before kiln writes its report.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(dir.path("out/Lit/Forward/FOG.spv").is_file());
}

/// Item 6: `--jobs 100000` used to start 100,000 threads (10,000 took 93 s).
#[test]
fn absurd_job_counts_are_refused_at_once() {
    let dir = project();
    for jobs in ["100000", "0", "many"] {
        let started = Instant::now();
        let output = kiln(&dir, "build").args(["--jobs", jobs]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("--jobs"), "{stderr}");
        assert!(
            stderr.contains("use 1 to 256") || stderr.contains("not a number"),
            "{stderr}"
        );
        assert!(started.elapsed() < Duration::from_secs(30));
    }
    let output = kiln(&dir, "build")
        .args(["--jobs", "256"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
}

/// Item 7: SIGTERM stops `kiln watch` as cleanly as SIGINT.
#[test]
fn sigterm_stops_watch_cleanly() {
    let dir = project();
    let mut child = kiln(&dir, "watch")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Wait until it watches (after the first build).
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("kiln watch did not start");
        if line.starts_with("watching") {
            break;
        }
    }
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "kiln watch ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(rest.iter().any(|l| l == "stopped"), "{rest:?}");
}
