//! The build's outputs: one file per (variant, target) under the output directory, and
//! `index.json` describing them. Files are written atomically and only when their content
//! changed; `index.json` is replaced atomically after every build.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name of the index file in the output directory.
pub const INDEX_FILE: &str = "index.json";

/// The index of an output directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// The kiln version that wrote it.
    pub kiln_version: String,
    /// One entry per output file, sorted by path.
    pub entries: Vec<IndexEntry>,
}

/// One output file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Shader name.
    pub shader: String,
    /// Pass name.
    pub pass: String,
    /// Keywords, canonical order.
    pub keywords: Vec<String>,
    /// Source revision (content hash of the include closure), 16 hex digits.
    pub revision: String,
    /// The variant key's 12-hex digest (for logs).
    pub digest: String,
    /// Target name.
    pub target: String,
    /// Path relative to the output directory, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// blake3 of the file's bytes, hex.
    pub content_hash: String,
    /// A hash of everything the output was built from (source revision, the shader's
    /// manifest entry, the targets, kiln's and naga's versions): when it still matches, the
    /// output is up to date without preprocessing or loading anything.
    #[serde(default)]
    pub inputs: String,
    /// The output is the last good one of a variant that now fails to build (`kiln watch`
    /// keeps it for hot reload): not current. `kiln build` removes such outputs instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// With `stale`: the source revision that failed, 16 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_revision: Option<String>,
}

impl Index {
    /// Reads `dir/index.json`; a missing or unreadable index is an empty one (every output
    /// is then rewritten, which is always safe).
    pub fn read(dir: &Path) -> Self {
        std::fs::read(dir.join(INDEX_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Writes `dir/index.json` atomically.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        // Compact: a warm build reads it back, and thousands of entries add up.
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        write_atomic(&dir.join(INDEX_FILE), &json).map(drop)
    }
}

/// The output path of a variant for a target, relative to the output directory:
/// `Lit/Forward/FOG+SKIN.spv`, `Lit/Forward/_.spv` for no keywords.
pub fn output_path(
    shader: &str,
    pass: &str,
    keywords: &[impl AsRef<str>],
    extension: &str,
) -> String {
    let name = if keywords.is_empty() {
        "_".to_owned()
    } else {
        keywords
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join("+")
    };
    format!("{shader}/{pass}/{name}.{extension}")
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, then a
/// rename, so that a reader (or a crash) never sees half a file. Returns the written file's
/// metadata, taken before the rename so that it describes kiln's bytes and nobody else's.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<std::fs::Metadata> {
    let dir = path.parent().unwrap_or(Path::new("."));
    // Directories are created only when missing: a `create_dir_all` per file costs a
    // system call per path component on every write.
    let mut file = match tempfile::NamedTempFile::new_in(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            tempfile::NamedTempFile::new_in(dir)?
        }
        other => other?,
    };
    file.write_all(bytes)?;
    let meta = file.as_file().metadata()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(meta)
}

/// Removes an output file that no variant produces any more, and its directories if empty.
pub fn remove_output(out_dir: &Path, relative: &str) -> std::io::Result<()> {
    let path = out_dir.join(relative);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut dir: Option<PathBuf> = path.parent().map(Path::to_owned);
    while let Some(d) = dir {
        if d == out_dir || std::fs::remove_dir(&d).is_err() {
            break;
        }
        dir = d.parent().map(Path::to_owned);
    }
    Ok(())
}
