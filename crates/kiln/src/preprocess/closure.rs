//! The include closure of a file: every file reachable through any `#include`, whatever the
//! conditionals around it, so that it covers every variant (a conservative superset).
//!
//! The pipeline hashes the closure's contents into a shader's source revision. An include
//! that names a missing file is listed as missing rather than failing: it may sit under a
//! condition no variant takes, and its later creation must still change the revision.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::cache::{lex, Preprocessor};
use super::directive::Directive;
use super::error::{PreprocessError, SourceLocation};
use super::loader::SourceLoader;
use super::path::{normalize_entry, resolve_include_str};

/// The files an entry can include, directly or not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct IncludeClosure {
    /// Every readable file reached, entry first, then in depth-first order of first
    /// `#include` (deterministic: it depends only on the files' contents).
    pub files: Vec<PathBuf>,
    /// Includes naming files that do not exist, each path once, in the order first met.
    pub missing: Vec<MissingInclude>,
}

/// An `#include` of a file that does not exist.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MissingInclude {
    /// The resolved root-relative path.
    pub path: PathBuf,
    /// The first `#include` that names it.
    pub at: SourceLocation,
}

/// Computes the include closure of `entry` (root-relative).
///
/// Errors: an unreadable entry; an `#include` that is malformed, absolute or escapes the
/// root (anywhere, also under a false condition); a file that exists but cannot be read; an
/// unterminated block comment in a reached file.
pub fn include_closure(
    entry: &Path,
    loader: &dyn SourceLoader,
) -> Result<IncludeClosure, PreprocessError> {
    include_closure_with(entry, loader, None)
}

/// [`include_closure`], lexing through `cache` when there is one.
pub(crate) fn include_closure_with(
    entry: &Path,
    loader: &dyn SourceLoader,
    cache: Option<&Preprocessor>,
) -> Result<IncludeClosure, PreprocessError> {
    let entry = normalize_entry(entry).map_err(|problem| PreprocessError::InvalidEntryPath {
        path: entry.to_path_buf(),
        problem,
    })?;
    let source =
        loader
            .load(Path::new(&entry))
            .map_err(|err| PreprocessError::EntryUnreadable {
                file: PathBuf::from(&entry),
                message: err.to_string(),
            })?;
    let lexed = lex(cache, &entry, &source)?;

    let mut closure = IncludeClosure::default();
    let mut seen: FxHashSet<Arc<str>> = FxHashSet::default();
    let entry: Arc<str> = entry.into();
    seen.insert(Arc::clone(&entry));
    closure.files.push(PathBuf::from(&*entry));
    // Depth-first with an explicit stack: (file, its lines, index of the next line to scan).
    let mut stack = vec![(entry, lexed, 0usize)];
    while let Some((path, lexed, next)) = stack.last_mut() {
        let Some((index, line)) = lexed.lines()[*next..].iter().enumerate().find(|(_, line)| {
            line.directive && Directive::parse(lexed.text(line)).name == "include"
        }) else {
            stack.pop();
            continue;
        };
        *next += index + 1;
        let directive = Directive::parse(lexed.text(line));
        let at = |span: std::ops::Range<u32>| SourceLocation {
            file: PathBuf::from(&**path),
            line: line.number,
            columns: lexed.original_column(line, span.start)..lexed.original_column(line, span.end),
        };
        let (spec, span) =
            directive
                .include_spec()
                .map_err(|message| PreprocessError::MalformedDirective {
                    at: at(directive.all_args_span()),
                    directive: "include".into(),
                    message: message.into(),
                })?;
        let location = at(span);
        let child = resolve_include_str(path, spec).map_err(|problem| {
            PreprocessError::IncludePathRefused {
                at: location.clone(),
                spec: spec.to_owned(),
                problem,
            }
        })?;
        if seen.contains(child.as_str()) {
            continue;
        }
        let child: Arc<str> = child.into();
        seen.insert(Arc::clone(&child));
        match loader.load(Path::new(&*child)) {
            Ok(source) => {
                let lexed = lex(cache, &child, &source)?;
                closure.files.push(PathBuf::from(&*child));
                stack.push((child, lexed, 0));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                closure.missing.push(MissingInclude {
                    path: PathBuf::from(&*child),
                    at: location,
                })
            }
            Err(err) => {
                return Err(PreprocessError::IncludeUnreadable {
                    at: location,
                    path: PathBuf::from(&*child),
                    message: err.to_string(),
                })
            }
        }
    }
    Ok(closure)
}
