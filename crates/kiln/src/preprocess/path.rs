//! Root-relative source paths: normalising the entry and resolving `#include` specs, confined
//! to the project root.
//!
//! Confinement is lexical: `.` and `..` are folded away and a path that would climb above the
//! root is refused. Paths are `/`-separated text, so that a path (and everything hashed from
//! it) is the same on every machine and OS.

use std::path::{Component, Path, PathBuf};

use super::error::PathProblem;

/// Normalises a caller-given, project-root-relative entry path: folds `.` and `..`, refuses
/// absolute paths and paths that leave the root, and returns it `/`-separated.
pub fn normalize_entry(entry: &Path) -> Result<String, PathProblem> {
    let mut parts: Vec<&str> = Vec::new();
    for component in entry.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => return Err(PathProblem::Absolute),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(PathProblem::EscapesRoot);
                }
            }
            Component::Normal(part) => parts.push(part.to_str().ok_or(PathProblem::NotUtf8)?),
        }
    }
    if parts.is_empty() {
        return Err(PathProblem::Empty);
    }
    Ok(parts.join("/"))
}

/// Resolves an `#include "spec"` written in `including` (a normalised, root-relative path) to
/// the included file's normalised root-relative path.
///
/// `spec` is relative to the including file's directory, must use `/`, must not be absolute,
/// and must not leave the project root after normalisation.
pub fn resolve_include(including: &Path, spec: &str) -> Result<PathBuf, PathProblem> {
    let including = including.to_str().ok_or(PathProblem::NotUtf8)?;
    resolve_include_str(including, spec).map(PathBuf::from)
}

/// [`resolve_include`] on `/`-separated text, as the preprocessor holds its paths.
pub(crate) fn resolve_include_str(including: &str, spec: &str) -> Result<String, PathProblem> {
    if spec.is_empty() {
        return Err(PathProblem::Empty);
    }
    if spec.contains('\\') {
        return Err(PathProblem::Backslash);
    }
    if spec.starts_with('/') || has_drive_prefix(spec) {
        return Err(PathProblem::Absolute);
    }
    let mut parts: Vec<&str> = including.split('/').filter(|p| !p.is_empty()).collect();
    // The including file's own name is not part of its directory.
    parts.pop();
    for part in spec.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathProblem::EscapesRoot);
                }
            }
            name => parts.push(name),
        }
    }
    if parts.is_empty() {
        return Err(PathProblem::Empty);
    }
    Ok(parts.join("/"))
}

/// Where an `#include` may find its file, in search order: `"x"` relative to the including
/// file, then in each include directory (normalised, root-relative); `<x>` only in the
/// include directories. Every candidate must stay inside the root, or the include is refused.
pub(crate) fn include_candidates(
    including: &str,
    spec: &str,
    angled: bool,
    include_dirs: &[String],
) -> Result<Vec<String>, PathProblem> {
    let mut candidates = Vec::with_capacity(include_dirs.len() + 1);
    if !angled {
        candidates.push(resolve_include_str(including, spec)?);
    } else {
        // Checked even when no directory is configured, so the error is the same.
        resolve_include_str("x", spec)?;
    }
    for dir in include_dirs {
        // `dir/_` has `dir` as its directory.
        let candidate = resolve_include_str(&format!("{dir}/_"), spec)?;
        if !candidates.contains(&candidate) {
            candidates.push(candidate);
        }
    }
    Ok(candidates)
}

/// `C:...`: a Windows drive prefix, absolute (or drive-relative) on that OS.
fn has_drive_prefix(spec: &str) -> bool {
    let bytes = spec.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_to_the_including_directory() {
        assert_eq!(
            resolve_include_str("a/b/c.wgsl", "d.wgsl"),
            Ok("a/b/d.wgsl".into())
        );
        assert_eq!(
            resolve_include_str("a/b/c.wgsl", "../d.wgsl"),
            Ok("a/d.wgsl".into())
        );
        assert_eq!(
            resolve_include_str("a/b/c.wgsl", "./x/../d.wgsl"),
            Ok("a/b/d.wgsl".into())
        );
        assert_eq!(
            resolve_include_str("c.wgsl", "lib//d.wgsl"),
            Ok("lib/d.wgsl".into())
        );
    }

    #[test]
    fn refuses_escapes_and_absolute_paths() {
        assert_eq!(
            resolve_include_str("a/c.wgsl", "../../etc/passwd"),
            Err(PathProblem::EscapesRoot)
        );
        assert_eq!(
            resolve_include_str("c.wgsl", "../c.wgsl"),
            Err(PathProblem::EscapesRoot)
        );
        assert_eq!(
            resolve_include_str("a/c.wgsl", "/etc/passwd"),
            Err(PathProblem::Absolute)
        );
        assert_eq!(
            resolve_include_str("a/c.wgsl", "C:/x"),
            Err(PathProblem::Absolute)
        );
        assert_eq!(
            resolve_include_str("a/c.wgsl", "..\\x"),
            Err(PathProblem::Backslash)
        );
        assert_eq!(resolve_include_str("a/c.wgsl", ""), Err(PathProblem::Empty));
        assert_eq!(
            resolve_include_str("a/c.wgsl", ".."),
            Err(PathProblem::Empty)
        );
    }

    #[test]
    fn normalizes_entries() {
        assert_eq!(
            normalize_entry(Path::new("./a/../b/c.wgsl")),
            Ok("b/c.wgsl".into())
        );
        assert_eq!(
            normalize_entry(Path::new("../c.wgsl")),
            Err(PathProblem::EscapesRoot)
        );
        assert_eq!(
            normalize_entry(Path::new("/c.wgsl")),
            Err(PathProblem::Absolute)
        );
        assert_eq!(normalize_entry(Path::new(".")), Err(PathProblem::Empty));
    }
}
