//! The include closure of a file: every file reachable through any `#include`, whatever the
//! conditionals around it, so that it covers every variant (a conservative superset).
//!
//! The pipeline hashes the closure's contents into a shader's source revision. An include
//! that names a missing file is listed as missing rather than failing: it may sit under a
//! condition no variant takes, and its later creation must still change the revision.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::cache::{lex, lex_c, Preprocessor};
use super::cpp::lexer::{CLexed, Kind};
use super::cpp::{include_spec, is_include};
use super::directive::Directive;
use super::error::{PreprocessError, SourceLocation};
use super::loader::SourceLoader;
use super::path::{include_candidates, normalize_entry};
use super::{normalize_include_dirs, Dialect};

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

/// Computes the include closure of `entry` (root-relative) for a language, searching
/// `include_dirs` (root-relative) as the preprocessor does.
///
/// Every place an include could be found before the file that exists is listed as missing,
/// so that creating a file there (which would then be included instead) changes the
/// shader's revision.
///
/// Errors: an unreadable entry; an `#include` that is malformed, absolute or escapes the
/// root (anywhere, also under a false condition); a file that exists but cannot be read; an
/// unterminated block comment in a reached file; an invalid include directory.
pub fn include_closure(
    entry: &Path,
    language: Dialect,
    include_dirs: &[PathBuf],
    loader: &dyn SourceLoader,
) -> Result<IncludeClosure, PreprocessError> {
    include_closure_with(entry, language, include_dirs, loader, None)
}

/// One `#include` of a file, as the closure needs it.
struct IncludeRef {
    spec: String,
    angled: bool,
    at: SourceLocation,
}

/// The `#include`s of a file, in order, whatever the conditionals around them.
fn includes_of(
    path: &str,
    source: &Arc<str>,
    language: Dialect,
    cache: Option<&Preprocessor>,
) -> Result<Vec<IncludeRef>, PreprocessError> {
    let malformed = |at: SourceLocation, message: &str| PreprocessError::MalformedDirective {
        at,
        directive: "include".into(),
        message: message.into(),
    };
    let mut includes = Vec::new();
    if language.is_c() {
        let lexed = lex_c(cache, path, source)?;
        for line in lexed.lines().iter().filter(|l| is_include(&lexed, l)) {
            let tokens = lexed.tokens(line);
            let spec = include_spec(&lexed, line).map_err(|(message, token)| {
                let token = token.unwrap_or(&tokens[0]);
                malformed(
                    SourceLocation {
                        file: PathBuf::from(path),
                        line: token.line,
                        columns: token.columns(),
                    },
                    message,
                )
            })?;
            includes.push(IncludeRef {
                spec: spec.path.to_owned(),
                angled: spec.angled,
                at: SourceLocation {
                    file: PathBuf::from(path),
                    line: spec.at.line,
                    columns: spec.at.columns(),
                },
            });
        }
        if language == Dialect::Slang {
            includes.extend(slang_imports(path, &lexed));
        }
        return Ok(includes);
    }
    let lexed = lex(cache, path, source)?;
    for line in lexed.lines().iter().filter(|line| line.directive) {
        let directive = Directive::parse(lexed.text(line));
        if directive.name != "include" {
            continue;
        }
        let at = |span: std::ops::Range<u32>| SourceLocation {
            file: PathBuf::from(path),
            line: line.number,
            columns: lexed.original_column(line, span.start)..lexed.original_column(line, span.end),
        };
        let (spec, span) = directive
            .include_spec()
            .map_err(|message| malformed(at(directive.all_args_span()), message))?;
        includes.push(IncludeRef {
            spec: spec.to_owned(),
            angled: false,
            at: at(span),
        });
    }
    Ok(includes)
}

/// The modules a Slang file imports (`import a.b;`, `import "a/b.slang";`, `__include a;`,
/// `implementing a;`), whatever the conditionals around them, as the files Slang looks for:
/// one reference per file name Slang tries, in its order (see [`slang_module_files`]), each
/// searched from the importing file's directory and then the search directories, as Slang
/// does. A name found under two spellings reaches both files, so the closure is a superset of
/// what Slang reads (and Slang only ever reads from the closure), and every place Slang looks
/// before the file it takes is in the closure, present or missing.
fn slang_imports(path: &str, lexed: &CLexed) -> Vec<IncludeRef> {
    let mut found = Vec::new();
    for line in lexed.lines().iter().filter(|line| !line.directive) {
        let tokens = lexed.tokens(line);
        for (i, token) in tokens.iter().enumerate() {
            let keyword = match &*token.text {
                "import" | "implementing" => SlangImport::Module,
                "__include" => SlangImport::Include,
                _ => continue,
            };
            if token.kind != Kind::Ident {
                continue;
            }
            let Some(first) = tokens.get(i + 1) else {
                continue;
            };
            let at = SourceLocation {
                file: PathBuf::from(path),
                line: first.line,
                columns: first.columns(),
            };
            let files = if first.kind == Kind::Str {
                let Some(spec) = first
                    .text
                    .strip_prefix('"')
                    .and_then(|t| t.strip_suffix('"'))
                else {
                    continue;
                };
                match keyword {
                    SlangImport::Module => {
                        slang_module_files(&[spec.strip_suffix(".slang").unwrap_or(spec)])
                    }
                    SlangImport::Include => slang_include_files(spec),
                }
            } else {
                // A dotted name: identifiers joined by `.`.
                let mut name = Vec::new();
                let mut j = i + 1;
                while let Some(part) = tokens.get(j).filter(|t| t.kind == Kind::Ident) {
                    name.push(&*part.text);
                    if !tokens.get(j + 1).is_some_and(|t| t.is_punct(".")) {
                        break;
                    }
                    j += 2;
                }
                if name.is_empty() {
                    continue;
                }
                slang_module_files(&name)
            };
            found.extend(files.into_iter().map(|spec| IncludeRef {
                spec,
                angled: false,
                at: at.clone(),
            }));
        }
    }
    found
}

