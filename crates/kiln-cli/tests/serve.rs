//! `kiln serve` end to end, through a real HTTP client (kiln-client's ureq agent) and a real
//! event-stream consumer: fetch, 304, on-demand compiles of unlisted sets, errors, the
//! events an edit sends (and the none a comment edit sends), concurrency, usage feeding a
//! build, a kill -9 mid-compile, and the listener's limits.

use kiln_client::{Client, Error, Event};
use kiln_test_support::TempProject;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `Lit` declares FOG and SKIN but lists only the empty set: the others are legal, unbuilt.
const MANIFEST: &str = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Lit"
source = "lit.wgsl"
keywords = ["FOG", "SKIN"]
variants = [[]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[[shader]]
name = "Broken"
source = "broken.wgsl"
variants = [[]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
"#;

const LIT: &str = r#"@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var c = vec4<f32>(1.0);
#ifdef SKIN
    c = c * 0.5;
#endif
#ifdef FOG
    c = c * 0.25;
#endif
    return c;
}
"#;

const BROKEN: &str =
    "@fragment\nfn fs_main() -> @location(0) vec4<f32> {\n    return undefined_value;\n}\n";

/// A running `kiln serve --json` and its stdout lines.
struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    address: String,
}

impl Server {
    fn start(dir: &TempProject, extra: &[&str]) -> Self {
        let mut child = dir
            .command(env!("CARGO_BIN_EXE_kiln"), "serve")
            .args(["--json", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            lines,
            address: String::new(),
        };
        let listening = server.next();
        server.address = listening["listening"].as_str().unwrap().to_owned();
        // The first preparation's report: the project is ready.
        let first = server.next();
        assert!(first.get("watched").is_some(), "{first}");
        server
    }

    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("no line from kiln serve");
        serde_json::from_str(&line).unwrap()
    }

    fn client(&self) -> Client {
        Client::new(&format!("http://{}", self.address))
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_atomically(dir: &TempProject, name: &str, text: &str) {
    let temp = format!("{name}.tmp");
    std::fs::write(dir.path(&temp), text).unwrap();
    std::fs::rename(dir.path(&temp), dir.path(name)).unwrap();
}

fn server_error(result: Result<kiln_client::Artifact, Error>) -> (u16, String, Value) {
    match result {
        Err(Error::Server {
            status, kind, body, ..
        }) => (status, kind, body),
        other => panic!("expected an error answer, got {other:?}"),
    }
}

fn project() -> TempProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("lit.wgsl", LIT),
        ("broken.wgsl", BROKEN),
    ])
}

