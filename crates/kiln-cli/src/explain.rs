//! `kiln explain VARIANT`: every input of one variant's identity and why it was last
//! rebuilt, from the library's [`kiln::pipeline::Explanation`].

use crate::build::StoreArgs;
use kiln::pipeline::{ExplainError, Explanation};
use std::process::ExitCode;

/// Exit codes: 0 explained; 1 no such variant or digest (or a malformed name); 2 the
/// project or its build history cannot be read.
#[derive(clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print the explanation as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// `shader/pass/KEYWORDS` as its outputs are named (keywords joined by `+`, `_` for
    /// none), or the variant's 12-hex-digit digest.
    pub variant: String,
}

pub fn run(args: &ExplainArgs) -> ExitCode {
    let mut project = match args.store.open() {
        Ok(project) => project,
        Err(code) => return code,
    };
    let explanation = match project.explain(&args.variant) {
        Ok(explanation) => explanation,
        Err(e @ ExplainError::History(_)) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(1);
        }
    };
    for warning in &explanation.history_warnings {
        say!("warning: {warning}");
    }
    if args.json {
        match serde_json::to_string(&explanation) {
            Ok(text) => crate::render::stdout_line(&text),
            Err(e) => {
                say!("error: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        crate::render::stdout_line(text(&explanation).trim_end());
    }
    ExitCode::SUCCESS
}

/// The explanation for a reader.
fn text(e: &Explanation) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  digest {}  revision {}",
        e.name, e.digest, e.revision
    );
    if let Some(built) = e.built_digest.as_ref().filter(|d| **d != e.digest) {
        let _ = writeln!(out, "  (digest {built} in the last build)");
    }
    let _ = writeln!(
        out,
        "source:    {} ({}, {} stage, entry `{}`)",
        e.source, e.language, e.stage, e.entry
    );
    let _ = writeln!(out, "compiler:  {}", e.compiler);
    let _ = writeln!(out, "kiln:      {}", e.kiln_version);
    let _ = writeln!(out, "options:   {}", pairs(&e.options));
    let _ = writeln!(out, "constants: {}", pairs(&e.constants));
    let _ = writeln!(out, "include directories: {}", list(&e.include_dirs));
    let _ = writeln!(out, "defines:");
    for d in &e.defines {
        let _ = writeln!(out, "  {}={}  ({})", d.name, d.value, d.origin);
    }
    let _ = writeln!(out, "files (blake3):");
    for f in &e.files {
        let hash = f.hash.as_deref().unwrap_or("missing");
        let _ = writeln!(out, "  {hash}  {}", f.path);
    }
    let _ = writeln!(out, "targets:");
    for t in &e.targets {
        let _ = writeln!(out, "  {}  {}  {}", t.name, t.options, t.capabilities);
    }
    store_text(e, &mut out);
    rebuild_text(e, &mut out);
    out
}

/// The variant's text and store entries.
fn store_text(e: &Explanation, out: &mut String) {
    use std::fmt::Write as _;
    match (&e.text_hash, &e.text_error) {
        (Some(hash), _) => {
            let _ = writeln!(out, "preprocessed text (blake3): {hash}");
        }
        (None, Some(error)) => {
            let _ = writeln!(out, "no preprocessed text: {error}");
        }
        (None, None) => {}
    }
    let _ = writeln!(out, "store entries (namespace / compile key -> output):");
    for s in &e.store {
        let key = s.compile_key.as_deref().unwrap_or("(no text)");
        let _ = writeln!(
            out,
            "  {}  {} / {} -> {}",
            s.target, s.namespace, key, s.output
        );
        let translator = s
            .translator
            .as_deref()
            .map_or(String::new(), |t| format!(", translated by {t}"));
        let _ = writeln!(out, "      compiled by {}{translator}", s.compiler);
    }
}

/// What changed since the last build, and at the last rebuild.
fn rebuild_text(e: &Explanation, out: &mut String) {
    use std::fmt::Write as _;
    if !e.since_last_build.is_empty() {
        let _ = writeln!(out, "changed since the last build (not built yet):");
        for change in &e.since_last_build {
            let _ = writeln!(out, "  {change}");
        }
    }
    match &e.last_rebuild {
        Some(r) if r.first_recorded => {
            let _ = writeln!(
                out,
                "last rebuilt: in the first recorded build ({}), {}; no earlier build to compare with",
                crate::report::utc(r.time_ms),
                ago(r.builds_ago)
            );
        }
        Some(r) => {
            let _ = writeln!(
                out,
                "last rebuilt: {} ({}), because:",
                ago(r.builds_ago),
                crate::report::utc(r.time_ms)
            );
            for change in &r.changes {
                let _ = writeln!(out, "  {change}");
            }
        }
        None => {
            let _ = writeln!(
                out,
                "last rebuilt: no recorded build ({} recorded) built it",
                e.builds_recorded
            );
        }
    }
}

fn ago(builds: usize) -> String {
    match builds {
        0 => "in the last build".to_owned(),
        1 => "1 build before the last".to_owned(),
        n => format!("{n} builds before the last"),
    }
}

fn pairs(map: &std::collections::BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return "(none)".to_owned();
    }
    let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(", ")
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_owned()
    } else {
        items.join(", ")
    }
}
