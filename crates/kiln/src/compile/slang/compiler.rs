//! Finding and loading the Slang library, and compiling one request in-process.

use std::ffi::{c_int, c_uint, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use super::ffi::{self, Api, MapFileSystem};
use super::{normalize_path, SlangError, SlangFormat, SlangRequest, SlangResponse};
use crate::compile::Stage;

/// The environment variable naming the library file.
pub const LIBRARY_ENV: &str = "KILN_SLANG_LIBRARY";

/// The file names of the library, newest first (`libslang.so` is the name before 2025).
#[cfg(target_os = "linux")]
const LIBRARY_NAMES: &[&str] = &["libslang-compiler.so", "libslang.so"];
#[cfg(target_os = "macos")]
const LIBRARY_NAMES: &[&str] = &["libslang-compiler.dylib", "libslang.dylib"];
#[cfg(windows)]
const LIBRARY_NAMES: &[&str] = &["slang-compiler.dll", "slang.dll"];
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
const LIBRARY_NAMES: &[&str] = &["libslang-compiler.so", "libslang.so"];

/// Where the library is, in the documented order (see the module doc); `Err` lists what was
/// tried.
pub(super) fn locate_library() -> Result<PathBuf, Vec<String>> {
    let mut tried = Vec::new();
    if let Some(path) = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty()) {
        // Named explicitly: used as given, even when missing, so that a typo is reported
        // rather than silently replaced by another copy.
        return Ok(PathBuf::from(path));
    }
    match slangpy_dir() {
        Some(dir) => match library_in(&dir) {
            Some(path) => return Ok(path),
            None => tried.push(format!("slangpy's directory {}", dir.display())),
        },
        None => tried.push("python3's slangpy package (not installed)".to_owned()),
    }
    // Last, the plain names through the loader's search path (LD_LIBRARY_PATH, ld.so.cache):
    // the first that loads.
    for name in LIBRARY_NAMES {
        // SAFETY: as in `Api::load`.
        if unsafe { libloading::Library::new(*name) }.is_ok() {
            return Ok(PathBuf::from(name));
        }
        tried.push(format!("{name} on the loader's path"));
    }
    Err(tried)
}

