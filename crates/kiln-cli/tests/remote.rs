//! The remote cache and farm builds against a real `redis-server` (started by each test on
//! its own loopback port): end to end with the real `kiln` binary, a new process per
//! build, each with its own empty local store unless said otherwise; and the faults a
//! shared cache meets (down, stopped mid-build, slow, full, read-only, damaged values).

mod support;

use kiln_test_support::{CliBuild, TempProject};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::redis::RedisServer;

const SHADER: &str = r#"#include "common.wgsl"

struct VsOut {
    @builtin(position) position: vec4<f32>,
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs_main(@location(0) position: vec3<f32>) -> VsOut {
    var out: VsOut;
    out.position = vec4<f32>(position * tweak(), 1.0);
    out.uv = position.xy;
    return out;
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    var color = vec4<f32>(in.uv, 0.0, 1.0) * tweak();
#ifdef FOG
    color = mix(color, vec4<f32>(0.5, 0.5, 0.5, 1.0), 0.25);
#endif
    return color;
}
"#;

const COMMON: &str = r#"fn tweak() -> f32 {
    var k = 1.0;
#ifdef SKIN
    k = k * 1.5;
#endif
#ifdef L2
    k = k + 2.0;
#endif
#ifdef L3
    k = k + 3.0;
#endif
#ifdef L4
    k = k + 4.0;
#endif
#ifdef A
    k = k * 0.25;
#endif
#ifdef B
    k = k - 0.125;
#endif
    return k;
}
"#;

/// 64 keyword sets x 2 passes = 128 variants, for 3 targets: 128 distinct compile jobs
/// (each pass compiles the whole text, so every keyword changes both).
fn manifest(cache: &str) -> String {
    format!(
        r#"{cache}
[project]
targets = ["spirv", "msl", "hlsl"]

[[shader]]
name = "Surf"
source = "shaders/surf.wgsl"
axes = [["_", "FOG"], ["_", "SKIN"], ["L1", "L2", "L3", "L4"], ["_", "A"], ["_", "B"]]

[shader.passes.Vertex]
stage = "vertex"
entry = "vs_main"

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
"#
    )
}

fn new_project() -> TempProject {
    with_cache("")
}

fn with_cache(cache: &str) -> TempProject {
    TempProject::from_files([
        ("kiln.toml", manifest(cache)),
        ("shaders/surf.wgsl", SHADER.to_owned()),
        ("shaders/common.wgsl", COMMON.to_owned()),
    ])
}

/// `kiln build --manifest <project> --json <extra>`, not yet run.
fn command(project: &TempProject, extra: &[&str]) -> Command {
    let mut command = project.command(env!("CARGO_BIN_EXE_kiln"), "build");
    command.arg("--json").args(extra);
    command
}

fn run_build(project: &TempProject, extra: &[&str]) -> Build {
    Build::of(command(project, extra).output().unwrap())
}

/// The output directory (the stat records aside: they hold inodes and times).
fn out(project: &TempProject) -> BTreeMap<String, Vec<u8>> {
    let mut files = project.tree();
    files.remove(".kiln-stat");
    files
}

struct Build {
    report: Value,
    code: i32,
    stderr: String,
}

impl Build {
    fn of(output: Output) -> Self {
        let CliBuild {
            report,
            code,
            stderr,
        } = CliBuild::of(output);
        Build {
            report,
            code,
            stderr,
        }
    }

    fn n(&self, field: &str) -> u64 {
        self.report[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field}: {}", self.report))
    }

    fn remote(&self, field: &str) -> u64 {
        self.report["remote"][field]
            .as_u64()
            .unwrap_or_else(|| panic!("remote.{field}: {}", self.report))
    }

    fn warnings(&self) -> Vec<String> {
        self.report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["severity"] == "warning")
            .map(|d| d["message"].as_str().unwrap().to_owned())
            .collect()
    }

    fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "{}\n{}", self.report, self.stderr);
        self
    }
}

/// The outputs of a build of the project on one machine with no remote.
fn reference() -> BTreeMap<String, Vec<u8>> {
    let project = new_project();
    let build = run_build(&project, &["--no-remote"]);
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    out(&project)
}

