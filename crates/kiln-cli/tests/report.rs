//! `kiln report`: the page's numbers equal what `kiln build --json` reported, read from its
//! embedded data (always) and as a real headless chromium shows them after its script ran
//! (`tests/browser/check.mjs`, driven by playwright-core). Without chromium, node or the npm
//! dependencies (`npm ci` in tests/browser) the browser half skips, saying why, unless
//! `KILN_REQUIRE_BROWSER=1` (CI), where that is a failure.

use kiln_test_support::TempProject;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

/// Lit: `UNUSED` appears nowhere in its source, so its four keyword sets make two distinct
/// texts per pass. Broken: `BAD` fails to compile, at a known line.
const FIXTURE: &str = r#"
//- /kiln.toml
[project]
targets = ["spirv", "msl"]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"], ["_", "UNUSED"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[shader.passes.Depth]
stage = "vertex"
entry = "vs_main"

[[shader]]
name = "Broken"
source = "shaders/broken.wgsl"
axes = [["_", "BAD"], ["_", "RED"], ["_", "BLUE"]]

[shader.passes.Main]
stage = "fragment"
entry = "fs_main"
//- /shaders/lit.wgsl
#include "include/common.wgsl"

@vertex
fn vs_main(@location(0) p: vec3<f32>) -> @builtin(position) vec4<f32> {
    return vec4<f32>(p, 1.0);
}

@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var color = base_color();
#ifdef FOG
    color = color * 0.5;
#endif
    return color;
}
//- /shaders/include/common.wgsl
fn base_color() -> vec4<f32> {
    return vec4<f32>(1.0, 0.5, 0.25, 1.0);
}
//- /shaders/broken.wgsl
@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var c = vec4<f32>(0.0, 0.0, 0.0, 1.0);
#ifdef RED
    c.r = 1.0;
#endif
#ifdef BLUE
    c.b = 1.0;
#endif
#ifdef BAD
    c = c * not_declared_anywhere;
#endif
    return c;
}
"#;

/// Runs `kiln build --json`; the report (exit 1: Broken's BAD variants fail).
fn build(p: &TempProject) -> Value {
    let build = p.build_cli(KILN, &[]);
    assert_eq!(build.code, 1, "{}", build.stderr);
    build.report
}

fn report(p: &TempProject, page: &Path) -> Output {
    p.command(KILN, "report")
        .arg("-o")
        .arg(page)
        .output()
        .unwrap()
}

/// The JSON the page embeds.
fn embedded(html: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"kiln-data\">";
    let start = html.find(open).expect("the page embeds its data") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

const COUNTS: [&str; 8] = [
    "variants",
    "compiled",
    "cached",
    "deduplicated",
    "failed",
    "failed_outputs",
    "outputs_written",
    "outputs_removed",
];

/// Outputs and bytes per target in index.json.
fn index_totals(p: &TempProject) -> BTreeMap<String, (u64, u64)> {
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(p.out_dir().join("index.json")).unwrap())
            .unwrap();
    let mut totals = BTreeMap::new();
    for entry in index["entries"].as_array().unwrap() {
        let total = totals
            .entry(entry["target"].as_str().unwrap().to_owned())
            .or_insert((0, 0));
        total.0 += 1;
        total.1 += entry["bytes"].as_u64().unwrap();
    }
    totals
}

/// A project built twice (the second time after an edit of Lit's header), reported.
struct Reported {
    p: TempProject,
    first: Value,
    second: Value,
    page: PathBuf,
    _dir: tempfile::TempDir,
}

fn reported() -> Reported {
    let p = TempProject::new(FIXTURE);
    let first = build(&p);
    p.edit("shaders/include/common.wgsl", "0.25", "0.75");
    let second = build(&p);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let output = report(&p, &page);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // It prints the page's path, and nothing else.
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        page.display().to_string()
    );
    Reported {
        p,
        first,
        second,
        page,
        _dir: dir,
    }
}

