//! Rendering library diagnostics for people: codespan snippets of the offending source line.

use codespan_reporting::diagnostic::{Diagnostic as Snippet, Label};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};
use kiln::manifest::ManifestError;
use kiln::pipeline::{Diagnostic, Severity};
use std::io::IsTerminal;
use std::path::Path;

/// Prints one line on stdout. A reader that went away (`kiln build --json | head -c0`) is
/// not an error of kiln's: the line is dropped instead of panicking as `println!` does.
pub fn stdout_line(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = writeln!(out, "{line}").and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            say!("warning: cannot write to stdout: {e}");
        }
    }
}

/// `--color`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    /// On a terminal, unless `NO_COLOR` is set (no-color.org).
    Auto,
    Always,
    Never,
}

static COLOR: std::sync::OnceLock<Color> = std::sync::OnceLock::new();

/// Sets `--color` for the process (once, at start).
pub fn set_color(color: Color) {
    let _ = COLOR.set(color);
}

fn writer() -> termcolor::StandardStream {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let choice = match COLOR.get().copied().unwrap_or(Color::Auto) {
        Color::Always => termcolor::ColorChoice::Always,
        Color::Never => termcolor::ColorChoice::Never,
        Color::Auto if std::io::stderr().is_terminal() && !no_color => termcolor::ColorChoice::Auto,
        Color::Auto => termcolor::ColorChoice::Never,
    };
    termcolor::StandardStream::stderr(choice)
}

/// The byte range of 1-based `line`, 0-based `columns` in `text`, clamped to the text.
fn byte_range(text: &str, line: u32, columns: &std::ops::Range<u32>) -> std::ops::Range<usize> {
    let start_of_line = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1) as usize)
        .map(str::len)
        .sum::<usize>()
        .min(text.len());
    let line_len = text[start_of_line..]
        .find('\n')
        .unwrap_or(text.len() - start_of_line);
    let start = start_of_line + (columns.start as usize).min(line_len);
    let end = (start_of_line + (columns.end as usize).min(line_len)).max(start);
    start..end
}

/// Files larger than this are not quoted in snippets.
const SNIPPET_MAX_BYTES: u64 = 64 << 20;

/// How many variants a grouped diagnostic names before it says "and N more".
const VARIANTS_SHOWN: usize = 4;

/// Prints a build's diagnostics, one snippet per distinct problem: a broken include shared by
/// a hundred variants is one error naming a few of them, not a hundred copies.
pub fn diagnostics(root: &Path, all: &[Diagnostic]) {
    let mut groups: Vec<(&Diagnostic, Vec<&str>)> = Vec::new();
    for d in all {
        let same = |g: &&mut (&Diagnostic, Vec<&str>)| {
            g.0.severity == d.severity
                && g.0.message == d.message
                && g.0.location == d.location
                && g.0.target == d.target
        };
        match groups.iter_mut().find(same) {
            Some(group) => group.1.extend(d.variant.as_deref()),
            None => groups.push((d, d.variant.as_deref().into_iter().collect())),
        }
    }
    for (d, variants) in groups {
        let mut shown: Vec<&str> = variants.iter().copied().take(VARIANTS_SHOWN).collect();
        let more = variants.len().saturating_sub(VARIANTS_SHOWN);
        let more = format!("and {more} more");
        if variants.len() > VARIANTS_SHOWN {
            shown.push(&more);
        }
        diagnostic(root, d, &shown);
    }
}

/// Prints one diagnostic naming `variants`, with a snippet when its file can be read.
fn diagnostic(root: &Path, d: &Diagnostic, variants: &[&str]) {
    let mut snippet = match d.severity {
        Severity::Error => Snippet::error(),
        Severity::Warning => Snippet::warning(),
    }
    .with_message(&d.message);
    let mut notes = Vec::new();
    match variants {
        [] => {}
        [one] => notes.push(format!("variant: {one}")),
        many => notes.push(format!("variants: {}", many.join(", "))),
    }
    match d.target {
        Some(target) => notes.push(format!("target: {target}")),
        None if !variants.is_empty() && d.severity == Severity::Error => {
            // Not "before any back end ran": writing an output fails the variant too.
            notes.push("targets: all".to_owned())
        }
        None => {}
    }
    let mut files = SimpleFiles::new();
    if let Some(at) = d.location.as_ref().filter(|at| at.line == 0) {
        notes.push(format!("in {}", at.file.display()));
    } else if let Some(at) = &d.location {
        // Read like a source: never through a link leading outside the root, never a FIFO.
        match kiln::boundary::read_project_file(root, &at.file, SNIPPET_MAX_BYTES) {
            Ok(text) => {
                let range = byte_range(&text, at.line, &at.columns);
                let id = files.add(at.file.display().to_string(), text);
                snippet = snippet.with_labels(vec![Label::primary(id, range)]);
            }
            Err(_) => notes.push(format!("at {}:{}", at.file.display(), at.line)),
        }
    }
    snippet = snippet.with_notes(notes);
    let out = writer();
    let mut lock = out.lock();
    if term::emit(&mut lock, &term::Config::default(), &files, &snippet).is_err() {
        say!("{d}");
    }
}

/// Prints a manifest error with a snippet of the manifest.
pub fn manifest_error(e: &ManifestError) {
    let mut files = SimpleFiles::new();
    let mut snippet = Snippet::error().with_message(&e.message);
    // Read as the manifest was: a FIFO or `/dev/zero` must not hang the error report.
    let text = kiln::boundary::read_regular_file(&e.path, kiln::manifest::MAX_MANIFEST_BYTES);
    if let (Ok(text), Some(span)) = (text, &e.span) {
        let span = span.start.min(text.len())..span.end.min(text.len());
        let id = files.add(e.path.display().to_string(), text);
        snippet = snippet.with_labels(vec![Label::primary(id, span)]);
    } else {
        snippet = snippet.with_notes(vec![format!("in {}:{}", e.path.display(), e.line)]);
    }
    let out = writer();
    let mut lock = out.lock();
    if term::emit(&mut lock, &term::Config::default(), &files, &snippet).is_err() {
        say!("error: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::byte_range;

    #[test]
    fn byte_range_finds_line_and_clamps() {
        let text = "ab\ncdef\ng";
        assert_eq!(byte_range(text, 2, &(1..3)), 4..6);
        assert_eq!(byte_range(text, 2, &(1..99)), 4..7);
        assert_eq!(byte_range(text, 9, &(0..1)), 9..9);
    }
}