#[test]
fn variants_are_fetched_revalidated_compiled_on_demand_and_refused_by_name() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let client = server.client();

    // FOG+SKIN is legal but not listed: compiled on demand, once, whatever the spelling.
    let fetched = client
        .get("Lit", "Forward", &["SKIN", "FOG"], "spirv")
        .unwrap();
    assert_eq!(
        &fetched.bytes[..4],
        &[0x03, 0x02, 0x23, 0x07],
        "SPIR-V magic"
    );
    assert_eq!(fetched.digest.len(), 12);
    assert_eq!(
        fetched.blake3,
        blake3::hash(&fetched.bytes).to_hex().as_str()
    );
    let again = client
        .get("Lit", "Forward", &["FOG", "SKIN", "FOG", "_"], "spirv")
        .unwrap();
    assert_eq!(again, fetched);
    let status = client.status().unwrap();
    assert_eq!(status["compiled"], 1, "{status}");
    assert_eq!(status["hits"], 1, "{status}");

    // Revalidation by digest.
    let unchanged = client
        .get_if_changed(
            "Lit",
            "Forward",
            &["FOG", "SKIN"],
            "spirv",
            Some(&fetched.digest),
        )
        .unwrap();
    assert!(unchanged.is_none());
    let stale = client
        .get_if_changed(
            "Lit",
            "Forward",
            &["FOG", "SKIN"],
            "spirv",
            Some("000000000000"),
        )
        .unwrap();
    assert_eq!(stale.as_ref(), Some(&fetched));

    // Names that do not exist: 404 naming the legal ones.
    let (code, kind, body) = server_error(client.get("Unlit", "Forward", &[""; 0], "spirv"));
    assert_eq!((code, kind.as_str()), (404, "unknown_shader"), "{body}");
    assert_eq!(
        body["known"],
        serde_json::json!(["Lit", "Broken"]),
        "{body}"
    );
    let (code, kind, body) = server_error(client.get("Lit", "Shadow", &[""; 0], "spirv"));
    assert_eq!((code, kind.as_str()), (404, "unknown_pass"), "{body}");
    assert_eq!(body["known"], serde_json::json!(["Forward"]), "{body}");
    let (code, kind, body) = server_error(client.get("Lit", "Forward", &["RAIN"], "spirv"));
    assert_eq!((code, kind.as_str()), (404, "unknown_keyword"), "{body}");
    assert_eq!(body["known"], serde_json::json!(["FOG", "SKIN"]), "{body}");
    let (code, kind, body) = server_error(client.get("Lit", "Forward", &[""; 0], "msl"));
    assert_eq!((code, kind.as_str()), (404, "unknown_target"), "{body}");
    assert_eq!(body["known"], serde_json::json!(["spirv"]), "{body}");
    let (code, kind, _) = server_error(client.get("Lit", "Forward", &["no good"], "spirv"));
    assert_eq!((code, kind.as_str()), (400, "invalid_keyword"));

    // A compile error: 422 with the located diagnostics.
    let (code, kind, body) = server_error(client.get("Broken", "Forward", &[""; 0], "spirv"));
    assert_eq!((code, kind.as_str()), (422, "compile_failed"), "{body}");
    let diagnostic = &body["diagnostics"][0];
    assert_eq!(diagnostic["file"], "broken.wgsl", "{body}");
    assert_eq!(diagnostic["line"], 3, "{body}");
    assert!(
        body["variant"]
            .as_str()
            .unwrap()
            .starts_with("Broken/Forward"),
        "{body}"
    );

    // Nothing else is served, and nothing was written besides the store.
    let raw = ureq_status(&server.address, "/../kiln.toml");
    assert_eq!(raw, 404);
    assert!(!dir.path("out").join("index.json").exists());
    server.stop();

    // The same bytes as `kiln build` makes for the same set, listed.
    let listed = MANIFEST.replace("variants = [[]]\n\n[shader.passes.Forward]\nstage = \"fragment\"\nentry = \"fs_main\"\n\n[[shader]]", "variants = [[\"FOG\", \"SKIN\"]]\n\n[shader.passes.Forward]\nstage = \"fragment\"\nentry = \"fs_main\"\n\n[[shader]]");
    let clean = TempProject::from_files([
        ("kiln.toml", listed.as_str()),
        ("lit.wgsl", LIT),
        ("broken.wgsl", BROKEN),
    ]);
    let _ = clean
        .command(env!("CARGO_BIN_EXE_kiln"), "build")
        .output()
        .unwrap();
    let built = std::fs::read(clean.path("out/Lit/Forward/FOG+SKIN.spv")).unwrap();
    assert_eq!(built, fetched.bytes);
}

#[test]
fn an_artifact_links_to_its_variants_reflection() {
    let manifest = MANIFEST.replace(
        "targets = [\"spirv\"]",
        "targets = [\"spirv\", \"reflection\"]",
    );
    let dir = TempProject::from_files([
        ("kiln.toml", manifest.as_str()),
        ("lit.wgsl", LIT),
        ("broken.wgsl", BROKEN),
    ]);
    let server = Server::start(&dir, &[]);
    let client = server.client();
    let spirv = client
        .get("Lit", "Forward", &["SKIN", "FOG"], "spirv")
        .unwrap();
    assert_eq!(
        spirv.reflection.as_deref(),
        Some("/variants/Lit/Forward/reflection?keywords=FOG,SKIN")
    );
    let reflection = client
        .get("Lit", "Forward", &["FOG", "SKIN"], "reflection")
        .unwrap();
    assert_eq!(reflection.reflection, None);
    let json: Value = serde_json::from_slice(&reflection.bytes).unwrap();
    assert_eq!(json["entry_point"], "fs_main", "{json}");
    // One compile made both.
    assert_eq!(client.status().unwrap()["compiled"], 1);
    server.stop();
}