#[test]
fn the_page_embeds_the_counts_kiln_build_reported_and_needs_nothing_from_the_network() {
    let r = reported();
    let html = std::fs::read_to_string(&r.page).unwrap();
    let data = embedded(&html);
    for count in COUNTS {
        assert_eq!(data["last"]["counts"][count], r.second[count], "{count}");
    }
    // Cold, then an edit of Lit's header: both builds are in the history, in order.
    let history = data["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["counts"]["compiled"], r.first["compiled"]);
    assert_eq!(history[1]["counts"]["compiled"], r.second["compiled"]);
    // Self-contained: no URL to fetch anything from, no external script or style.
    for needle in ["http://", "https://", "src=", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "the page names {needle}");
    }
}

#[test]
fn a_real_browser_shows_the_numbers_of_kiln_build_json() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let r = reported();
    let shown = browser.check(&r.page);
    for problem in [
        "console_errors",
        "page_errors",
        "failed_requests",
        "foreign_requests",
    ] {
        assert_eq!(
            shown[problem],
            serde_json::json!([]),
            "{problem}: {shown:#}"
        );
    }
    let shown = &shown["shown"];

    // The summary, as rendered by the page's script from its data.
    for count in COUNTS {
        assert_eq!(
            shown["summary"][count]["value"], r.second[count],
            "{count} in {:#}",
            shown["summary"]
        );
    }
    assert_eq!(shown["summary"]["variants"]["text"], "16");

    // The funnel: per shader rows that add up to the build's counts.
    let funnel = shown["funnel"].as_array().unwrap();
    let sum = |key: &str| -> u64 { funnel.iter().map(|row| row[key].as_u64().unwrap()).sum() };
    for count in ["compiled", "deduplicated", "cached", "failed"] {
        assert_eq!(sum(count), r.second[count].as_u64().unwrap(), "{count}");
    }
    let lit = funnel.iter().find(|row| row["name"] == "Lit").unwrap();
    assert_eq!(
        (
            &lit["product"],
            &lit["declared"],
            &lit["pairs"],
            &lit["texts"]
        ),
        (&4.into(), &4.into(), &8.into(), &4.into()),
        "{lit}"
    );
    let broken = funnel.iter().find(|row| row["name"] == "Broken").unwrap();
    assert_eq!(broken["product"], 8);
    assert_eq!(broken["failed"], 4, "every BAD variant: {broken}");

    // Outputs per target, as index.json lists them.
    let totals = index_totals(&r.p);
    let targets = shown["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    for row in targets {
        let (outputs, bytes) = totals[row["name"].as_str().unwrap()];
        assert_eq!(row["outputs"], outputs, "{row}");
        assert_eq!(row["bytes"], bytes, "{row}");
        assert_eq!(row["failed"], 4, "{row}");
    }

    // Per shader and target: Lit has all its 8 outputs, Broken lacks its 4 BAD variants'.
    let outputs = &shown["outputs"];
    for (target, (_, bytes)) in &totals {
        assert_eq!(outputs["Lit"][target]["outputs"], 8, "{outputs:#}");
        assert_eq!(outputs["Broken"][target]["outputs"], 4, "{outputs:#}");
        assert_eq!(outputs["Broken"][target]["failed"], 4, "{outputs:#}");
        let sum = outputs["Lit"][target]["bytes"].as_u64().unwrap()
            + outputs["Broken"][target]["bytes"].as_u64().unwrap();
        assert_eq!(sum, *bytes, "{target}");
    }

    // The failures, each with its file and line, as kiln build --json gave them.
    let failures = shown["failures"].as_array().unwrap();
    assert_eq!(
        failures.len() as u64,
        r.second["failed_outputs"].as_u64().unwrap()
    );
    let diagnostics = r.second["diagnostics"].as_array().unwrap();
    let error = diagnostics
        .iter()
        .find(|d| d["severity"] == "error")
        .unwrap();
    for row in failures {
        assert_eq!(row[0], error["file"], "{row}");
        assert_eq!(row[1], error["line"].to_string(), "{row}");
        assert!(
            row[2].as_str().unwrap().starts_with("Broken/Main/"),
            "{row}"
        );
        assert!(row[2].as_str().unwrap().contains("BAD"), "{row}");
    }

    // Distinct texts: Lit 4 (UNUSED changes nothing), Broken 8; the ratio is their quotient.
    let dedup = &shown["dedup"];
    assert_eq!(dedup["pairs"], 16);
    assert_eq!(dedup["texts"], 12);
    assert!((dedup["ratio"].as_f64().unwrap() - 16.0 / 12.0).abs() < 1e-3);

    // Compile time: the slowest first, and only passes that compiled spent any.
    let times: Vec<u64> = shown["compile_time"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["compile_us"].as_u64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    assert!(times[0] > 0, "{times:?}");

    // History: one point per build.
    assert_eq!(shown["history_points"], 2);
    assert_eq!(shown["history_count"], 2);
}

