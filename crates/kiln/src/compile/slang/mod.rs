//! Slang shaders, compiled by the Slang compiler library loaded at run time, in
//! crash-isolated worker processes.
//!
//! kiln links no Slang: the library (`libslang-compiler.so`, shipped in the `slangpy` wheel)
//! is loaded with `libloading` the first time it is needed, and only its C functions of the
//! compile-request API are called (`spCreateSession`, `spCreateCompileRequest`, ...). A
//! request ([`SlangRequest`]) and its answer ([`SlangResponse`]) are plain data; a
//! [`SlangPool`] sends each request to one of its persistent worker processes (each with a
//! warm global session), so that a Slang crash (its Metal back end segfaults on some
//! ray-tracing entry points) or hang fails that request alone.
//!
//! # Finding the library
//!
//! In this order:
//! 1. the environment variable `KILN_SLANG_LIBRARY`, a path to the library file, used as
//!    given (a wrong path is an error, not a reason to look elsewhere);
//! 2. the directory of python3's `slangpy` package (`pip install slangpy`), found with
//!    `importlib.util.find_spec` (without importing it): `libslang-compiler.so`, else the
//!    versioned `libslang-compiler.so.*` the wheel ships;
//! 3. the plain names `libslang-compiler.so`, then `libslang.so` (the name before 2025),
//!    through the dynamic loader's search path (`LD_LIBRARY_PATH`, `ld.so.cache`).
//!
//! When none is found, [`SlangError::LibraryNotFound`] says what was tried and what to do.
//!
//! # Exactly what was read
//!
//! Slang never reads the disk for kiln. A request carries every file kiln's engine read
//! (root-relative path to content, the main file included), and the worker gives Slang an
//! `ISlangFileSystem` whose `loadFile` serves only from that map; any other path answers
//! `SLANG_E_NOT_FOUND`. Every path Slang asks for is recorded, in order and once each, in
//! [`SlangResponse::served`] or [`SlangResponse::not_found`], exactly as Slang spelled it;
//! [`normalize_path`] is the one function that turns such a path into the map's
//! root-relative `a/b.slang` form (the worker looks files up through it). The main file is
//! a translation unit whose source comes from the map and whose name is its root-relative
//! path, so that relative `#include`s and `import`s resolve from its directory.
//!
//! What Slang asks for (measured with Slang 2026.12; the test `import_rules` in
//! `tests/slang_worker.rs` pins every line below). `D` is the directory of the file that
//! holds the `import` or `#include` (the main file's, a module's own for its imports, an
//! included file's for its includes), then `S1, S2, ...` the search directories in order;
//! a candidate is `D/name`, `S1/name`, ... and the search stops at the first file served:
//!
//! - `import a;`: for each extension `.slang-module`, `.slang`, `.slang.md` in turn, each
//!   directory: `D/a.slang-module`, `S1/a.slang-module`, ..., `D/a.slang`, `S1/a.slang`,
//!   ..., `D/a.slang.md`, ...;
//! - `import a.b;`: the same with `a/b` (dots are directories);
//! - `import my_mod;`: per extension, the written spelling in each directory, then with
//!   underscores as hyphens: `D/my_mod.slang-module`, `S1/my_mod.slang-module`, ...,
//!   `D/my-mod.slang-module`, ..., `D/my_mod.slang`, ..., `D/my-mod.slang`, ...;
//! - `import "x/y.slang";`: the `.slang` is dropped, then as `import`: `D/x/y.slang-module`,
//!   ..., `D/x/y.slang`, ..., `D/x/y.slang.md`, ...;
//! - `__include "x/y.slang";`: `D/x/y.slang`, `S1/x/y.slang`, ..., then `D/x/y.slang.md`, ...;
//! - `#include "z.slang"`: `D/z.slang`, `S1/z.slang`, ... (no extension added);
//!   `#include <z.slang>`: the search directories only.
//!
//! Slang normalizes what it combines: `D` is empty for a file at the root (`a.slang`, never
//! `./a.slang`), `..` and `.` are resolved (`#include "../common/h.slang"` from
//! `dir/main.slang` asks `common/h.slang`; the search directory `./inc/` gives
//! `inc/h.slang`, `""` and `.` give `h.slang`), and a directory that appears twice in the
//! list (a module's directory that is also a search directory) is asked twice, listed once.
//! The main file itself is never asked for, and a file reached twice under two spellings is
//! read once. So in practice the paths are already root-relative; [`normalize_path`] makes
//! sure of it.
//!
//! # Workers
//!
//! The worker's loop is [`serve_worker`] (the binary `kiln-slang-worker` and the hidden
//! `kiln slang-worker` subcommand both run [`worker_main`]); [`WorkerCommand::locate`] finds
//! the binary. The protocol is length-prefixed frames on the child's stdin and stdout: a
//! JSON hello (the library's version, or why it could not load), then per request one JSON
//! frame in, and one JSON header frame plus one raw frame per successful output out. A
//! worker's stdout is kept for the frames alone: its fd 1 is pointed at stderr, which the
//! pool keeps the end of for crash messages.
//!
//! A worker keeps one global session (creating one costs about 250 ms: Slang loads its core
//! module; a small request on a warm one costs 5 to 30 ms) and gives each request its own
//! compile request on it, so nothing of one request reaches the next. The pool starts
//! workers as requests need them, up to its size (kiln's jobs); a thread that finds every
//! worker busy waits. A worker that dies during a request (a crash in Slang) answers
//! [`SlangError::Crashed`] with its signal, and one that overruns the deadline is killed and
//! answers [`SlangError::TimedOut`]; either is replaced by a new worker on the next request.
//! A crashed request for several targets is retried one target at a time, so that a back
//! end's crash fails its own target (an `Err` output) and the others compile.
//!
//! Within a worker, all targets of a request compile in one Slang request (one front-end
//! pass); if that fails and there are several, each target is compiled alone, so that one
//! back end's error (Metal and WGSL cannot write `double`) fails its own target.