#[test]
fn a_warm_build_from_the_remote_fills_an_empty_local_store() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    let first = new_project();
    let cold = run_build(&first, &["--remote", &url, "--remote-push"]);
    cold.ok();
    assert_eq!(cold.n("compiled"), 128);
    // 128 jobs x 3 targets, uploaded in pipelines, not one round trip each.
    assert_eq!(cold.remote("uploaded"), 384);
    assert_eq!(redis.keys("kiln:v2:a:*").len(), 384);
    assert!(cold.remote("round_trips") < 20, "{}", cold.report);
    assert!(cold.warnings().is_empty(), "{:?}", cold.warnings());

    // Another machine: empty local store, the URL from the environment.
    let second = new_project();
    let warm = Build::of(
        command(&second, &[])
            .env("KILN_REMOTE", &url)
            .output()
            .unwrap(),
    );
    warm.ok();
    assert_eq!(warm.n("compiled"), 0);
    assert_eq!(warm.remote("fetched"), 384);
    assert!(warm.remote("round_trips") < 10, "{}", warm.report);
    assert_eq!(out(&second), out(&first));
    assert_eq!(out(&second), reference());

    // What it fetched is in its local store now: without the remote, nothing compiles.
    std::fs::remove_dir_all(second.path("out")).unwrap();
    let local = run_build(&second, &["--no-remote"]);
    local.ok();
    assert_eq!(local.n("compiled"), 0);
    assert_eq!(out(&second), out(&first));
}

#[test]
fn the_manifest_names_the_remote_and_the_command_line_overrides_it() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let cache = format!("[cache]\nremote = \"{}\"\n", redis.url());
    let project = with_cache(&cache);
    run_build(&project, &["--remote-push"]).ok();
    assert_eq!(redis.keys("kiln:v2:a:*").len(), 384);
    let other = with_cache(&cache);
    let off = run_build(&other, &["--no-remote"]);
    off.ok();
    assert_eq!(off.n("compiled"), 128);
    assert!(off.report["remote"].is_null());
}

#[test]
fn four_shards_then_an_assembling_build_that_compiles_nothing() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    // Four shard processes at once, each with its own empty local store.
    let shards: Vec<TempProject> = (0..4).map(|_| new_project()).collect();
    let children: Vec<std::process::Child> = shards
        .iter()
        .enumerate()
        .map(|(i, project)| {
            let mut command = command(project, &["--remote", &url]);
            if i % 2 == 0 {
                command.args(["--shard", &format!("{i}/4")]);
            } else {
                // As a Kubernetes Indexed Job passes it.
                command
                    .env("JOB_COMPLETION_INDEX", i.to_string())
                    .env("KILN_SHARD_COUNT", "4");
            }
            command.stdout(std::process::Stdio::piped());
            command.stderr(std::process::Stdio::piped());
            command.spawn().unwrap()
        })
        .collect();
    let mut compiled = 0;
    let mut mine = Vec::new();
    for (i, child) in children.into_iter().enumerate() {
        let build = Build::of(child.wait_with_output().unwrap());
        build.ok();
        assert_eq!(build.report["shard"]["index"], i as u64);
        assert_eq!(build.report["shard"]["jobs"], 128);
        assert_eq!(build.n("outputs_written"), 0);
        assert!(!shards[i].path("out").exists(), "a shard writes no outputs");
        compiled += build.n("compiled");
        mine.push(build.report["shard"]["mine"].as_u64().unwrap());
    }
    // Every distinct job compiled exactly once over the farm, in nearly equal shares.
    assert_eq!(compiled, 128, "{mine:?}");
    assert_eq!(mine.iter().sum::<u64>(), 128);
    assert!(mine.iter().all(|m| (28..=36).contains(m)), "{mine:?}");

    // The assembling build runs in CI too: it writes (confirms the shards' costs).
    let assemble = new_project();
    let build = run_build(&assemble, &["--remote", &url, "--remote-push"]);
    build.ok();
    assert_eq!(build.n("compiled"), 0);
    assert_eq!(build.remote("fetched"), 384);
    assert_eq!(out(&assemble), reference());
    // The shards' compile times are confirmed for the next farm run's partition.
    assert_eq!(redis.keys("kiln:v2:cost:*").len(), 128);
}

