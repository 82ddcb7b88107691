//! Temporary kiln projects for the workspace's integration tests (a dev-dependency of `kiln`
//! and `kiln-cli`), so that a new test states its files and its assertions and nothing else.
//!
//! - [`fixture`]: a project written as one string of files (`//- /path` lines).
//! - [`TempProject`]: such a project in a temporary directory: write, edit and remove its
//!   files, build it through the library or the `kiln` binary, read its output tree, and
//!   compare that tree with a clean build's.
//! - [`LiveProject`]: one [`Project`] kept open across builds, told of each edit, as
//!   `kiln watch` keeps it.
//! - [`tree`]: a directory as a sorted map of files.
//! - [`fake_server`]: a loopback TCP server playing a scripted part where a test needs a
//!   Redis that misbehaves (trickles, lies about a value's length).

pub mod fake_server;
pub mod fixture;

use kiln::pipeline::{BuildOptions, BuildReport, Project};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The build cache keeps its private stat records here; they hold inodes and times, which no
/// two builds share, so comparisons of outputs leave the file out.
const STAT_FILE: &str = ".kiln-stat";

/// A kiln project in a temporary directory, removed when this is dropped.
///
/// Library builds use [`TempProject::options`]: `kiln.toml` at the root and two worker
/// threads (the tests of a binary run in parallel; a thread per core each would starve
/// them).
pub struct TempProject {
    dir: tempfile::TempDir,
    options: BuildOptions,
}

impl TempProject {
    /// A project of the files of `fixture` (see [`fixture::parse`]).
    pub fn new(fixture: &str) -> Self {
        Self::from_files(fixture::parse(fixture))
    }

    /// A project of `files`, (path relative to the root, contents) pairs, for tests that
    /// keep their sources in constants or build them in code.
    pub fn from_files<P, T>(files: impl IntoIterator<Item = (P, T)>) -> Self
    where
        P: AsRef<str>,
        T: AsRef<[u8]>,
    {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let options = BuildOptions {
            manifest: dir.path().join("kiln.toml"),
            jobs: Some(2),
            ..BuildOptions::default()
        };
        let project = TempProject { dir, options };
        for (path, text) in files {
            project.write(path.as_ref(), text);
        }
        project
    }

    /// The same project, built with the options `change` makes of the current ones (a test
    /// whose project sits in a subdirectory of the root changes `manifest`).
    pub fn with_options(mut self, change: impl FnOnce(&mut BuildOptions)) -> Self {
        change(&mut self.options);
        self
    }

    /// The options of [`TempProject::build`], [`TempProject::open`] and the clean build of
    /// [`TempProject::assert_same_as_clean`].
    pub fn options(&self) -> &BuildOptions {
        &self.options
    }

    /// The project's root directory.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `relative` under the root.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    /// The output directory: the options' `out_dir`, or kiln's default, `out/` beside the
    /// manifest.
    pub fn out_dir(&self) -> PathBuf {
        self.options.out_dir.clone().unwrap_or_else(|| {
            let manifest = &self.options.manifest;
            manifest
                .parent()
                .expect("the manifest is a file")
                .join("out")
        })
    }

    /// The text of `relative`.
    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative))
            .unwrap_or_else(|e| panic!("read {relative}: {e}"))
    }

    /// Writes `contents` to `relative`, creating its directories.
    pub fn write(&self, relative: &str, contents: impl AsRef<[u8]>) {
        let path = self.path(relative);
        let parent = path.parent().expect("a file under the root has a parent");
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("create {parent:?}: {e}"));
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {relative}: {e}"));
    }

    /// Replaces the first `from` in `relative` with `to`. Panics if the file lacks `from`:
    /// an edit that changes nothing would let a test pass without testing anything.
    pub fn edit(&self, relative: &str, from: &str, to: &str) {
        let text = self.read(relative);
        assert!(text.contains(from), "{relative} lacks {from:?}");
        self.write(relative, text.replacen(from, to, 1));
    }

    /// Removes the file or directory `relative`.
    pub fn remove(&self, relative: &str) {
        let path = self.path(relative);
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.unwrap_or_else(|e| panic!("remove {relative}: {e}"));
    }

    /// A new [`Project`] on this one, with [`TempProject::options`].
    pub fn open(&self) -> Project {
        Project::open(&self.options).unwrap_or_else(|e| panic!("open the project: {e}"))
    }

    /// One build by a new [`Project`], as one `kiln build` does it.
    pub fn build(&self) -> BuildReport {
        self.open()
            .build(&|_| {})
            .unwrap_or_else(|e| panic!("build: {e}"))
    }

    /// This project with a [`Project`] kept open on it across builds.
    pub fn live(self) -> LiveProject {
        let project = self.open();
        LiveProject {
            files: self,
            project,
        }
    }

    /// `kiln <subcommand> --manifest <root>/kiln.toml`, with `bin` the `kiln` binary (its
    /// tests have it as `env!("CARGO_BIN_EXE_kiln")`), for the caller to add arguments to
    /// and run. The remote cache and shard settings of the environment are removed, so that
    /// the shell running the tests does not change what they build.
    pub fn command(&self, bin: impl AsRef<OsStr>, subcommand: &str) -> Command {
        let mut command = Command::new(bin);
        command
            .arg(subcommand)
            .arg("--manifest")
            .arg(&self.options.manifest);
        for var in [
            "KILN_REMOTE",
            "KILN_REMOTE_READ_ONLY",
            "KILN_SHARD",
            "KILN_SHARD_COUNT",
            "JOB_COMPLETION_INDEX",
        ] {
            command.env_remove(var);
        }
        command
    }

    /// Runs `kiln build --json --manifest <root>/kiln.toml <args>` and reads its report.
    pub fn build_cli(&self, bin: impl AsRef<OsStr>, args: &[&str]) -> CliBuild {
        let output = self
            .command(bin, "build")
            .arg("--json")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run kiln: {e}"));
        CliBuild::of(output)
    }

    /// Every file of the output directory (see [`tree`]).
    pub fn tree(&self) -> BTreeMap<String, Vec<u8>> {
        tree(&self.out_dir())
    }

    /// Builds the sources as they are now from scratch, by a new [`Project`] into a new
    /// output directory and store, and asserts that this project's output directory holds
    /// the same files with the same bytes (the stat records aside). `what` names the step
    /// of the test in the failure, which lists the paths that differ.
    pub fn assert_same_as_clean(&self, what: &str) {
        let fresh = tempfile::tempdir().expect("create a temporary directory");
        let options = BuildOptions {
            out_dir: Some(fresh.path().join("out")),
            cache_dir: Some(fresh.path().join("cache")),
            ..self.options.clone()
        };
        Project::open(&options)
            .and_then(|mut project| project.build(&|_| {}))
            .unwrap_or_else(|e| panic!("{what}: the clean build: {e}"));
        let outputs = |dir: &Path| {
            let mut files = tree(dir);
            files.remove(STAT_FILE);
            files
        };
        let clean = outputs(&fresh.path().join("out"));
        // Two empty directories would compare equal whatever the build did.
        assert!(
            clean.contains_key(kiln::pipeline::INDEX_FILE),
            "{what}: the clean build wrote no index"
        );
        let ours = outputs(&self.out_dir());
        let mut differences = Vec::new();
        for (path, bytes) in &ours {
            match clean.get(path) {
                None => differences.push(format!("  only here: {path}")),
                Some(theirs) if theirs != bytes => differences.push(format!(
                    "  differs: {path} ({} bytes here, {} clean)",
                    bytes.len(),
                    theirs.len()
                )),
                Some(_) => {}
            }
        }
        for path in clean.keys().filter(|path| !ours.contains_key(*path)) {
            differences.push(format!("  only in the clean build: {path}"));
        }
        assert!(
            differences.is_empty(),
            "{what}: the outputs are not those of a clean build:\n{}",
            differences.join("\n")
        );
    }
}

