//! Measures how many SPIR-V modules each translator turns into each target, and why the
//! rest fail: the figures behind `kiln::compile::cross`'s choice of translator per target.
//!
//! ```sh
//! scripts/cross_corpus.sh SHADER_DIR SPV_DIR      # GLSL/HLSL -> SPIR-V with glslc/glslang
//! cargo run --release -p kiln --example cross_coverage -- SPV_DIR
//! ```
//!
//! Every `*.spv` under `SPV_DIR` is translated through kiln's own entry points
//! (`cross::translate`), entry point `main` of whatever stage the module declares. naga is
//! run twice: with the capabilities kiln grants the target by default, and with all of naga's
//! capabilities (the most naga's SPIR-V front end can reach). Failures are grouped by their
//! message with numbers, IDs and names blanked, most frequent first.

use kiln::compile::cross::{self, Translator};
use kiln::compile::{Target, TargetConfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One column of the table: a translator, with or without every naga capability.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Column {
    translator: Translator,
    all_capabilities: bool,
}

impl Column {
    fn label(self) -> String {
        match (self.translator, self.all_capabilities) {
            (Translator::Naga, true) => "naga (all capabilities)".to_owned(),
            (translator, _) => translator.name().to_owned(),
        }
    }
}

#[derive(Default)]
struct Tally {
    ok: usize,
    total: usize,
    reasons: BTreeMap<String, Vec<String>>,
}

fn main() {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: cross_coverage SPV_DIR");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    collect(&dir, &mut files);
    files.sort();
    let columns = [
        Column {
            translator: Translator::Naga,
            all_capabilities: false,
        },
        Column {
            translator: Translator::Naga,
            all_capabilities: true,
        },
        Column {
            translator: Translator::SpirvCross,
            all_capabilities: false,
        },
    ];
    let targets = [Target::Msl, Target::Hlsl, Target::Glsl, Target::Wgsl];
    // (group, column, target) -> tally; the group is the first directory under SPV_DIR.
    let mut tallies: BTreeMap<(String, Column, Target), Tally> = BTreeMap::new();
    let mut read_errors = 0;
    for file in &files {
        let Some(words) = read_words(file) else {
            read_errors += 1;
            continue;
        };
        let rel = file.strip_prefix(&dir).unwrap_or(file);
        let group = rel
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        for column in columns {
            for target in targets {
                if !column.translator.writes(target) {
                    continue;
                }
                let mut config = TargetConfig::new(target);
                if column.all_capabilities {
                    config = config.with_capabilities(naga::valid::Capabilities::all());
                }
                let result = cross::translate(column.translator, &words, "main", None, &config);
                let tally = tallies.entry((group.clone(), column, target)).or_default();
                tally.total += 1;
                match result {
                    Ok(_) => tally.ok += 1,
                    Err(e) => tally
                        .reasons
                        .entry(normalise(&e.to_string()))
                        .or_default()
                        .push(rel.display().to_string()),
                }
            }
        }
    }
    if read_errors > 0 {
        eprintln!("{read_errors} files could not be read as SPIR-V words");
    }
    report(&tallies, &columns, &targets);
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "spv") {
            out.push(path);
        }
    }
}

fn read_words(path: &Path) -> Option<Vec<u32>> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() % 4 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
    )
}

/// The message with what varies per file blanked: numbers, `%ids`, quoted names.
fn normalise(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars().peekable();
    let mut previous = ' ';
    while let Some(c) = chars.next() {
        // A quote opens a name only after a space or bracket (not an apostrophe).
        let opens = matches!(previous, ' ' | '(' | '[');
        previous = c;
        match c {
            '0'..='9' => {
                while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                    chars.next();
                }
                out.push('N');
            }
            '`' | '"' | '\'' if c != '\'' || opens => {
                for next in chars.by_ref() {
                    if next == c {
                        break;
                    }
                }
                out.push_str("<name>");
            }
            _ => out.push(c),
        }
    }
    out.chars().take(160).collect()
}

fn report(
    tallies: &BTreeMap<(String, Column, Target), Tally>,
    columns: &[Column],
    targets: &[Target],
) {
    let groups: Vec<String> = {
        let mut g: Vec<String> = tallies.keys().map(|k| k.0.clone()).collect();
        g.dedup();
        g
    };
    for group in &groups {
        println!("## {group}\n");
        print!("| translator |");
        for target in targets {
            print!(" {target} |");
        }
        println!();
        println!("|---|{}", "---|".repeat(targets.len()));
        for column in columns {
            print!("| {} |", column.label());
            for target in targets {
                match tallies.get(&(group.clone(), *column, *target)) {
                    Some(t) => print!(" {} of {} |", t.ok, t.total),
                    None => print!(" - |"),
                }
            }
            println!();
        }
        println!();
        for column in columns {
            for target in targets {
                let Some(tally) = tallies.get(&(group.clone(), *column, *target)) else {
                    continue;
                };
                if tally.reasons.is_empty() {
                    continue;
                }
                println!(
                    "{} -> {target}: {} failures",
                    column.label(),
                    tally.total - tally.ok
                );
                let mut reasons: Vec<_> = tally.reasons.iter().collect();
                reasons.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
                for (reason, files) in reasons {
                    println!("  {:>4}  {reason}   (e.g. {})", files.len(), files[0]);
                }
            }
        }
        println!();
    }
}