#[test]
fn a_shard_count_of_four_billion_costs_nothing_per_shard() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    // Shard 0 of 2^32 gets one job (each job a shard of its own); the last gets none. Both
    // once aborted on a 137 GB allocation, through the flag and through the environment.
    let first = run_build(
        &new_project(),
        &["--remote", &url, "--shard", "0/4294967296"],
    );
    first.ok();
    assert_eq!(first.report["shard"]["mine"], 1, "{}", first.report);
    assert_eq!(first.n("compiled"), 1);
    let project = new_project();
    let mut last = command(&project, &["--remote", &url]);
    last.env("JOB_COMPLETION_INDEX", "4294967295")
        .env("KILN_SHARD_COUNT", "4294967296");
    let last = Build::of(last.output().unwrap());
    last.ok();
    assert_eq!(last.report["shard"]["mine"], 0, "{}", last.report);
    assert_eq!(last.n("compiled"), 0);
}

#[test]
fn a_shard_uploads_its_share_also_from_its_own_local_store() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    // A reused runner: its local store already has everything.
    let project = new_project();
    run_build(&project, &["--no-remote"]).ok();
    let build = run_build(&project, &["--remote", &redis.url(), "--shard", "0/1"]);
    build.ok();
    assert_eq!(build.n("compiled"), 0);
    assert_eq!(build.remote("uploaded"), 384);
    let assemble = new_project();
    let build = run_build(&assemble, &["--remote", &redis.url()]);
    assert_eq!(build.n("compiled"), 0);
    assert_eq!(out(&assemble), out(&project));
}

#[test]
fn a_shard_needs_a_writable_remote() {
    let project = new_project();
    let build = command(&project, &["--shard", "0/2"]).output().unwrap();
    assert_eq!(build.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&build.stderr).contains("needs a remote cache"));
    let build = command(
        &project,
        &["--shard", "2/2", "--remote", "redis://127.0.0.1:1/0"],
    )
    .output()
    .unwrap();
    assert_eq!(build.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&build.stderr).contains("index counts from 0"));
    // A shard that cannot upload its share failed: the job engine runs it again.
    let port = support::redis::free_port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let build = run_build(&project, &["--shard", "0/2", "--remote", &url]);
    assert_eq!(build.code, 1, "{}", build.report);
    assert!(build.n("compiled") > 0);
    assert!(
        build.stderr.contains("could not upload its share"),
        "{}",
        build.stderr
    );
}

#[test]
fn a_remote_that_is_down_costs_one_warning_and_never_a_password() {
    let port = support::redis::free_port();
    let url = format!("redis://:hunter22@127.0.0.1:{port}/0");
    let project = new_project();
    let build = run_build(&project, &["--remote", &url]);
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("unavailable"), "{warnings:?}");
    assert!(warnings[0].contains(&format!("redis://***@127.0.0.1:{port}/0")));
    let everything = format!("{}{}", build.report, build.stderr);
    assert!(!everything.contains("hunter22"), "{everything}");
    assert_eq!(out(&project), reference());
}

#[test]
fn a_remote_stopped_mid_build_leaves_a_correct_build_and_one_warning() {
    let Some(mut redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    let project = new_project();
    let child = command(
        &project,
        &["--remote", &url, "--remote-push", "--jobs", "1"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Once the build has asked the remote for its artifacts, it compiles; then the
    // server goes away, before the uploads.
    let started = Instant::now();
    while redis.calls("get") == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "no fetch came");
        std::thread::sleep(Duration::from_millis(5));
    }
    redis.stop();
    let build = Build::of(child.wait_with_output().unwrap());
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    assert_eq!(build.remote("uploaded"), 0);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("unavailable"), "{warnings:?}");
    assert_eq!(out(&project), reference());
}

#[test]
fn a_remote_that_never_answers_times_out_once() {
    // Accepts connections, never answers: a hung server.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/0", listener.local_addr().unwrap());
    let project = new_project();
    let started = Instant::now();
    let build = run_build(&project, &["--remote", &url, "--remote-timeout-ms", "300"]);
    let elapsed = started.elapsed();
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    assert_eq!(build.warnings().len(), 1, "{:?}", build.warnings());
    // One timeout, not one per artifact (384 of them would take over a minute).
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
    assert_eq!(out(&project), reference());
    drop(listener);
}