fn ureq_status(address: &str, path: &str) -> u16 {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// Reads events on a thread, into a channel.
fn subscribe(client: &Client) -> mpsc::Receiver<Event> {
    let events = client.events().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for event in events {
            let Ok(event) = event else { break };
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    let hello = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(hello, Event::Hello);
    rx
}

/// The events that come within `quiet` of each other, after the server reported a rebuild.
fn drain(rx: &mpsc::Receiver<Event>, quiet: Duration) -> Vec<Event> {
    let mut all = Vec::new();
    while let Ok(event) = rx.recv_timeout(quiet) {
        all.push(event);
    }
    all
}

#[test]
fn an_edit_tells_every_client_exactly_the_variants_whose_artifact_changed() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let client = server.client();
    let fog = client.get("Lit", "Forward", &["FOG"], "spirv").unwrap();
    let plain = client.get("Lit", "Forward", &[""; 0], "spirv").unwrap();
    let skin = client.get("Lit", "Forward", &["SKIN"], "spirv").unwrap();
    let first = subscribe(&client);
    let second = subscribe(&client);

    // An edit inside FOG's block: only FOG's artifact changes.
    write_atomically(&dir, "lit.wgsl", &LIT.replace("c * 0.25", "c * 0.75"));
    let report = server.next();
    assert_eq!(
        report["changed"],
        serde_json::json!(["lit.wgsl"]),
        "{report}"
    );
    assert_eq!(report["events"], 1, "{report}");
    for rx in [&first, &second] {
        let events = drain(rx, Duration::from_millis(500));
        assert_eq!(events.len(), 1, "{events:?}");
        let Event::Variant(changed) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(
            (changed.shader.as_str(), changed.keywords.as_slice()),
            ("Lit", &["FOG".to_string()][..])
        );
        assert_ne!(changed.blake3, fog.blake3);
        // The new artifact is ready when the event comes.
        let now = client.get("Lit", "Forward", &["FOG"], "spirv").unwrap();
        assert_eq!(now.blake3, changed.blake3);
        assert_eq!(now.digest, changed.digest);
    }
    let unchanged = client.get("Lit", "Forward", &[""; 0], "spirv").unwrap();
    assert_eq!(unchanged.bytes, plain.bytes);

    // A comment edit changes no artifact: no event at all (the digests move with the
    // revision; the bytes do not).
    write_atomically(
        &dir,
        "lit.wgsl",
        &format!("// a comment\n{}", LIT.replace("c * 0.25", "c * 0.75")),
    );
    let report = server.next();
    assert_eq!(report["events"], 0, "{report}");
    assert!(drain(&first, Duration::from_millis(500)).is_empty());
    let after_comment = client.get("Lit", "Forward", &["SKIN"], "spirv").unwrap();
    assert_eq!(after_comment.bytes, skin.bytes);

    // A break: every fetched variant is told it fails; the fix tells them again.
    write_atomically(
        &dir,
        "lit.wgsl",
        &LIT.replace("return c;", "return nothing;"),
    );
    let report = server.next();
    assert_eq!(report["failing"], 3, "{report}");
    let events = drain(&first, Duration::from_millis(500));
    assert_eq!(events.len(), 3, "{events:?}");
    for event in &events {
        let Event::Failed(error) = event else {
            panic!("{events:?}")
        };
        assert_eq!(error["error"], "compile_failed", "{error}");
        assert_eq!(error["diagnostics"][0]["file"], "lit.wgsl", "{error}");
    }
    let (code, _, _) = server_error(client.get("Lit", "Forward", &["FOG"], "spirv"));
    assert_eq!(code, 422);
    write_atomically(&dir, "lit.wgsl", LIT);
    let report = server.next();
    assert_eq!(report["events"], 3, "{report}");
    let events = drain(&first, Duration::from_millis(500));
    assert_eq!(events.len(), 3, "{events:?}");
    let back = client.get("Lit", "Forward", &["FOG"], "spirv").unwrap();
    assert_eq!(back.bytes, fog.bytes);
    server.stop();
}

#[test]
fn a_named_client_hears_only_of_the_variants_it_fetched() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let editor = server.client().with_name("editor");
    let game = server.client().with_name("game");
    editor.get("Lit", "Forward", &["FOG"], "spirv").unwrap();
    game.get("Lit", "Forward", &["SKIN"], "spirv").unwrap();
    // Already served: the hit path records the name too.
    game.get("Lit", "Forward", &["FOG", "SKIN"], "spirv")
        .unwrap();
    editor
        .get("Lit", "Forward", &["FOG", "SKIN"], "spirv")
        .unwrap();
    let (editor_events, game_events, everyone) = (
        subscribe(&editor),
        subscribe(&game),
        subscribe(&server.client()),
    );

    // Both blocks change: FOG, SKIN and FOG+SKIN have new artifacts.
    write_atomically(
        &dir,
        "lit.wgsl",
        &LIT.replace("c * 0.25", "c * 0.75")
            .replace("c * 0.5", "c * 0.125"),
    );
    assert_eq!(server.next()["events"], 3);
    let sets = |rx: &mpsc::Receiver<Event>| -> BTreeSet<Vec<String>> {
        drain(rx, Duration::from_millis(500))
            .into_iter()
            .map(|event| match event {
                Event::Variant(changed) => changed.keywords,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let set = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert_eq!(
        sets(&editor_events),
        [set(&["FOG"]), set(&["FOG", "SKIN"])].into()
    );
    assert_eq!(
        sets(&game_events),
        [set(&["FOG", "SKIN"]), set(&["SKIN"])].into()
    );
    assert_eq!(sets(&everyone).len(), 3);
    let (code, kind, _) = server_error(server.client().with_name("no good").get(
        "Lit",
        "Forward",
        &["FOG"],
        "spirv",
    ));
    assert_eq!((code, kind.as_str()), (400, "invalid_client"));
    server.stop();
}

#[test]
fn a_client_that_fetched_a_broken_variant_hears_when_it_is_fixed() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let client = server.client().with_name("editor");
    let (code, _, _) = server_error(client.get("Broken", "Forward", &[""; 0], "spirv"));
    assert_eq!(code, 422);
    let events = subscribe(&client);
    write_atomically(
        &dir,
        "broken.wgsl",
        &BROKEN.replace("undefined_value", "vec4<f32>(1.0)"),
    );
    assert_eq!(server.next()["events"], 1);
    let told = drain(&events, Duration::from_millis(500));
    let [Event::Variant(fixed)] = &told[..] else {
        panic!("{told:?}")
    };
    assert_eq!(fixed.shader, "Broken");
    let artifact = client.get("Broken", "Forward", &[""; 0], "spirv").unwrap();
    assert_eq!(artifact.blake3, fixed.blake3);
    server.stop();
}

/// 100 keyword sets of 7 keywords, each a different text.
const MANY_KEYWORDS: [&str; 7] = ["K0", "K1", "K2", "K3", "K4", "K5", "K6"];

fn many_project() -> TempProject {
    let mut source = String::from(
        "@fragment\nfn fs_main() -> @location(0) vec4<f32> {\n    var c = vec4<f32>(1.0);\n",
    );
    for (i, k) in MANY_KEYWORDS.iter().enumerate() {
        source.push_str(&format!("#ifdef {k}\n    c = c * {}.5;\n#endif\n", i + 1));
    }
    source.push_str("    return c;\n}\n");
    let manifest = format!(
        "[project]\ntargets = [\"spirv\"]\n\n[[shader]]\nname = \"Many\"\nsource = \"many.wgsl\"\nkeywords = [{}]\nvariants = [[]]\n\n[shader.passes.Forward]\nstage = \"fragment\"\nentry = \"fs_main\"\n",
        MANY_KEYWORDS.map(|k| format!("\"{k}\"")).join(", ")
    );
    TempProject::from_files([
        ("kiln.toml", manifest.as_str()),
        ("many.wgsl", source.as_str()),
    ])
}

fn sets(count: usize) -> Vec<Vec<&'static str>> {
    (0..count)
        .map(|mask| {
            MANY_KEYWORDS
                .iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, k)| *k)
                .collect()
        })
        .collect()
}

