//! Reading a project source safely: through its real path, inside the root, a regular file,
//! at most a configured size, valid UTF-8.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// The default cap on the size of one source file (4 MiB). A hand-written shader is a few
/// kilobytes; generated ones can be large, and `[project] max_source_bytes` raises the cap.
///
/// Why not more: naga's WGSL front end takes time quadratic in the number of declarations
/// (measured, unoptimised build: 14.5 s to parse 1 MiB of small functions, 63 s for 2 MiB,
/// 230 s for 4 MiB; issue 9 reports 14 s for a 4 MB shader), so every doubling
/// past this costs each variant of such a shader about four times as long.
pub const DEFAULT_MAX_SOURCE_BYTES: u64 = 4 << 20;

/// Why a project file could not be read. Every variant names the file as given (relative to
/// the project root).
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum SourceReadError {
    /// No such file.
    #[error("{}: no such file", path.display())]
    NotFound {
        /// The file, relative to the root.
        path: PathBuf,
    },
    /// The relative path is absolute or climbs out of the root.
    #[error("{}: not a relative path inside the project root", path.display())]
    InvalidPath {
        /// The path as given.
        path: PathBuf,
    },
    /// After symbolic links are resolved, the file is outside the project root.
    #[error("{}: resolves to {}, outside the project root {}", path.display(), resolved.display(), root.display())]
    OutsideRoot {
        /// The file, relative to the root.
        path: PathBuf,
        /// Its real path.
        resolved: PathBuf,
        /// The real project root.
        root: PathBuf,
    },
    /// The file is a directory, FIFO, socket or device.
    #[error("{}: not a regular file ({kind})", path.display())]
    NotRegularFile {
        /// The file, relative to the root.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The file is larger than the cap.
    #[error("{}: {bytes} bytes, more than the {max} bytes a source may have (raise `max_source_bytes` in `[project]`)", path.display())]
    TooLarge {
        /// The file, relative to the root.
        path: PathBuf,
        /// Its size (at least this; a growing file may be larger).
        bytes: u64,
        /// The cap.
        max: u64,
    },
    /// The file is not valid UTF-8.
    #[error("{}:{line}: not valid UTF-8 (byte {offset})", path.display())]
    NotUtf8 {
        /// The file, relative to the root.
        path: PathBuf,
        /// 1-based line of the first invalid byte.
        line: usize,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// Any other failure to read, with the operating system's message.
    #[error("{}: cannot read: {message}", path.display())]
    Io {
        /// The file, relative to the root.
        path: PathBuf,
        /// The io error's kind.
        kind: io::ErrorKind,
        /// The io error's message.
        message: String,
    },
}

impl SourceReadError {
    fn io(path: &Path, error: &io::Error) -> Self {
        if error.kind() == io::ErrorKind::NotFound {
            return Self::NotFound {
                path: path.to_owned(),
            };
        }
        Self::Io {
            path: path.to_owned(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }

    /// The error as an [`io::Error`] (what a `SourceLoader` returns): [`io::ErrorKind::NotFound`]
    /// only for a missing file, so the preprocessor reports that as a missing include and
    /// everything else as the real reason.
    pub fn to_io_error(&self) -> io::Error {
        let kind = match self {
            Self::NotFound { .. } => io::ErrorKind::NotFound,
            Self::InvalidPath { .. } => io::ErrorKind::InvalidInput,
            Self::OutsideRoot { .. } => io::ErrorKind::PermissionDenied,
            Self::NotUtf8 { .. } => io::ErrorKind::InvalidData,
            Self::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            Self::NotRegularFile { .. } => io::ErrorKind::InvalidInput,
            Self::Io { kind, .. } if *kind == io::ErrorKind::NotFound => io::ErrorKind::Other,
            Self::Io { kind, .. } => *kind,
        };
        io::Error::new(kind, self.to_string())
    }
}

/// Reads `root/relative` as text, refusing anything that is not plainly a project source:
/// a path that is not relative and normal; a file whose real path (symbolic links resolved)
/// is outside `root`'s real path; anything but a regular file (a FIFO is never opened for a
/// blocking read, a device never read); a file larger than `max_bytes`; text that is not
/// UTF-8. A missing file is [`SourceReadError::NotFound`].
pub fn read_project_file(
    root: &Path,
    relative: &Path,
    max_bytes: u64,
) -> Result<String, SourceReadError> {
    let shown = relative;
    if relative.as_os_str().is_empty()
        || !relative
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(SourceReadError::InvalidPath {
            path: shown.to_owned(),
        });
    }
    let real_root = std::fs::canonicalize(root).map_err(|e| SourceReadError::Io {
        path: shown.to_owned(),
        kind: e.kind(),
        message: format!("project root {}: {e}", root.display()),
    })?;
    let real =
        std::fs::canonicalize(root.join(relative)).map_err(|e| SourceReadError::io(shown, &e))?;
    if !real.starts_with(&real_root) {
        return Err(SourceReadError::OutsideRoot {
            path: shown.to_owned(),
            resolved: real,
            root: real_root,
        });
    }
    read_regular(&real, shown, max_bytes, libc_nofollow())
}

/// Reads the regular file at `path` (not a FIFO, device or directory, which would block or
/// never end), at most `max_bytes`, as UTF-8; errors name it as `path`. For files named on
/// the command line, such as the manifest: a final symbolic link is followed.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> Result<String, SourceReadError> {
    read_regular(path, path, max_bytes, 0)
}

#[cfg(unix)]
fn libc_nofollow() -> i32 {
    libc::O_NOFOLLOW
}

#[cfg(not(unix))]
fn libc_nofollow() -> i32 {
    0
}

fn read_regular(
    path: &Path,
    shown: &Path,
    max_bytes: u64,
    flags: i32,
) -> Result<String, SourceReadError> {
    let file = open_nonblocking(path, flags).map_err(|e| SourceReadError::io(shown, &e))?;
    let meta = file
        .metadata()
        .map_err(|e| SourceReadError::io(shown, &e))?;
    if !meta.is_file() {
        return Err(SourceReadError::NotRegularFile {
            path: shown.to_owned(),
            kind: kind_of(&meta),
        });
    }
    if meta.len() > max_bytes {
        return Err(SourceReadError::TooLarge {
            path: shown.to_owned(),
            bytes: meta.len(),
            max: max_bytes,
        });
    }
    // The cap holds even for a file that grows while it is read.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| SourceReadError::io(shown, &e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(SourceReadError::TooLarge {
            path: shown.to_owned(),
            bytes: bytes.len() as u64,
            max: max_bytes,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        SourceReadError::NotUtf8 {
            path: shown.to_owned(),
            line,
            offset,
        }
    })
}