#[test]
fn damaged_values_and_values_under_another_key_are_rejected_and_rebuilt() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    run_build(&new_project(), &["--remote", &url, "--remote-push"]).ok();
    let keys = redis.keys("kiln:v2:a:*");
    assert_eq!(keys.len(), 384);
    // One value with a flipped byte; another replaced by a third key's (intact) value.
    let mut damaged = redis.get(&keys[0]);
    let last = damaged.len() - 1;
    damaged[last] ^= 0x40;
    redis.set(&keys[0], &damaged);
    let foreign = redis.get(&keys[2]);
    redis.set(&keys[1], &foreign);

    let project = new_project();
    let build = run_build(&project, &["--remote", &url, "--remote-push"]);
    build.ok();
    assert_eq!(build.remote("rejected"), 2, "{}", build.report);
    assert_eq!(build.remote("fetched"), 382);
    // The two jobs are compiled again (each for the target it lacked) and re-uploaded.
    assert_eq!(build.n("compiled"), 2);
    assert_eq!(build.remote("uploaded"), 2);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("2 values rejected"), "{warnings:?}");
    assert_eq!(out(&project), reference());
    // Repaired: the next machine gets everything.
    let again = run_build(&new_project(), &["--remote", &url]);
    assert_eq!(again.n("compiled"), 0);
    assert_eq!(again.remote("rejected"), 0);
}

#[test]
fn a_read_only_remote_is_read_and_never_written() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    let first = new_project();
    let build = run_build(&first, &["--remote", &url, "--remote-read-only"]);
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    assert!(redis.keys("*").is_empty(), "{:?}", redis.keys("*"));
    assert!(build.warnings().is_empty());
    // Read-only is the default: without `--remote-push` (or KILN_REMOTE_PUSH=1) nothing is
    // written either.
    let plain = run_build(&new_project(), &["--remote", &url]);
    plain.ok();
    assert!(plain.report["remote"]["read_only"].as_bool().unwrap());
    assert_eq!(plain.remote("uploaded"), 0);
    assert!(redis.keys("*").is_empty(), "{:?}", redis.keys("*"));
    let pushed = Build::of(
        command(&new_project(), &["--remote", &url])
            .env("KILN_REMOTE_PUSH", "1")
            .output()
            .unwrap(),
    );
    pushed.ok();
    assert_eq!(pushed.remote("uploaded"), 384);
    redis::cmd("FLUSHALL")
        .query::<()>(&mut redis.con())
        .unwrap();

    // CI fills it; a developer whose kiln.toml says read_only reads it.
    run_build(&new_project(), &["--remote", &url, "--remote-push"]).ok();
    let before = redis.keys("*").len();
    let dev = with_cache(&format!("[cache]\nremote = \"{url}\"\nread_only = true\n"));
    std::fs::write(
        dev.path("shaders/common.wgsl"),
        COMMON.replace("k * 0.25", "k * 0.75"),
    )
    .unwrap();
    let build = run_build(&dev, &[]);
    build.ok();
    assert!(build.report["remote"]["read_only"].as_bool().unwrap());
    // The edit changed the 64 variants with `A`: those compile, the rest are fetched.
    assert_eq!(build.n("compiled"), 64);
    assert_eq!(build.remote("uploaded"), 0);
    assert_eq!(redis.keys("*").len(), before);
}

#[test]
fn a_full_remote_refuses_writes_with_one_warning() {
    let Some(redis) =
        RedisServer::start(&["--maxmemory", "1200kb", "--maxmemory-policy", "noeviction"])
    else {
        return;
    };
    let project = new_project();
    let build = run_build(&project, &["--remote", &redis.url(), "--remote-push"]);
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    assert!(build.remote("upload_failed") > 0, "{}", build.report);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("refused writes"), "{warnings:?}");
    assert!(warnings[0].contains("OOM"), "{warnings:?}");
    assert_eq!(out(&project), reference());
}

