//! Where kiln may write: an output directory that holds none of the project's own files, and
//! inside it only through real directories, never over a file it did not write.
//!
//! Removal was already confined ([`super::safe_output`]); these are the same rules for
//! writing, checked before anything is written:
//! - the output directory is not, and does not contain, the project root, a source, an
//!   include directory or any file the engine read (`kiln build --out .` with a `wgsl`
//!   target would otherwise replace a source with generated WGSL);
//! - no directory of the project on the way to it is a symbolic link (a link in the
//!   project can be anybody's; a link above the project, such as `/tmp`, is the machine's);
//! - below it, every directory an output is written into is a real directory, checked once
//!   per build ([`RealDirs`]);
//! - a file there that `index.json` does not list is not replaced (see
//!   [`crate::pipeline::build`]'s placing of outputs).
//!
//! A process that swaps a checked directory for a link while a build writes could still
//! redirect a write: the checks are against accidents and against what a checkout or a
//! colleague's edit can leave, not against a concurrent local attacker.

use crate::boundary::{project_link_on, resolved_as_far_as_exists, UnsafePath};
use crate::pipeline::ProjectError;
use rustc_hash::FxHashSet;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Refuses an output directory that is a link in the project, or overlaps the project's
/// own files: the project `root`, and every file of `files` (see [`ProjectFiles`]).
pub(crate) fn check_out_dir(
    root: &Path,
    out_dir: &Path,
    files: &ProjectFiles,
) -> Result<(), ProjectError> {
    let refuse = |problem: String| ProjectError::UnsafeDir {
        path: out_dir.to_owned(),
        problem,
    };
    if let Some(link) = project_link_on(root, out_dir) {
        return Err(refuse(format!(
            "{} is a symbolic link in the project; kiln writes outputs only into a real \
             directory (name the directory it leads to with `--out`)",
            link.display()
        )));
    }
    let out = resolved_as_far_as_exists(out_dir);
    let root = resolved_as_far_as_exists(root);
    if root.starts_with(&out) {
        return Err(refuse(format!(
            "it holds the project root {}; outputs would replace the project's files",
            root.display()
        )));
    }
    if !out.starts_with(&root) {
        // Outside the project: none of its files can be in it.
        return Ok(());
    }
    // Those the manifest names by their names under the resolved root, and those that are
    // links also as resolved, for a source that is a link into the output directory (one
    // `lstat` each); the files the engine read, which can be thousands, by one look in
    // their sorted set. This runs before every build, a no-op one too.
    let resolved = |file: &&PathBuf| {
        let linked = std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink());
        linked && std::fs::canonicalize(file).is_ok_and(|r| r.starts_with(&out))
    };
    let named = files.named.iter();
    let read = out.strip_prefix(&root).ok().and_then(|out| {
        // Paths order component by component: those under `out` follow it at once.
        let first = files.read.range(out.to_path_buf()..).next()?;
        first.starts_with(out).then(|| root.join(first))
    });
    let inside = named
        .clone()
        .find(|file| file.starts_with(&out))
        .or_else(|| named.clone().find(resolved))
        .cloned()
        .or(read);
    match inside {
        Some(file) => Err(refuse(format!(
            "it holds {}, a file of the project; outputs must go to a directory of their own",
            file.display()
        ))),
        None => Ok(()),
    }
}

/// The directories under the output directory proven real (not links) in this build, by
/// relative path: each is looked at once however many outputs go into it.
#[derive(Default)]
pub(crate) struct RealDirs {
    checked: Mutex<FxHashSet<Box<str>>>,
}