#[test]
fn sixty_four_clients_racing_over_a_hundred_keys_compile_each_key_once() {
    let dir = many_project();
    let server = Server::start(&dir, &[]);
    let keys = sets(100);
    let seen: std::sync::Mutex<BTreeMap<usize, BTreeSet<String>>> = Default::default();
    std::thread::scope(|scope| {
        for thread in 0..64usize {
            let client = server.client();
            let (keys, seen) = (&keys, &seen);
            scope.spawn(move || {
                let mut mine: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
                for request in 0..1000usize {
                    // Every thread walks the keys in its own order, each set reversed on
                    // alternate requests: one variant, several spellings.
                    let at = (request * 37 + thread * 11) % keys.len();
                    let mut words = keys[at].clone();
                    if request % 2 == 1 {
                        words.reverse();
                    }
                    let artifact = client.get("Many", "Forward", &words, "spirv").unwrap();
                    mine.entry(at).or_default().insert(artifact.blake3);
                }
                let mut seen = seen.lock().unwrap();
                for (at, hashes) in mine {
                    seen.entry(at).or_default().extend(hashes);
                }
            });
        }
    });
    let status = server.client().status().unwrap();
    assert_eq!(status["requests"], 64_000, "{status}");
    assert_eq!(status["compiled"], 100, "{status}");
    assert_eq!(status["from_store"], 0, "{status}");
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 100);
    // One artifact per key, and 100 different ones.
    let all: BTreeSet<&String> = seen.values().flatten().collect();
    assert!(seen.values().all(|hashes| hashes.len() == 1));
    assert_eq!(all.len(), 100);
    server.stop();
}