/// A [`TempProject`] with one [`Project`] kept open across builds, as `kiln watch` keeps it:
/// its `write`, `edit` and `remove` tell the project of the file, as a file event does.
/// Everything else of [`TempProject`] is reached through `Deref`.
pub struct LiveProject {
    files: TempProject,
    /// The open project, for what a test asks of it directly (`is_dirty`, `cache_stats`,
    /// `refresh_files` of a change made by hand...).
    pub project: Project,
}

impl Deref for LiveProject {
    type Target = TempProject;

    fn deref(&self) -> &TempProject {
        &self.files
    }
}

impl LiveProject {
    /// [`TempProject::write`], then tells the project.
    pub fn write(&mut self, relative: &str, contents: impl AsRef<[u8]>) {
        self.files.write(relative, contents);
        self.project.refresh_files(&[self.files.path(relative)]);
    }

    /// [`TempProject::edit`], then tells the project.
    pub fn edit(&mut self, relative: &str, from: &str, to: &str) {
        self.files.edit(relative, from, to);
        self.project.refresh_files(&[self.files.path(relative)]);
    }

    /// [`TempProject::remove`], then tells the project.
    pub fn remove(&mut self, relative: &str) {
        self.files.remove(relative);
        self.project.refresh_files(&[self.files.path(relative)]);
    }

    /// Edits `kiln.toml` as [`TempProject::edit`] does and reloads it; panics unless the
    /// project takes it as a change (an edit the manifest ignores would test nothing).
    pub fn edit_manifest(&mut self, from: &str, to: &str) {
        self.files.edit("kiln.toml", from, to);
        let changed = self
            .project
            .reload_manifest()
            .unwrap_or_else(|e| panic!("reload the manifest: {e}"));
        assert!(
            changed,
            "the manifest edit {from:?} -> {to:?} changed nothing"
        );
    }

    /// One build of the open project.
    pub fn build(&mut self) -> BuildReport {
        self.project
            .build(&|_| {})
            .unwrap_or_else(|e| panic!("build: {e}"))
    }

    /// [`LiveProject::build`], asserting that no variant failed.
    pub fn build_ok(&mut self) -> BuildReport {
        let report = self.build();
        assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
        report
    }
}

/// What `kiln build --json` said: its report, its exit code and its standard error.
#[derive(Debug)]
pub struct CliBuild {
    /// The JSON report printed on standard output.
    pub report: Value,
    /// The exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard error, the human diagnostics.
    pub stderr: String,
}

impl CliBuild {
    /// Reads the report of a finished `kiln build --json`; panics, showing both streams, if
    /// standard output holds no JSON.
    pub fn of(output: Output) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let report = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("no JSON report ({e}); stdout: {stdout}\nstderr: {stderr}"));
        CliBuild {
            report,
            code: output.status.code().unwrap_or(-1),
            stderr,
        }
    }
}

/// Every file under `dir`, by path relative to it with `/` between components, sorted.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<String, Vec<u8>>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {dir:?}: {e}"));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(root, &path, into);
                continue;
            }
            let relative = path
                .strip_prefix(root)
                .expect("under the root")
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
            into.insert(relative, bytes);
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}