#[test]
fn every_build_appends_one_record_to_the_history() {
    let p = TempProject::new(FIXTURE);
    let history = p.root().join(".kiln/history.jsonl");
    for builds in 1..=3 {
        build(&p);
        let text = std::fs::read_to_string(&history).unwrap();
        assert_eq!(text.lines().count(), builds, "{text}");
    }
}

#[test]
fn a_foreign_history_is_refused_by_report_and_left_alone_by_build() {
    let p = TempProject::new(FIXTURE);
    p.write(".kiln/history.jsonl", "not kiln's\n");
    let built = p.build_cli(KILN, &[]);
    // The build itself is not harmed: it warns that it recorded nothing.
    assert_eq!(built.code, 1, "{}", built.stderr);
    let warned = built.report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| {
            d["severity"] == "warning"
                && d["message"]
                    .as_str()
                    .unwrap()
                    .contains("the build history was not recorded")
        });
    assert!(warned, "{}", built.report);
    assert_eq!(p.read(".kiln/history.jsonl"), "not kiln's\n");

    let dir = tempfile::tempdir().unwrap();
    let output = report(&p, &dir.path().join("r.html"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not a build history kiln wrote"),
        "{stderr}"
    );
    assert!(!dir.path().join("r.html").exists());
}

#[test]
fn a_torn_record_is_skipped_with_a_warning() {
    let p = TempProject::new(FIXTURE);
    let first = build(&p);
    let history = p.root().join(".kiln/history.jsonl");
    let mut text = std::fs::read_to_string(&history).unwrap();
    // A build killed while appending.
    text.push_str("{\"kiln_history\":1,\"time_ms\":17");
    std::fs::write(&history, &text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("r.html");
    let output = report(&p, &page);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("history.jsonl:2: skipped"), "{stderr}");
    let data = embedded(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(data["last"]["counts"]["compiled"], first["compiled"]);

    // The next build's record is not glued to the torn line.
    build(&p);
    let output = report(&p, &page);
    assert!(output.status.success());
    let data = embedded(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(data["history"].as_array().unwrap().len(), 2);
}

#[test]
fn without_a_build_report_says_to_build_first() {
    let p = TempProject::new(FIXTURE);
    let dir = tempfile::tempdir().unwrap();
    let output = report(&p, &dir.path().join("r.html"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("run `kiln build` first"), "{stderr}");
}

/// chromium, node and playwright-core, when all three are here.
struct Browser {
    script: PathBuf,
}

impl Browser {
    fn find() -> Option<Self> {
        let required = std::env::var("KILN_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
        let chromium = std::env::var_os("CHROMIUM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
        let node = Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        let missing = if !chromium.exists() {
            Some(format!(
                "{} is not installed (apt-get install chromium)",
                chromium.display()
            ))
        } else if !node {
            Some("node is not installed".to_owned())
        } else if !folder.join("node_modules/playwright-core").exists() {
            Some(format!(
                "playwright-core is not installed (npm ci in {})",
                folder.display()
            ))
        } else {
            None
        };
        if let Some(why) = missing {
            assert!(!required, "KILN_REQUIRE_BROWSER=1 but {why}");
            eprintln!("skipped: {why}");
            return None;
        }
        Some(Browser {
            script: folder.join("check.mjs"),
        })
    }

    /// What `check.mjs` read from the page.
    fn check(&self, page: &Path) -> Value {
        let output = Command::new("node")
            .arg(&self.script)
            .arg(page)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "check.mjs: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "check.mjs printed no JSON ({e}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        })
    }
}