#[test]
fn usage_recorded_by_the_server_feeds_a_build_of_exactly_the_used_sets() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let client = server.client();
    for set in [&["FOG"][..], &["SKIN", "FOG"], &["FOG"], &[]] {
        client.get("Lit", "Forward", set, "spirv").unwrap();
    }
    // A failing variant is not a used one.
    let _ = client.get("Broken", "Forward", &[""; 0], "spirv");
    server.stop();

    let exported = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "usage")
        .arg("-o")
        .arg(dir.path("usage.toml"))
        .output()
        .unwrap();
    assert!(exported.status.success(), "{exported:?}");
    let text = std::fs::read_to_string(dir.path("usage.toml")).unwrap();
    assert_eq!(text.matches("[[variant]]").count(), 3, "{text}");

    // Merged with another machine's file (a repeat and a new set).
    std::fs::write(
        dir.path("other.toml"),
        "[[variant]]\nshader = \"Lit\"\npass = \"Forward\"\nkeywords = [\"SKIN\"]\ntarget = \"spirv\"\n\n[[variant]]\nshader = \"Lit\"\npass = \"Forward\"\nkeywords = [\"FOG\"]\ntarget = \"spirv\"\n",
    )
    .unwrap();
    let manifest = MANIFEST.replace(
        "targets = [\"spirv\"]",
        "targets = [\"spirv\"]\nvariants_from = [\"usage.toml\", \"other.toml\"]",
    );
    std::fs::write(dir.path("kiln.toml"), &manifest).unwrap();
    let built = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "build")
        .arg("--json")
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let report: Value = serde_json::from_slice(&built.stdout).unwrap();
    assert_eq!(report["variants"], 4, "{report}");
    let mut names: Vec<String> = std::fs::read_dir(dir.path("out/Lit/Forward"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["FOG+SKIN.spv", "FOG.spv", "SKIN.spv", "_.spv"]);
    assert!(!dir.path("out/Broken").exists());

    // A set no longer legal: the build names the usage file's line; `kiln usage` reports it
    // and leaves it out.
    std::fs::write(
        dir.path("other.toml"),
        "[[variant]]\nshader = \"Lit\"\npass = \"Forward\"\nkeywords = [\"SKIN\"]\ntarget = \"spirv\"\n\n[[variant]]\nshader = \"Lit\"\npass = \"Forward\"\nkeywords = [\"RAIN\"]\ntarget = \"spirv\"\n",
    )
    .unwrap();
    let refused = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "build")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("other.toml:7"), "{stderr}");
    assert!(stderr.contains("RAIN"), "{stderr}");
    std::fs::write(dir.path("kiln.toml"), MANIFEST).unwrap();
    let merged = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "usage")
        .arg("--no-log")
        .arg(dir.path("other.toml"))
        .output()
        .unwrap();
    assert_eq!(merged.status.code(), Some(1), "{merged:?}");
    let stderr = String::from_utf8_lossy(&merged.stderr);
    assert!(
        stderr.contains("other.toml:7") && stderr.contains("left out"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(stdout.matches("[[variant]]").count(), 1, "{stdout}");
}

#[test]
fn a_server_killed_mid_compile_leaves_a_store_that_serves_the_same_bytes() {
    let dir = many_project();
    let keys = sets(40);
    let server = Server::start(&dir, &[]);
    let client = server.client();
    // Forty compiles in flight, then kill -9.
    let requests: Vec<_> = keys
        .iter()
        .cloned()
        .map(|set| {
            let client = client.clone();
            std::thread::spawn(move || client.get("Many", "Forward", &set, "spirv"))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(150));
    let mut server = server;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    for request in requests {
        let _ = request.join();
    }
    drop(server);
    // The store the kill left is a sound database.
    let store = rusqlite::Connection::open(dir.path(".kiln/store.sqlite")).unwrap();
    let check: String = store
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(store);

    let restarted = Server::start(&dir, &[]);
    let client = restarted.client();
    let served: Vec<Vec<u8>> = keys
        .iter()
        .map(|set| client.get("Many", "Forward", set, "spirv").unwrap().bytes)
        .collect();
    let status = client.status().unwrap();
    restarted.stop();

    // A clean project, nothing in its store, gives the same bytes.
    let clean = many_project();
    let reference = Server::start(&clean, &[]);
    let client = reference.client();
    for (set, bytes) in keys.iter().zip(&served) {
        assert_eq!(
            &client.get("Many", "Forward", set, "spirv").unwrap().bytes,
            bytes
        );
    }
    reference.stop();
    // What the killed server saved was found, not compiled again (at least some of it).
    assert_eq!(
        status["compiled"].as_u64().unwrap() + status["from_store"].as_u64().unwrap(),
        40,
        "{status}"
    );
}

#[test]
fn the_listener_bounds_headers_slow_clients_and_needs_a_token_off_loopback() {
    let dir = project();
    // Off loopback: refused without the flag, and without a token.
    let refused = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "serve")
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-remote"));
    let refused = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "serve")
        .args(["--listen", "0.0.0.0:0", "--allow-remote"])
        .env_remove("KILN_SERVE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("KILN_SERVE_TOKEN"));

    let token = "0123456789abcdef0123456789abcdef";
    let mut child = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "serve")
        .args([
            "--json",
            "--listen",
            "127.0.0.1:0",
            "--header-timeout-ms",
            "300",
        ])
        .env("KILN_SERVE_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let address = serde_json::from_str::<Value>(&line).unwrap()["listening"]
        .as_str()
        .unwrap()
        .to_owned();
    let base = format!("http://{address}");
    let (code, kind, _) = server_error(Client::new(&base).get("Lit", "Forward", &[""; 0], "spirv"));
    assert_eq!((code, kind.as_str()), (401, "unauthorized"));
    let wrong = Client::new(&base).with_token("0123456789abcdef0123456789abcdeX");
    assert_eq!(
        server_error(wrong.get("Lit", "Forward", &[""; 0], "spirv")).0,
        401
    );
    let right = Client::new(&base).with_token(token);
    assert!(right.get("Lit", "Forward", &[""; 0], "spirv").is_ok());
    // A client without the token keeps no connection open: the answer ends it.
    let mut refused = std::net::TcpStream::connect(&address).unwrap();
    refused
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(refused, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    refused.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("connection: close"),
        "{reply}"
    );

    // Headers past the limit: 431, unread.
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    let huge = "x".repeat(64 << 10);
    let _ = write!(
        stream,
        "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: {huge}\r\n\r\n"
    );
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    assert!(
        reply.starts_with("HTTP/1.1 431"),
        "{}",
        &reply[..reply.len().min(200)]
    );

    // A client that never finishes its headers is cut off.
    let mut slow = std::net::TcpStream::connect(&address).unwrap();
    slow.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut buffer = [0u8; 512];
    let read = slow.read(&mut buffer);
    assert!(
        matches!(read, Ok(0)) || read.is_err() || String::from_utf8_lossy(&buffer).contains("408"),
        "{read:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A shader with 9 keywords, every one of its 512 sets legal, none listed.
const MANY: &str = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Many"
source = "many.wgsl"
keywords = ["K0", "K1", "K2", "K3", "K4", "K5", "K6", "K7", "K8"]
variants = [[]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
"#;

fn many_source(base: &str) -> String {
    let mut text = format!(
        "@fragment\nfn fs_main() -> @location(0) vec4<f32> {{\n    var c = vec4<f32>({base});\n"
    );
    for k in 0..9 {
        text.push_str(&format!("#ifdef K{k}\n    c = c * {}.5;\n#endif\n", k + 1));
    }
    text.push_str("    return c;\n}\n");
    text
}

fn all_sets() -> Vec<Vec<String>> {
    (0u32..512)
        .map(|bits| {
            (0..9)
                .filter(|k| bits & (1 << k) != 0)
                .map(|k| format!("K{k}"))
                .collect()
        })
        .collect()
}

#[test]
fn a_client_told_of_a_new_artifact_gets_it_at_once() {
    // 512 watched variants, each changed by one edit: the server sends 512 events, and a
    // client fetches each variant the moment its event comes, before the server says it
    // is done. Every fetch must answer the artifact its event announced.
    let dir = TempProject::from_files([("kiln.toml", MANY), ("many.wgsl", &many_source("1.0"))]);
    let server = Server::start(&dir, &[]);
    let client = server.client();
    let mut before = BTreeMap::new();
    for set in all_sets() {
        let got = client.get("Many", "Forward", &set, "spirv").unwrap();
        before.insert(set, got.blake3);
    }
    let events = subscribe(&client);
    write_atomically(&dir, "many.wgsl", &many_source("2.0"));
    let mut told = BTreeSet::new();
    while told.len() < 512 {
        let event = events
            .recv_timeout(Duration::from_secs(60))
            .expect("an event for every variant");
        let Event::Variant(changed) = event else {
            panic!("{event:?}")
        };
        let now = client
            .get("Many", "Forward", &changed.keywords, "spirv")
            .unwrap();
        assert_eq!(
            (&now.digest, &now.blake3),
            (&changed.digest, &changed.blake3),
            "{:?} was told of an artifact the server did not yet serve",
            changed.keywords
        );
        assert_ne!(before[&changed.keywords], changed.blake3);
        told.insert(changed.keywords);
    }
    let report = server.next();
    assert_eq!(report["events"], 512, "{report}");
    server.stop();
}

#[test]
fn a_server_keeps_a_bounded_number_of_client_names() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let base = format!("http://{}", server.address);
    for n in 0..1024 {
        let named = Client::new(&base).with_name(&format!("engine-{n}"));
        named.get("Lit", "Forward", &[""; 0], "spirv").unwrap();
    }
    // A name already known is still welcome; a new one past the bound is refused.
    let known = Client::new(&base).with_name("engine-7");
    assert!(known.get("Lit", "Forward", &["FOG"], "spirv").is_ok());
    let (code, kind, body) = server_error(
        Client::new(&base)
            .with_name("engine-1024")
            .get("Lit", "Forward", &[""; 0], "spirv"),
    );
    assert_eq!((code, kind.as_str()), (503, "too_many_clients"), "{body}");
    // Unnamed clients are not affected.
    assert!(server
        .client()
        .get("Lit", "Forward", &[""; 0], "spirv")
        .is_ok());
    server.stop();
}

#[test]
fn kiln_usage_writes_no_usage_file_that_would_build_nothing() {
    let dir = project();
    let out = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "usage")
        .arg("-o")
        .arg(dir.path("usage.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no legal used variant"), "{stderr}");
    assert!(stderr.contains("usage.jsonl"), "{stderr}");
    assert!(!dir.path("usage.toml").exists());

    // A set fetched for a target no longer built is kept (it is built for the manifest's
    // targets), with a warning.
    std::fs::write(
        dir.path("old.toml"),
        "[[variant]]\nshader = \"Lit\"\npass = \"Forward\"\nkeywords = [\"FOG\"]\ntarget = \"msl\"\n",
    )
    .unwrap();
    let out = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "usage")
        .args(["--no-log", "-o"])
        .arg(dir.path("usage.toml"))
        .arg(dir.path("old.toml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("old.toml:1") && stderr.contains("no longer builds"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(dir.path("usage.toml")).unwrap();
    assert_eq!(text.matches("[[variant]]").count(), 1, "{text}");
}

/// `GET path` over a raw socket: the status code and the body.
fn raw_get(address: &str, path: &str) -> (u16, Vec<u8>) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    let split = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = String::from_utf8_lossy(&reply[..split]).into_owned();
    let code = head[9..12].parse().unwrap();
    (code, reply[split + 4..].to_vec())
}

#[test]
fn every_spelling_of_the_query_is_one_variant_and_every_refusal_is_json() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let wanted = server
        .client()
        .get("Lit", "Forward", &["FOG", "SKIN"], "spirv")
        .unwrap();
    // Repeated fields merge.
    for query in [
        "keywords=FOG&keywords=SKIN",
        "keywords=FOG,,_&keywords=SKIN,FOG",
        "keywords=FOG%2CSKIN&other=ignored",
    ] {
        let (code, body) = raw_get(
            &server.address,
            &format!("/variants/Lit/Forward/spirv?{query}"),
        );
        assert_eq!(code, 200, "{query}: {}", String::from_utf8_lossy(&body));
        assert_eq!(body, wanted.bytes, "{query}");
    }
    for (query, status, kind) in [
        ("keywords=FOG&client=a&client=b", 400, "invalid_client"),
        ("keywords=%FF", 400, "invalid_keyword"),
        ("keywords=FOG;SKIN", 400, "invalid_keyword"),
        // Decoded, `+` is a space: not a separator, and no keyword holds one.
        ("keywords=SKIN+FOG", 400, "invalid_keyword"),
        ("keywords=RAIN", 404, "unknown_keyword"),
    ] {
        let (code, body) = raw_get(
            &server.address,
            &format!("/variants/Lit/Forward/spirv?{query}"),
        );
        let body: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{query}: not JSON ({e}): {body:?}"));
        assert_eq!(
            (code, body["error"].as_str()),
            (status, Some(kind)),
            "{query}: {body}"
        );
    }
    let many = vec!["FOG"; 300].join(",");
    let (code, body) = raw_get(
        &server.address,
        &format!("/variants/Lit/Forward/spirv?keywords={many}"),
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (code, body["error"].as_str()),
        (400, Some("too_many_keywords"))
    );
    server.stop();
}

#[test]
fn requests_for_nothing_use_no_client_names_and_wrong_methods_get_json() {
    let dir = project();
    let server = Server::start(&dir, &[]);
    let base = format!("http://{}", server.address);
    // Names given on requests that name no variant are not kept.
    for n in 0..1100 {
        let named = Client::new(&base).with_name(&format!("ghost-{n}"));
        let (code, _, _) = server_error(named.get("Nothing", "Forward", &[""; 0], "spirv"));
        assert_eq!(code, 404);
    }
    let real = Client::new(&base).with_name("engine");
    assert!(real.get("Lit", "Forward", &[""; 0], "spirv").is_ok());

    // A path segment that is not UTF-8, and a method other than GET: JSON too.
    let (code, body) = raw_get(&server.address, "/variants/%FF/Forward/spirv");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (code, body["error"].as_str()),
        (400, Some("invalid_path")),
        "{body}"
    );
    let mut stream = std::net::TcpStream::connect(&server.address).unwrap();
    write!(
        stream,
        "POST /variants/Lit/Forward/spirv HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 405"), "{reply}");
    assert!(reply.contains("method_not_allowed"), "{reply}");
    server.stop();
}