#[derive(Clone, Copy)]
enum SlangImport {
    /// `import`, `implementing`: a module.
    Module,
    /// `__include "file"`: a file of the same module.
    Include,
}

/// The file names Slang 2026.12 tries for a module name, in its order (measured: the test
/// `import_rules` of `tests/slang_worker.rs`): for each extension `.slang-module`, `.slang`,
/// `.slang.md`, the name as written, then with `_` spelled `-`; `.` separates directories.
pub(crate) fn slang_module_files(parts: &[&str]) -> Vec<String> {
    let written = parts.join("/");
    let hyphens = written.replace('_', "-");
    let mut spellings = vec![written];
    if hyphens != spellings[0] {
        spellings.push(hyphens);
    }
    let mut files = Vec::new();
    for extension in [".slang-module", ".slang", ".slang.md"] {
        for spelling in &spellings {
            files.push(format!("{spelling}{extension}"));
        }
    }
    files
}

/// The file names Slang tries for `__include "spec"`: the name, then with `.md` (as written
/// with `.slang`; a name without it also as `.slang`, a superset).
fn slang_include_files(spec: &str) -> Vec<String> {
    if spec.ends_with(".slang") {
        vec![spec.to_owned(), format!("{spec}.md")]
    } else {
        vec![
            spec.to_owned(),
            format!("{spec}.slang"),
            format!("{spec}.slang.md"),
        ]
    }
}

/// [`include_closure`], lexing through `cache` when there is one.
pub(crate) fn include_closure_with(
    entry: &Path,
    language: Dialect,
    include_dirs: &[PathBuf],
    loader: &dyn SourceLoader,
    cache: Option<&Preprocessor>,
) -> Result<IncludeClosure, PreprocessError> {
    let include_dirs = normalize_include_dirs(include_dirs)?;
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
    let includes = includes_of(&entry, &source, language, cache)?;

    let mut closure = IncludeClosure::default();
    let mut seen: FxHashSet<Arc<str>> = FxHashSet::default();
    let mut missing: FxHashSet<String> = FxHashSet::default();
    let entry: Arc<str> = entry.into();
    seen.insert(Arc::clone(&entry));
    closure.files.push(PathBuf::from(&*entry));
    // Depth-first with an explicit stack: (file, its includes, index of the next one).
    let mut stack = vec![(entry, includes, 0usize)];
    while let Some((path, includes, next)) = stack.last_mut() {
        let Some(include) = includes.get(*next) else {
            stack.pop();
            continue;
        };
        *next += 1;
        let candidates = include_candidates(path, &include.spec, include.angled, &include_dirs)
            .map_err(|problem| PreprocessError::IncludePathRefused {
                at: include.at.clone(),
                spec: include.spec.clone(),
                problem,
            })?;
        let at = include.at.clone();
        let mut child = None;
        for candidate in candidates {
            if seen.contains(candidate.as_str()) {
                break;
            }
            if missing.contains(&candidate) {
                continue;
            }
            match loader.load(Path::new(&candidate)) {
                Ok(source) => {
                    child = Some((candidate, source));
                    break;
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    missing.insert(candidate.clone());
                    closure.missing.push(MissingInclude {
                        path: PathBuf::from(candidate),
                        at: at.clone(),
                    });
                }
                Err(err) => {
                    return Err(PreprocessError::IncludeUnreadable {
                        at,
                        path: PathBuf::from(candidate),
                        message: err.to_string(),
                    })
                }
            }
        }
        if let Some((child, source)) = child {
            let includes = includes_of(&child, &source, language, cache)?;
            let child: Arc<str> = child.into();
            seen.insert(Arc::clone(&child));
            closure.files.push(PathBuf::from(&*child));
            stack.push((child, includes, 0));
        }
    }
    Ok(closure)
}