/// `rediss://` with a password against a TLS-only `redis-server` whose certificate a test CA
/// signed: trusted through `SSL_CERT_FILE`, it works; untrusted, it is one warning.
#[test]
fn tls_with_a_password_works_and_an_unknown_issuer_is_refused() {
    if Command::new("openssl").arg("version").output().is_err() {
        assert!(
            std::env::var("KILN_REQUIRE_REDIS").as_deref() != Ok("1"),
            "KILN_REQUIRE_REDIS=1 but openssl is not installed"
        );
        eprintln!("skipped: openssl is not installed");
        return;
    }
    if RedisServer::start(&[]).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let openssl = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openssl {args:?}");
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=kiln test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        path("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    let port = support::redis::free_port();
    let mut server = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(["--tls-auth-clients", "no", "--requirepass", "tls-secret-77"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--tls-cert-file")
        .arg(path("server.crt"))
        .arg("--tls-key-file")
        .arg(path("server.key"))
        .arg("--dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "TLS redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("rediss://:tls-secret-77@127.0.0.1:{port}/0");
    let trusted = |project: &TempProject| {
        Build::of(
            command(project, &["--remote", &url, "--remote-push"])
                .env("SSL_CERT_FILE", path("ca.crt"))
                .output()
                .unwrap(),
        )
    };
    let first = trusted(&new_project());
    first.ok();
    assert_eq!(first.remote("uploaded"), 384, "{}", first.report);
    let second = trusted(&new_project());
    assert_eq!(second.n("compiled"), 0);
    assert_eq!(second.remote("fetched"), 384);

    let untrusted = new_project();
    let build = Build::of(
        command(&untrusted, &["--remote", &url])
            .env("SSL_CERT_FILE", path("server.key"))
            .output()
            .unwrap(),
    );
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("certificate"), "{warnings:?}");
    assert!(!format!("{}{}", build.report, build.stderr).contains("tls-secret-77"));
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn a_misspelt_cache_option_is_an_error_with_its_line() {
    let project = with_cache("[cache]\nremot = \"redis://127.0.0.1:1/0\"\n");
    let output = command(&project, &[]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("remot"), "{stderr}");
    assert!(stderr.contains("kiln.toml:2:1"), "{stderr}");
}

/// A three-node Redis Cluster on loopback: pipelines reach each key's node, and a machine
/// that knows only some of the nodes still finds everything.
#[test]
fn a_three_node_cluster_serves_a_warm_build() {
    let cluster_options = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ];
    let Some(first) = RedisServer::start(&cluster_options) else {
        return;
    };
    let nodes = [
        first,
        RedisServer::start(&cluster_options).unwrap(),
        RedisServer::start(&cluster_options).unwrap(),
    ];
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let created = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addresses)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stdout)
    );
    let started = Instant::now();
    for node in &nodes {
        loop {
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut node.con())
                .unwrap();
            if info.contains("cluster_state:ok") {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "cluster not ready: {info}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let url = format!("redis+cluster://{}", addresses.join(","));
    let cold = new_project();
    let build = run_build(&cold, &["--remote", &url, "--remote-push"]);
    build.ok();
    assert_eq!(build.remote("uploaded"), 384, "{}", build.report);
    // Spread over the three nodes.
    for node in &nodes {
        let keys = node.keys("kiln:v2:a:*").len();
        assert!((60..=200).contains(&keys), "{keys} keys on one node");
    }
    let warm = new_project();
    let url = format!("redis+cluster://{}", addresses[1]);
    let build = run_build(&warm, &["--remote", &url]);
    build.ok();
    assert_eq!(build.n("compiled"), 0);
    assert_eq!(build.remote("fetched"), 384);
    assert_eq!(out(&warm), out(&cold));
}

/// Issue 25, item 9: a server that answers one byte every 200 ms kept a build with
/// `--remote-timeout-ms` running forever (the timeout was per read). Now one deadline covers
/// each round trip: the build gives up on the remote once, compiles locally, and takes about
/// as long as a build without a remote plus that one deadline.
#[test]
fn a_server_that_trickles_its_answer_never_hangs_the_build() {
    let server = kiln_test_support::fake_server::FakeServer::trickling(
        b"+PONG\r\n",
        b"$1000000\r\nxxxxxxxxxxxxxxxxxxxxxxxx",
        Duration::from_millis(200),
    );
    let started = Instant::now();
    let expected = reference();
    let alone = started.elapsed();

    let project = new_project();
    let started = Instant::now();
    let mut child = command(
        &project,
        &["--remote", &server.url(), "--remote-timeout-ms", "2000"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the build was still waiting on the remote after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    let build = Build::of(child.wait_with_output().unwrap());
    build.ok();
    assert_eq!(build.n("compiled"), 128);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("unavailable (no complete answer within 2000 ms)"),
        "{warnings:?}"
    );
    assert_eq!(out(&project), expected);
    // The remote cost one deadline (2 s); the bound leaves room for a loaded machine.
    assert!(
        elapsed < alone + Duration::from_secs(6),
        "{elapsed:?} with the remote, {alone:?} without"
    );
}

/// Issue 25, item 11: the credentials are everything up to the last `@`, whatever they
/// hold; a URL that cannot be used is never printed with them.
#[test]
fn a_password_holding_url_delimiters_is_never_printed() {
    let port = support::redis::free_port();
    let project = new_project();
    for delimiter in ["/", "#", "?", ":"] {
        let url = format!("redis://:Tr0ub4dor&3{delimiter}x@127.0.0.1:{port}/0");
        // Each with an empty local store, so that it asks the remote.
        let build = Build::of(
            command(&new_project(), &[])
                .env("KILN_REMOTE", &url)
                .output()
                .unwrap(),
        );
        build.ok();
        let everything = format!("{}{}", build.report, build.stderr);
        assert!(!everything.contains("Tr0ub4dor"), "{everything}");
        let warnings = build.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains(&format!("redis://***@127.0.0.1:{port}/0")),
            "{warnings:?}"
        );
    }
    // URLs that do not parse: refused (exit 2), the password still hidden.
    for url in [
        "redis://:Tr0ub4dor&3/x@host:notaport/0",
        "redis://:Tr0ub4dor&3#x@host/0#insecure",
        "redis://:Tr0ub4dor&3?x@host/zero",
        "redis:/:Tr0ub4dor&3@host/0",
    ] {
        let output = command(&project, &[])
            .env("KILN_REMOTE", url)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{url}");
        let everything = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!everything.contains("Tr0ub4dor"), "{everything}");
        assert!(everything.contains("remote cache"), "{everything}");
    }
}

/// Issue 25, item 11: a server with `requirepass` and no password in the URL says so (it
/// said "no answer to PING"); a wrong password containing `:` is named as such, not cut into
/// pieces ("Pass*** authentication failed").
#[test]
fn a_password_protected_server_says_what_is_wrong() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("right-password-1")
        .query::<()>(&mut redis.con())
        .unwrap();
    let port = redis.port;
    let warning = |url: &str| {
        let build = run_build(&new_project(), &["--remote", url]);
        build.ok();
        let everything = format!("{}{}", build.report, build.stderr);
        let warnings = build.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        (warnings[0].clone(), everything)
    };
    let (none, _) = warning(&format!("redis://127.0.0.1:{port}/0"));
    assert!(none.contains("authentication required"), "{none}");
    let (wrong, everything) = warning(&format!("redis://:ss:word@127.0.0.1:{port}/0"));
    assert!(
        wrong.contains("authentication failed (wrong user name or password)"),
        "{wrong}"
    );
    assert!(
        !everything.contains("ss:word") && !everything.contains("Pass***"),
        "{everything}"
    );
    let right = run_build(
        &new_project(),
        &[
            "--remote",
            &format!("redis://:right-password-1@127.0.0.1:{port}/0"),
            "--remote-push",
        ],
    );
    right.ok();
    assert_eq!(right.remote("uploaded"), 384, "{}", right.report);
    assert!(right.warnings().is_empty(), "{:?}", right.warnings());
}

