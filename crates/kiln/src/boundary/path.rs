//! Paths under the output directory: those read back from `index.json` (untrusted: anyone can
//! edit the file) and those joined from names.

use std::path::{Component, Path, PathBuf};

/// Why a path was refused as a path under the output directory.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnsafePath {
    /// The path is empty.
    #[error("the path is empty")]
    Empty,
    /// The path is absolute, or starts with a drive or root (`/x`, `C:x`, `\\server`).
    #[error("`{0}` is absolute")]
    Absolute(String),
    /// The path has a `..` (or `.`, or an empty) component.
    #[error("`{0}` is not a normal relative path (`..`, `.` or an empty component)")]
    NotNormal(String),
    /// The path holds `\` or NUL.
    #[error("`{0}` holds `\\` or NUL")]
    BadCharacter(String),
    /// A directory on the way to the path is a symbolic link.
    #[error("`{0}` is a symbolic link; kiln writes only through real directories")]
    Linked(String),
    /// After symbolic links are resolved, the path is outside the output directory.
    #[error("`{path}` resolves to {}, outside the output directory", resolved.display())]
    Escapes {
        /// The path as given.
        path: String,
        /// Where it leads.
        resolved: PathBuf,
    },
}

/// Checks a `/`-separated path read from `index.json` and returns it as a relative path:
/// relative, every component a normal name (no `..`, no `.`, no empty component, no root, no
/// drive), no `\` and no NUL. Joined to the output directory, such a path names something
/// inside it (symbolic links aside: see [`output_file`] and the removal of outputs).
pub fn index_path(path: &str) -> Result<PathBuf, UnsafePath> {
    check_index_path(path)?;
    Ok(PathBuf::from(path))
}

/// [`index_path`]'s checks alone, without making a path (a warm build checks every entry
/// of `index.json`).
pub fn check_index_path(path: &str) -> Result<(), UnsafePath> {
    if path.is_empty() {
        return Err(UnsafePath::Empty);
    }
    if path.contains(['\\', '\0']) {
        return Err(UnsafePath::BadCharacter(path.to_owned()));
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if path.starts_with('/') || drive {
        return Err(UnsafePath::Absolute(path.to_owned()));
    }
    if path.split('/').any(|part| matches!(part, "" | "." | "..")) {
        return Err(UnsafePath::NotNormal(path.to_owned()));
    }
    // The checks above are textual; make sure the platform reads it the same way.
    if !Path::new(path)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(UnsafePath::NotNormal(path.to_owned()));
    }
    Ok(())
}

/// The file `relative` (as built by `output_path` from checked names) under `out_dir`, after
/// checking that it stays there lexically. A last line of defence: names are validated when
/// the manifest is read, so this fails only if a caller joined an unchecked name.
pub fn output_file(out_dir: &Path, relative: &str) -> Result<PathBuf, UnsafePath> {
    let relative = index_path(relative)?;
    Ok(out_dir.join(relative))
}

/// Whether `path`'s parent directory, with every symbolic link resolved, is `out_dir` or
/// inside it (both resolved). `Ok(None)` when the parent does not exist (nothing to remove).
pub(crate) fn resolved_parent_inside(
    out_dir: &Path,
    path: &Path,
    shown: &str,
) -> Result<Option<()>, UnsafePath> {
    let Some(parent) = path.parent() else {
        return Ok(None);
    };
    let (Ok(real_out), Ok(real_parent)) = (
        std::fs::canonicalize(out_dir),
        std::fs::canonicalize(parent),
    ) else {
        return Ok(None);
    };
    if real_parent.starts_with(&real_out) {
        Ok(Some(()))
    } else {
        Err(UnsafePath::Escapes {
            path: shown.to_owned(),
            resolved: real_parent,
        })
    }
}

/// The first directory of `dir`, from `root` down, that is a symbolic link whose own
/// directory lies in `root` (resolved): a link the project holds. `None` when there is none
/// (components missing from the disk hold no link). Links outside the project, such as a
/// system's `/tmp -> /private/tmp`, are the machine's business and are followed.
pub fn project_link_on(root: &Path, dir: &Path) -> Option<PathBuf> {
    let real_root = std::fs::canonicalize(root).ok()?;
    let dir = std::path::absolute(dir).ok()?;
    let mut at = PathBuf::new();
    for component in dir.components() {
        at.push(component);
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            return None;
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        let parent = at.parent().and_then(|p| std::fs::canonicalize(p).ok());
        if parent.is_some_and(|p| p.starts_with(&real_root)) {
            return Some(at);
        }
    }
    None
}

/// `path` with symbolic links resolved as far as it exists, the rest appended as given: where
/// a directory that is about to be made would be.
pub fn resolved_as_far_as_exists(path: &Path) -> PathBuf {
    let Ok(path) = std::path::absolute(path) else {
        return path.to_owned();
    };
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_paths_must_be_relative_and_normal() {
        assert_eq!(
            index_path("Lit/Forward/_.spv"),
            Ok(PathBuf::from("Lit/Forward/_.spv"))
        );
        for bad in [
            "",
            "../shaders/lit.wgsl",
            "Lit/../../x",
            "/etc/passwd",
            "C:/x",
            "Lit//x",
            "./x",
            "Lit/.",
            "a\\..\\b",
            "a\0b",
            "Lit/",
        ] {
            assert!(index_path(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn output_files_stay_under_the_output_directory() {
        let out = Path::new("/p/out");
        assert_eq!(
            output_file(out, "Lit/Forward/_.spv"),
            Ok(PathBuf::from("/p/out/Lit/Forward/_.spv"))
        );
        assert!(output_file(out, "../Forward/_.spv").is_err());
        assert!(output_file(out, "Lit/../../_.spv").is_err());
    }
}