mod bundle;
mod compiler;
mod ffi;
mod front_end;
mod options;
mod pool;
mod protocol;
mod worker;

pub use bundle::SlangBundle;
pub use front_end::{compile_targets, refused, set_worker_command, version_label};
pub use options::{MatrixLayout, SlangOptimization, SlangOptions};

pub use compiler::{version, SlangCompiler, LIBRARY_ENV};
pub use pool::{PoolOptions, SlangPool, WorkerCommand, WORKER_ENV};
pub use worker::{serve_worker, worker_main, TEST_FAULTS_ENV};

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::compile::Stage;

/// One Slang compile: an entry point of a main file, for several targets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlangRequest {
    /// The root-relative path of the entry file (a key of `files`).
    pub main: String,
    /// Every file kiln read for this compile, the main file included: root-relative path
    /// and content. Slang reads nothing else.
    pub files: Vec<(String, Arc<str>)>,
    /// Search directories for `import` and `#include`, root-relative, in order.
    pub search_dirs: Vec<String>,
    /// Preprocessor definitions (keywords as `NAME=1`, then the manifest's defines).
    pub defines: Vec<(String, String)>,
    /// The entry point's name.
    pub entry: String,
    /// The entry point's stage.
    #[serde(with = "stage_name")]
    pub stage: Stage,
    /// What to emit; [`SlangResponse::outputs`] answers in the same order.
    pub targets: Vec<SlangTarget>,
    /// Column-major matrices (Slang's default, and kiln's, is row-major).
    pub matrix_layout_column_major: bool,
    /// Slang's optimization level, 0 to 3 (`SlangOptimizationLevel`; 1 is Slang's default).
    pub optimization: u32,
}

/// An output format Slang writes directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SlangFormat {
    /// SPIR-V binary.
    Spirv,
    /// HLSL text.
    Hlsl,
    /// GLSL text.
    Glsl,
    /// Metal Shading Language text.
    Msl,
    /// WGSL text.
    Wgsl,
}

/// One target of a request: a format and, optionally, a Slang profile for it
/// (`spirv_1_4`, `sm_6_0`, `glsl_450`, ...; Slang's `spFindProfile` names).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlangTarget {
    /// What to emit.
    pub format: SlangFormat,
    /// The profile, or Slang's default for the format.
    pub profile: Option<String>,
}

impl SlangTarget {
    /// A target with Slang's default profile.
    pub fn new(format: SlangFormat) -> Self {
        Self {
            format,
            profile: None,
        }
    }
}

/// Slang's answer to a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlangResponse {
    /// Per target, in the request's order: the code, or Slang's diagnostics for it.
    pub outputs: Vec<Result<Vec<u8>, String>>,
    /// Slang's diagnostics (warnings, and errors) for the whole request.
    pub diagnostics: String,
    /// The paths Slang asked for and got from the request's files, in order, each once,
    /// spelled as Slang passed them (see [`normalize_path`]).
    pub served: Vec<String>,
    /// The paths Slang asked for that were not among the request's files.
    pub not_found: Vec<String>,
}