/// A value as an attacker with write access makes it: the documented format, the victim's
/// key, another artifact's payload (valid SPIR-V, the wrong shader), a correct checksum,
/// no MAC.
fn forge(redis_key: &str, payload: &[u8]) -> Vec<u8> {
    let rest = redis_key.strip_prefix("kiln:v2:a:").unwrap();
    let (ns, hex) = rest.rsplit_once(':').unwrap();
    let key: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let mut value = b"kilnrv2\n".to_vec();
    value.extend_from_slice(&(ns.len() as u32).to_le_bytes());
    value.extend_from_slice(ns.as_bytes());
    value.extend_from_slice(&key);
    value.push(0);
    value.extend_from_slice(&[0; 32]);
    value.extend_from_slice(blake3::hash(payload).as_bytes());
    value.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    value.extend_from_slice(payload);
    value
}

/// The payload of a value read from the remote.
fn payload_of(value: &[u8]) -> Vec<u8> {
    let ns_len = u32::from_le_bytes(value[8..12].try_into().unwrap()) as usize;
    value[12 + ns_len + 32 + 1 + 32 + 32 + 8..].to_vec()
}

/// Issue 25, item 12: a value forged from another artifact was "fetched, 0 rejected",
/// written to `out/` and kept in the local store. With `KILN_REMOTE_KEY` on the machines
/// that read (and on CI, which writes), it is rejected, compiled locally, and neither
/// `out/` nor the local store ever holds it.
#[test]
fn a_forged_value_is_rejected_when_a_key_is_configured() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    const SECRET: &str = "6a1f0c2e9b8d7a6f5e4d3c2b1a0f9e8d";
    let ci = Build::of(
        command(&new_project(), &["--remote", &url, "--remote-push"])
            .env("KILN_REMOTE_KEY", SECRET)
            .output()
            .unwrap(),
    );
    ci.ok();
    assert_eq!(ci.remote("uploaded"), 384);
    assert_eq!(ci.report["remote"]["keyed"], true);

    // The attacker replaces one SPIR-V artifact with another job's.
    let spirv: Vec<String> = redis
        .keys("kiln:v2:a:*")
        .into_iter()
        .filter(|k| k.starts_with("kiln:v2:a:spirv"))
        .collect();
    let victim = &spirv[0];
    let donor = payload_of(&redis.get(&spirv[1]));
    redis.set(victim, &forge(victim, &donor));
    // Or signs one with a guessed MAC.
    let mut guessed = forge(&spirv[2], &payload_of(&redis.get(&spirv[3])));
    let ns_len = u32::from_le_bytes(guessed[8..12].try_into().unwrap()) as usize;
    guessed[12 + ns_len + 32] = 1;
    guessed[12 + ns_len + 33] = 0x5a;
    redis.set(&spirv[2], &guessed);
    let expected = reference();

    // Without the key, the forgery is served: the exposure the key closes.
    let exposed = run_build(&new_project(), &["--remote", &url]);
    exposed.ok();
    assert_eq!(exposed.remote("rejected"), 0, "{}", exposed.report);

    let developer = new_project();
    let build = Build::of(
        command(&developer, &["--remote", &url])
            .env("KILN_REMOTE_KEY", SECRET)
            .output()
            .unwrap(),
    );
    build.ok();
    assert!(build.report["remote"]["read_only"].as_bool().unwrap());
    assert_eq!(build.remote("rejected"), 2, "{}", build.report);
    assert_eq!(build.remote("fetched"), 382);
    assert_eq!(build.n("compiled"), 2);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("no valid MAC"), "{warnings:?}");
    assert_eq!(out(&developer), expected);
    // The local store kept what was compiled, not what was forged.
    std::fs::remove_dir_all(developer.path("out")).unwrap();
    let local = run_build(&developer, &["--no-remote"]);
    local.ok();
    assert_eq!(local.n("compiled"), 0);
    assert_eq!(out(&developer), expected);
    // Read-only by default: the developer's build did not repair (or touch) the remote.
    assert_eq!(redis.get(victim), forge(victim, &donor));
}