impl RealDirs {
    /// Checks that every directory on the way from `out_dir` to the output `relative` (a
    /// checked index path) is a real directory or missing (then made by the writer).
    pub fn check(&self, out_dir: &Path, relative: &str) -> Result<(), UnsafePath> {
        let mut ends = relative.match_indices('/').map(|(at, _)| at);
        ends.try_for_each(|end| {
            let dir = &relative[..end];
            if self.known(dir) {
                return Ok(());
            }
            match std::fs::symlink_metadata(out_dir.join(dir)) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    Err(UnsafePath::Linked(dir.to_owned()))
                }
                Ok(meta) if meta.is_dir() => {
                    if let Ok(mut checked) = self.checked.lock() {
                        checked.insert(dir.into());
                    }
                    Ok(())
                }
                // Missing (made by the writer), or not a directory (the write fails and says
                // so): nothing is written through a link either way.
                _ => Ok(()),
            }
        })
    }

    fn known(&self, dir: &str) -> bool {
        self.checked
            .lock()
            .map(|checked| checked.contains(dir))
            .unwrap_or(false)
    }
}

/// The project's own files, which an output directory may not hold.
pub(crate) struct ProjectFiles<'a> {
    /// The manifest, and the sources and include directories it names.
    pub named: Vec<PathBuf>,
    /// Every file the engine read (includes), relative to the root.
    pub read: &'a BTreeSet<PathBuf>,
}

impl<'a> ProjectFiles<'a> {
    /// The files of `manifest`'s project, and `known` (root-relative) ones the engine read.
    pub fn of(manifest: &crate::manifest::Manifest, known: &'a BTreeSet<PathBuf>) -> Self {
        let root = &manifest.root;
        let mut named = vec![manifest.path.clone()];
        for shader in &manifest.shaders {
            named.extend(shader.passes.iter().map(|pass| root.join(&pass.source)));
            named.extend(shader.include_dirs.iter().map(|dir| root.join(dir)));
        }
        named.sort_unstable();
        named.dedup();
        Self { named, read: known }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_source_that_is_a_link_into_the_output_directory_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("out/A")).unwrap();
        std::fs::write(root.join("out/A/_.wgsl"), "fn f() {}").unwrap();
        std::os::unix::fs::symlink(root.join("out/A/_.wgsl"), root.join("a.wgsl")).unwrap();
        let read = BTreeSet::new();
        let files = |named: &[&str]| ProjectFiles {
            named: named.iter().map(|n| root.join(n)).collect(),
            read: &read,
        };
        let out = root.join("out");
        let refused = check_out_dir(&root, &out, &files(&["kiln.toml", "a.wgsl"]));
        assert!(
            matches!(&refused, Err(ProjectError::UnsafeDir { problem, .. }) if problem.contains("a.wgsl")),
            "{refused:?}"
        );
        assert!(check_out_dir(&root, &out, &files(&["kiln.toml"])).is_ok());
        // Lexically inside, whether or not it exists yet.
        assert!(check_out_dir(&root, &out, &files(&["out/B/b.wgsl"])).is_err());
        // A file the engine read (an include), found in the sorted set; `outer/` is not in
        // `out/`.
        let read: BTreeSet<PathBuf> = ["a.wgsl", "out/inc/x.wgsl", "outer/y.wgsl"]
            .map(PathBuf::from)
            .into();
        let with = |read: &BTreeSet<PathBuf>| {
            let files = ProjectFiles {
                named: Vec::new(),
                read,
            };
            check_out_dir(&root, &out, &files).map_err(|e| e.to_string())
        };
        let refused = with(&read).unwrap_err();
        assert!(refused.contains("out/inc/x.wgsl"), "{refused}");
        let mut others = read.clone();
        others.remove(Path::new("out/inc/x.wgsl"));
        assert_eq!(with(&others), Ok(()));
    }

    #[test]
    fn a_link_under_the_output_directory_is_refused_once_checked() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("A/Main")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), out.join("B")).unwrap();
        let dirs = RealDirs::default();
        assert_eq!(dirs.check(&out, "A/Main/_.spv"), Ok(()));
        assert_eq!(dirs.check(&out, "A/New/_.spv"), Ok(()));
        assert_eq!(
            dirs.check(&out, "B/Main/_.spv"),
            Err(UnsafePath::Linked("B".into()))
        );
        assert!(dirs.known("A") && dirs.known("A/Main") && !dirs.known("B"));
    }
}