/// The directory of python3's `slangpy` package, found without importing it (importing
/// loads its native extension and graphics back ends, a quarter second and a GPU probe).
fn slangpy_dir() -> Option<PathBuf> {
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util, os\n\
             s = importlib.util.find_spec('slangpy')\n\
             print(os.path.dirname(s.origin) if s and s.origin else '')",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8(output.stdout).ok()?;
    let dir = dir.trim();
    (output.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}

/// The library file in `dir`: a plain name first, else a versioned one
/// (`libslang-compiler.so.0.2026.12`, what the wheel ships), the last in name order.
fn library_in(dir: &Path) -> Option<PathBuf> {
    for name in LIBRARY_NAMES {
        let path = dir.join(name);
        if path.is_file() {
            return Some(path);
        }
    }
    let mut versioned: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                LIBRARY_NAMES
                    .iter()
                    .any(|l| n.starts_with(&format!("{l}.")))
            })
        })
        .collect();
    // By version, not by text: `.so.0.2026.12` is newer than `.so.0.2026.9`.
    versioned.sort_by_key(|path| {
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .split('.')
            .map(|part| part.parse::<u64>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    versioned.pop()
}

/// The library, once this process has loaded it.
static API: OnceLock<Result<Api, SlangError>> = OnceLock::new();

/// The library, loaded once per process.
pub(super) fn api() -> Result<&'static Api, SlangError> {
    API.get_or_init(|| {
        let path = locate_library().map_err(|tried| SlangError::LibraryNotFound {
            tried: tried.join("; "),
        })?;
        Api::load(&path).map_err(|message| SlangError::Library { message })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The library's path if this process has already loaded it (without looking for it).
pub(super) fn loaded_library() -> Option<&'static Path> {
    API.get()?.as_ref().ok().map(|api| api.path.as_path())
}

/// The library's build tag (`spGetBuildTagString`, e.g. `2026.12`).
pub fn version() -> Result<String, SlangError> {
    let api = api()?;
    // SAFETY: returns a static string.
    Ok(unsafe { ffi::string_from((api.get_build_tag_string)()) })
}

/// A Slang global session, and the library it came from: compiles requests one at a time,
/// in this process. Not crash-isolated: kiln uses it inside its worker processes
/// ([`super::SlangPool`]); tests and tools may use it directly.
///
/// Creating one costs about a quarter second (Slang loads its core module); a request on a
/// warm session costs tens of milliseconds.
pub struct SlangCompiler {
    api: &'static Api,
    session: *mut c_void,
}

impl SlangCompiler {
    /// Loads the library (once per process) and creates a global session.
    pub fn new() -> Result<Self, SlangError> {
        let api = api()?;
        // SAFETY: the argument is deprecated and may be null.
        let session = unsafe { (api.create_session)(std::ptr::null()) };
        if session.is_null() {
            return Err(SlangError::Library {
                message: format!("spCreateSession failed ({})", api.path.display()),
            });
        }
        Ok(Self { api, session })
    }

    /// The library's build tag.
    pub fn version(&self) -> String {
        // SAFETY: returns a static string.
        unsafe { ffi::string_from((self.api.get_build_tag_string)()) }
    }

    /// Compiles `request` for all its targets. `Err` only for a request Slang cannot be
    /// given (a NUL in a name, the main file missing from the map); a shader that does not
    /// compile is an `Ok` response whose outputs are `Err`.
    ///
    /// All targets compile in one Slang request (one front-end pass). If that fails and
    /// there are several targets, each is compiled alone, so that a back end's failure
    /// fails its own target only.
    pub fn compile(&self, request: &SlangRequest) -> Result<SlangResponse, SlangError> {
        let mut files = FxHashMap::default();
        for (path, content) in &request.files {
            let key = normalize_path(path).ok_or_else(|| SlangError::InvalidRequest {
                message: format!("file path {path:?} is not relative to the project root"),
            })?;
            files.insert(key, Arc::clone(content));
        }
        let main_key = normalize_path(&request.main).ok_or_else(|| SlangError::InvalidRequest {
            message: format!(
                "main path {:?} is not relative to the project root",
                request.main
            ),
        })?;
        let main_source =
            files
                .get(&main_key)
                .cloned()
                .ok_or_else(|| SlangError::InvalidRequest {
                    message: format!(
                        "main file {} is not among the request's files",
                        request.main
                    ),
                })?;
        let file_system = MapFileSystem::new(files);
        // A profile Slang does not know fails its own target, before anything compiles.
        let mut outputs: Vec<Result<Vec<u8>, String>> = Vec::with_capacity(request.targets.len());
        let mut compiled = Vec::new();
        for (index, target) in request.targets.iter().enumerate() {
            match self.profile(target.profile.as_deref())? {
                Ok(profile) => {
                    compiled.push((index, profile));
                    outputs.push(Ok(Vec::new()));
                }
                Err(message) => outputs.push(Err(message)),
            }
        }
        if compiled.is_empty() {
            return Ok(SlangResponse {
                outputs,
                ..SlangResponse::default()
            });
        }
        let combined = self.run(request, &main_key, &main_source, &file_system, &compiled)?;
        let diagnostics = combined.diagnostics;
        if !combined.succeeded && compiled.len() > 1 {
            for &(index, profile) in &compiled {
                let alone = self.run(
                    request,
                    &main_key,
                    &main_source,
                    &file_system,
                    &[(index, profile)],
                )?;
                if let Some(result) = alone.outputs.into_iter().next() {
                    outputs[index] = result;
                }
            }
        } else {
            for (&(index, _), result) in compiled.iter().zip(combined.outputs) {
                outputs[index] = result;
            }
        }
        let mut served = Vec::new();
        let mut not_found = Vec::new();
        for load in file_system.loads() {
            let list = if load.served {
                &mut served
            } else {
                &mut not_found
            };
            if !list.contains(&load.path) {
                list.push(load.path);
            }
        }
        Ok(SlangResponse {
            outputs,
            diagnostics,
            served,
            not_found,
        })
    }

    /// The id of a profile name (`Ok(None)` for none); `Ok(Err)` when Slang knows no such
    /// profile.
    fn profile(&self, name: Option<&str>) -> Result<Result<Option<c_uint>, String>, SlangError> {
        let Some(name) = name else {
            return Ok(Ok(None));
        };
        let name_c = CString::new(name).map_err(|_| SlangError::InvalidRequest {
            message: format!("profile {name:?} contains a NUL byte"),
        })?;
        // SAFETY: a live session and a NUL-terminated name.
        let id = unsafe { (self.api.find_profile)(self.session, name_c.as_ptr()) };
        Ok(if id == ffi::PROFILE_UNKNOWN {
            Err(format!("Slang knows no profile named {name:?}"))
        } else {
            Ok(Some(id))
        })
    }

    /// One Slang compile request for `targets` (index in the request, profile id).
    fn run(
        &self,
        request: &SlangRequest,
        main_path: &str,
        main_source: &str,
        file_system: &MapFileSystem,
        targets: &[(usize, Option<c_uint>)],
    ) -> Result<Attempt, SlangError> {
        let api = self.api;
        let c = |what: &str, text: &str| {
            CString::new(text).map_err(|_| SlangError::InvalidRequest {
                message: format!("{what} {text:?} contains a NUL byte"),
            })
        };
        // The normalized path: `#include`s and `import`s resolve from its directory.
        let main_path = c("main path", main_path)?;
        let source = CString::new(main_source).map_err(|_| SlangError::InvalidRequest {
            message: format!("{} contains a NUL byte", request.main),
        })?;
        let entry = c("entry point", &request.entry)?;
        let defines = request
            .defines
            .iter()
            .map(|(k, v)| Ok((c("define", k)?, c("define value", v)?)))
            .collect::<Result<Vec<_>, SlangError>>()?;
        let search_dirs = request
            .search_dirs
            .iter()
            .map(|d| c("search directory", d))
            .collect::<Result<Vec<_>, _>>()?;

        // SAFETY: every pointer passed below is either the live session, the request just
        // created (destroyed by `RequestGuard`), or a NUL-terminated string that outlives
        // the call; Slang copies what it keeps.
        unsafe {
            let raw = (api.create_request)(self.session);
            if raw.is_null() {
                return Err(SlangError::Library {
                    message: "spCreateCompileRequest failed".to_owned(),
                });
            }
            let guard = RequestGuard { api, raw };
            (api.set_file_system)(raw, file_system.as_ptr());
            for &(index, profile) in targets {
                let target_index =
                    (api.add_code_gen_target)(raw, format_code(request.targets[index].format));
                if let Some(profile) = profile {
                    (api.set_target_profile)(raw, target_index, profile);
                }
            }
            (api.set_matrix_layout_mode)(
                raw,
                if request.matrix_layout_column_major {
                    ffi::MATRIX_LAYOUT_COLUMN_MAJOR
                } else {
                    ffi::MATRIX_LAYOUT_ROW_MAJOR
                },
            );
            (api.set_optimization_level)(raw, request.optimization.min(3));
            for (key, value) in &defines {
                (api.add_preprocessor_define)(raw, key.as_ptr(), value.as_ptr());
            }
            for dir in &search_dirs {
                (api.add_search_path)(raw, dir.as_ptr());
            }
            let unit =
                (api.add_translation_unit)(raw, ffi::SOURCE_LANGUAGE_SLANG, std::ptr::null());
            (api.add_translation_unit_source_string)(
                raw,
                unit,
                main_path.as_ptr(),
                source.as_ptr(),
            );
            let entry_index =
                (api.add_entry_point)(raw, unit, entry.as_ptr(), stage_code(request.stage));
            let result = (api.compile)(raw);
            let diagnostics = ffi::string_from((api.get_diagnostic_output)(raw));
            if tracing::enabled!(tracing::Level::TRACE) {
                let count = (api.get_dependency_file_count)(raw);
                let dependencies: Vec<String> = (0..count)
                    .map(|i| ffi::string_from((api.get_dependency_file_path)(raw, i)))
                    .collect();
                tracing::trace!(?dependencies, "Slang's own dependency list");
            }
            let succeeded = result >= 0;
            let mut outputs = Vec::with_capacity(targets.len());
            for target_index in 0..targets.len() {
                if !succeeded {
                    outputs.push(Err(failure_text(&diagnostics, result)));
                    continue;
                }
                let mut blob = std::ptr::null_mut();
                let code = (api.get_entry_point_code_blob)(
                    raw,
                    entry_index,
                    target_index as c_int,
                    &mut blob,
                );
                if code < 0 || blob.is_null() {
                    outputs.push(Err(failure_text(&diagnostics, code)));
                } else {
                    outputs.push(Ok(ffi::take_blob(blob)));
                }
            }
            drop(guard);
            Ok(Attempt {
                outputs,
                diagnostics,
                succeeded,
            })
        }
    }
}

impl Drop for SlangCompiler {
    fn drop(&mut self) {
        // SAFETY: the session was created by `new` and every request on it is destroyed.
        unsafe { (self.api.destroy_session)(self.session) }
    }
}

/// Destroys a compile request however `run` leaves.
struct RequestGuard {
    api: &'static Api,
    raw: *mut c_void,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        // SAFETY: created by spCreateCompileRequest, destroyed once.
        unsafe { (self.api.destroy_request)(self.raw) }
    }
}

struct Attempt {
    outputs: Vec<Result<Vec<u8>, String>>,
    diagnostics: String,
    succeeded: bool,
}

fn failure_text(diagnostics: &str, result: i32) -> String {
    if diagnostics.trim().is_empty() {
        format!(
            "Slang failed with result 0x{:08x} and no diagnostics",
            result as u32
        )
    } else {
        diagnostics.to_owned()
    }
}

/// `SlangCompileTarget` for each format.
fn format_code(format: SlangFormat) -> c_int {
    match format {
        SlangFormat::Glsl => 2,
        SlangFormat::Hlsl => 5,
        SlangFormat::Spirv => 6,
        SlangFormat::Msl => 24,
        SlangFormat::Wgsl => 28,
    }
}

/// `SlangStage` for each stage.
fn stage_code(stage: Stage) -> c_uint {
    match stage {
        Stage::Vertex => 1,
        Stage::TessControl => 2,
        Stage::TessEvaluation => 3,
        Stage::Geometry => 4,
        Stage::Fragment => 5,
        Stage::Compute => 6,
        Stage::RayGeneration => 7,
        Stage::Intersection => 8,
        Stage::AnyHit => 9,
        Stage::ClosestHit => 10,
        Stage::Miss => 11,
        Stage::Callable => 12,
        Stage::Mesh => 13,
        Stage::Task => 14,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_library_in_a_directory_is_the_plain_name_else_the_newest_versioned_one() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(library_in(dir.path()), None);
        for name in [
            "libslang-compiler.so.0.2026.9",
            "libslang-compiler.so.0.2026.12",
            "libslang-glslang-2026.12.so",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        assert_eq!(
            library_in(dir.path()),
            Some(dir.path().join("libslang-compiler.so.0.2026.12"))
        );
        std::fs::write(dir.path().join("libslang-compiler.so"), b"").unwrap();
        assert_eq!(
            library_in(dir.path()),
            Some(dir.path().join("libslang-compiler.so"))
        );
    }
}