/// Why a request could not be compiled at all (a shader that does not compile is an `Ok`
/// response whose outputs are `Err`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum SlangError {
    /// No Slang library was found.
    #[error(
        "the Slang compiler library was not found (tried {tried}): pip install slangpy, or set \
         KILN_SLANG_LIBRARY=/path/to/libslang-compiler.so"
    )]
    LibraryNotFound {
        /// What was tried, in order.
        tried: String,
    },
    /// The library was found but could not be loaded or started.
    #[error("the Slang compiler library could not be used: {message}")]
    Library {
        /// The loader's or Slang's message.
        message: String,
    },
    /// The request cannot be given to Slang (a NUL in a name, the main file missing, a
    /// profile Slang does not know).
    #[error("invalid Slang request: {message}")]
    InvalidRequest {
        /// What is wrong.
        message: String,
    },
    /// The worker process died while compiling (a crash in Slang).
    #[error("Slang crashed ({how}) compiling {what}{}", stderr_suffix(stderr))]
    Crashed {
        /// `signal 11`, `exit status 3`, ...
        how: String,
        /// The request: `main.slang, entry main`.
        what: String,
        /// The end of the worker's stderr.
        stderr: String,
    },
    /// The worker did not answer within the deadline, and was killed.
    #[error("Slang took longer than {seconds} s compiling {what}; the worker was killed")]
    TimedOut {
        /// The deadline.
        seconds: u64,
        /// The request.
        what: String,
    },
    /// The worker could not be started or spoke out of protocol.
    #[error("Slang worker: {message}")]
    Worker {
        /// What went wrong.
        message: String,
    },
}

fn stderr_suffix(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// A path Slang passed to `loadFile`, in the root-relative form of [`SlangRequest::files`]:
/// `\` becomes `/`, empty and `.` segments go, `..` removes the segment before it. `None`
/// for a path that is absolute or climbs above the root: no request file can have it.
///
/// `a/./b//c.slang` and `a/x/../b/c.slang` give `a/b/c.slang`; `./m.slang` gives `m.slang`.
pub fn normalize_path(path: &str) -> Option<String> {
    let path = path.replace('\\', "/");
    if path.starts_with('/') || path.as_bytes().get(1) == Some(&b':') {
        return None;
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop()?;
            }
            other => segments.push(other),
        }
    }
    if segments.is_empty() {
        return None;
    }
    Some(segments.join("/"))
}

/// `Stage` on the wire, by its manifest name.
mod stage_name {
    use crate::compile::Stage;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        stage: &Stage,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(stage.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Stage, D::Error> {
        let name = String::deserialize(deserializer)?;
        Stage::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown stage {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_path_gives_root_relative_forms() {
        assert_eq!(normalize_path("a/b.slang").as_deref(), Some("a/b.slang"));
        assert_eq!(normalize_path("./m.slang").as_deref(), Some("m.slang"));
        assert_eq!(
            normalize_path("a/./b//c.slang").as_deref(),
            Some("a/b/c.slang")
        );
        assert_eq!(
            normalize_path("a/x/../b/c.slang").as_deref(),
            Some("a/b/c.slang")
        );
        assert_eq!(normalize_path("a\\b.slang").as_deref(), Some("a/b.slang"));
        assert_eq!(normalize_path("../outside.slang"), None);
        assert_eq!(normalize_path("a/../../outside.slang"), None);
        assert_eq!(normalize_path("/etc/passwd"), None);
        assert_eq!(normalize_path("C:/x.slang"), None);
        assert_eq!(normalize_path(""), None);
    }

    #[test]
    fn requests_round_trip_through_json() {
        let request = SlangRequest {
            main: "m.slang".into(),
            files: vec![("m.slang".into(), Arc::from("void main() {}"))],
            search_dirs: vec!["lib".into()],
            defines: vec![("A".into(), "1".into())],
            entry: "main".into(),
            stage: Stage::Fragment,
            targets: vec![SlangTarget {
                format: SlangFormat::Spirv,
                profile: Some("spirv_1_4".into()),
            }],
            matrix_layout_column_major: true,
            optimization: 1,
        };
        let json = serde_json::to_vec(&request).unwrap();
        assert_eq!(
            serde_json::from_slice::<SlangRequest>(&json).unwrap(),
            request
        );
    }
}