/// Opens for reading without blocking on a FIFO (the caller checks the kind of file on the
/// open descriptor before reading), with `flags` besides (`O_NOFOLLOW`).
fn open_nonblocking(path: &Path, flags: i32) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | flags);
    }
    #[cfg(not(unix))]
    let _ = flags;
    options.open(path)
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    if meta.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    "not a regular file"
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root/shaders")).unwrap();
        std::fs::write(dir.path().join("root/shaders/a.wgsl"), "fn a() {}\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "root:x:0:0\n").unwrap();
        dir
    }

    const MAX: u64 = DEFAULT_MAX_SOURCE_BYTES;

    #[test]
    fn reads_a_regular_file_inside_the_root() {
        let dir = project();
        let root = dir.path().join("root");
        let text = read_project_file(&root, Path::new("shaders/a.wgsl"), MAX).unwrap();
        assert_eq!(text, "fn a() {}\n");
        // A link that stays inside the root is fine.
        symlink(root.join("shaders/a.wgsl"), root.join("b.wgsl")).unwrap();
        assert!(read_project_file(&root, Path::new("b.wgsl"), MAX).is_ok());
    }

    #[test]
    fn a_symlink_leading_outside_the_root_is_refused() {
        let dir = project();
        let root = dir.path().join("root");
        symlink(
            dir.path().join("secret.txt"),
            root.join("shaders/evil.wgsl"),
        )
        .unwrap();
        let e = read_project_file(&root, Path::new("shaders/evil.wgsl"), MAX).unwrap_err();
        assert!(matches!(e, SourceReadError::OutsideRoot { .. }), "{e}");
        assert!(!e.to_string().contains("root:x"), "{e}");
        // So is a linked directory.
        symlink(dir.path(), root.join("up")).unwrap();
        let e = read_project_file(&root, Path::new("up/secret.txt"), MAX).unwrap_err();
        assert!(matches!(e, SourceReadError::OutsideRoot { .. }), "{e}");
    }

    #[test]
    fn devices_and_fifos_are_refused_without_blocking() {
        let dir = project();
        let root = dir.path().join("root");
        // /dev/zero resolves outside the root: refused before it is opened.
        symlink("/dev/zero", root.join("zero.wgsl")).unwrap();
        let e = read_project_file(&root, Path::new("zero.wgsl"), MAX).unwrap_err();
        assert!(matches!(e, SourceReadError::OutsideRoot { .. }), "{e}");
        let fifo = root.join("fifo.wgsl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = read_project_file(&root, Path::new("fifo.wgsl"), MAX).unwrap_err();
        assert_eq!(
            e,
            SourceReadError::NotRegularFile {
                path: PathBuf::from("fifo.wgsl"),
                kind: "a FIFO"
            }
        );
        let e = read_project_file(&root, Path::new("shaders"), MAX).unwrap_err();
        assert!(matches!(e, SourceReadError::NotRegularFile { .. }), "{e}");
    }

    #[test]
    fn size_cap_utf8_and_missing_files_are_told_apart() {
        let dir = project();
        let root = dir.path().join("root");
        let e = read_project_file(&root, Path::new("shaders/a.wgsl"), 4).unwrap_err();
        assert_eq!(
            e,
            SourceReadError::TooLarge {
                path: PathBuf::from("shaders/a.wgsl"),
                bytes: 10,
                max: 4
            }
        );
        std::fs::write(root.join("latin1.wgsl"), b"ok\nfn caf\xe9() {}\n").unwrap();
        let e = read_project_file(&root, Path::new("latin1.wgsl"), MAX).unwrap_err();
        assert_eq!(
            e,
            SourceReadError::NotUtf8 {
                path: PathBuf::from("latin1.wgsl"),
                line: 2,
                offset: 9
            }
        );
        assert_eq!(e.to_io_error().kind(), io::ErrorKind::InvalidData);
        let e = read_project_file(&root, Path::new("nope.wgsl"), MAX).unwrap_err();
        assert!(matches!(e, SourceReadError::NotFound { .. }), "{e}");
        assert_eq!(e.to_io_error().kind(), io::ErrorKind::NotFound);
        let e = read_project_file(&root, Path::new("../secret.txt"), MAX).unwrap_err();
        assert!(matches!(e, SourceReadError::InvalidPath { .. }), "{e}");
    }
}