#[test]
fn a_short_remote_key_is_refused() {
    let project = new_project();
    let output = command(&project, &["--remote", "redis://127.0.0.1:1/0"])
        .env("KILN_REMOTE_KEY", "hunter2")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("KILN_REMOTE_KEY is shorter than 16 bytes"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    // Empty is unset (a CI job that is not given the secret still builds, reading only).
    let build = Build::of(
        command(&project, &["--remote", "redis://127.0.0.1:1/0"])
            .env("KILN_REMOTE_KEY", "")
            .output()
            .unwrap(),
    );
    build.ok();
    assert_eq!(build.report["remote"]["keyed"], false);
}

/// Issue 25, item 10, from the command line: `--remote-max-value-bytes` caps what a value
/// may be; every value over it is rejected unread and compiled locally.
#[test]
fn values_over_the_configured_cap_are_rejected_and_compiled_locally() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let url = redis.url();
    run_build(&new_project(), &["--remote", &url, "--remote-push"]).ok();
    let project = new_project();
    let build = run_build(
        &project,
        &["--remote", &url, "--remote-max-value-bytes", "100"],
    );
    build.ok();
    assert_eq!(build.remote("rejected"), 384, "{}", build.report);
    assert_eq!(build.n("compiled"), 128);
    let warnings = build.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("over the 100-byte cap"),
        "{warnings:?}"
    );
    assert_eq!(out(&project), reference());
}
