//! The build's outputs: one file per (variant, target) under the output directory, and
//! `index.json` describing them. Files are written atomically and only when their content
//! changed; `index.json` is replaced atomically after every build.

pub(crate) mod confine;
pub(crate) mod holds;
mod interned;
pub(crate) mod pack;
pub(crate) mod recycle;
mod safe_output;
pub(crate) mod stat;

pub(crate) use safe_output::store_save_warning;

use crate::pipeline::{Diagnostic, VariantId};
use crate::store::ContentKey;
use interned::{Text, VariantText};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::base::{INDEX_FILE, WRITING_MARKER};

/// The index of an output directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// The kiln version that wrote it.
    pub kiln_version: String,
    /// One entry per output file, sorted by path.
    pub entries: Vec<IndexEntry>,
    /// Every (variant, target) pair that failed in the build that wrote the index, with
    /// why; sorted. Its other targets' outputs are in `entries`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<IndexFailure>,
    /// The packs written beside the loose outputs (`[output] layout = "both"`), by target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packs: Vec<pack::IndexPack>,
}

/// A (variant, target) pair without a current output: it failed to build.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IndexFailure {
    /// Shader name.
    pub shader: String,
    /// Pass name.
    pub pass: String,
    /// Keywords, canonical order.
    pub keywords: Vec<String>,
    /// Target name.
    pub target: String,
    /// The file the error points at, relative to the project root, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line in `file`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The error.
    pub message: String,
}

impl IndexFailure {
    pub(crate) fn new(variant: &VariantId, target: &str, d: &Diagnostic) -> Self {
        Self {
            shader: variant.shader.to_string(),
            pass: variant.pass.to_string(),
            keywords: variant.keywords.iter().map(|k| k.to_string()).collect(),
            target: target.to_owned(),
            file: d
                .location
                .as_ref()
                .map(|l| l.file.to_string_lossy().replace('\\', "/")),
            line: d.location.as_ref().map(|l| l.line).filter(|l| *l > 0),
            message: d.message.clone(),
        }
    }
}

/// One output file. What a variant's outputs have in common (names, keywords, hashes of
/// what they were built from) is one [`IndexVariant`] shared by the entries of its targets:
/// a build holds one entry per output, 300,000 of them at 100,000 variants. In `index.json`
/// every entry lists all its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The variant the output belongs to.
    pub variant: Arc<IndexVariant>,
    /// Target name.
    pub target: Arc<str>,
    /// Path relative to the output directory, `/`-separated. Boxed: 300,000 entries at
    /// 100,000 variants, and a `String`'s spare capacity field is 2.4 MB of them.
    pub path: Box<str>,
    /// Size in bytes.
    pub bytes: u64,
    /// blake3 of the file's bytes; 64 hex digits in `index.json`.
    pub content_hash: ContentKey,
    /// The output is the last good one of a variant that now fails to build (`kiln watch`
    /// keeps it for hot reload): not current. `kiln build` removes such outputs instead.
    pub stale: bool,
    /// With `stale`: the source revision that failed, 16 hex digits.
    pub failed_revision: Option<Box<str>>,
}

/// What the index records of one file kiln wrote in the output directory (an output or a
/// pack): enough to prove the file still holds kiln's bytes before trusting or removing it.
#[derive(Clone, Copy, Debug)]
pub struct Recorded<'a> {
    /// Path relative to the output directory, `/`-separated.
    pub path: &'a str,
    /// Size in bytes.
    pub bytes: u64,
    /// blake3 of the bytes.
    pub content_hash: &'a ContentKey,
}

impl IndexEntry {
    /// What the index records of the entry's file.
    pub fn recorded(&self) -> Recorded<'_> {
        Recorded {
            path: &self.path,
            bytes: self.bytes,
            content_hash: &self.content_hash,
        }
    }
}

/// What the index entries of one variant's outputs share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexVariant {
    /// Shader name.
    pub shader: Arc<str>,
    /// Pass name.
    pub pass: Arc<str>,
    /// Keywords, canonical order.
    pub keywords: Arc<[Arc<str>]>,
    /// Source revision (content hash of the include closure), 16 hex digits.
    pub revision: Arc<str>,
    /// The variant key's 12-hex digest (for logs).
    pub digest: Arc<str>,
    /// A hash of everything the outputs were built from (source revision, the shader's
    /// manifest entry, the targets, kiln's and naga's versions): when it still matches, an
    /// output is up to date without preprocessing or loading anything.
    pub inputs: Arc<str>,
}

impl IndexVariant {
    /// Whether this is `variant` at the revision named `revision`: then its key and input
    /// stamp, which follow from the revision, can be shared instead of made again (and a
    /// stamp that did not follow would only make a later build look at its outputs again).
    pub(crate) fn names(&self, variant: &VariantId, revision: &str) -> bool {
        *self.revision == *revision
            && self.shader == variant.shader
            && self.pass == variant.pass
            && self.keywords == variant.keywords
    }
}

/// An index entry as `index.json` spells it, every field in line.
#[derive(Serialize)]
struct FlatEntryRef<'a> {
    shader: &'a str,
    pass: &'a str,
    keywords: &'a [Arc<str>],
    revision: &'a str,
    digest: &'a str,
    target: &'a str,
    path: &'a str,
    bytes: u64,
    #[serde(with = "hex_hash")]
    content_hash: ContentKey,
    inputs: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_revision: Option<&'a str>,
}

impl Serialize for IndexEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = &*self.variant;
        FlatEntryRef {
            shader: &v.shader,
            pass: &v.pass,
            keywords: &v.keywords,
            revision: &v.revision,
            digest: &v.digest,
            target: &self.target,
            path: &self.path,
            bytes: self.bytes,
            content_hash: self.content_hash,
            inputs: &v.inputs,
            stale: self.stale,
            failed_revision: self.failed_revision.as_deref(),
        }
        .serialize(s)
    }
}

/// An index entry as read from `index.json`, its strings where they lie in the bytes; see
/// [`interned::entry`].
#[derive(Deserialize)]
struct FlatEntry<'a> {
    #[serde(borrow)]
    shader: Text<'a>,
    #[serde(borrow)]
    pass: Text<'a>,
    #[serde(borrow)]
    keywords: Vec<Text<'a>>,
    #[serde(borrow)]
    revision: Text<'a>,
    #[serde(borrow)]
    digest: Text<'a>,
    #[serde(borrow)]
    target: Text<'a>,
    #[serde(borrow)]
    path: Text<'a>,
    bytes: u64,
    #[serde(with = "hex_hash")]
    content_hash: ContentKey,
    #[serde(default = "Text::empty", borrow)]
    inputs: Text<'a>,
    #[serde(default)]
    stale: bool,
    #[serde(default)]
    failed_revision: Option<Box<str>>,
}

impl<'de> Deserialize<'de> for IndexEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let flat = FlatEntry::deserialize(d)?;
        let (variant, target) = interned::entry(
            VariantText {
                shader: flat.shader,
                pass: flat.pass,
                keywords: flat.keywords,
                revision: flat.revision,
                digest: flat.digest,
                inputs: flat.inputs,
            },
            &flat.target,
        );
        Ok(Self {
            variant,
            target,
            path: Box::from(&*flat.path),
            bytes: flat.bytes,
            content_hash: flat.content_hash,
            stale: flat.stale,
            failed_revision: flat.failed_revision,
        })
    }
}

impl Index {
    /// Reads `dir/index.json`; a missing or unreadable index is an empty one (every output
    /// is then rewritten, which is always safe). Entries whose path is not a normal relative
    /// path inside `dir` are dropped: see [`Index::read_checked`], which also says which.
    pub fn read(dir: &Path) -> Self {
        Self::read_checked(dir).0
    }

    /// [`Index::read`], and a warning for every entry dropped because its path is absolute,
    /// climbs with `..`, or holds `\` or NUL: anyone can edit `index.json`, and kiln removes
    /// the files it lists once their variants leave the manifest.
    pub fn read_checked(dir: &Path) -> (Self, Vec<Diagnostic>) {
        match std::fs::read(dir.join(INDEX_FILE)) {
            Ok(bytes) => Self::from_json_checked(dir, &bytes),
            Err(_) => (Self::default(), Vec::new()),
        }
    }

    /// [`Index::read_checked`] for a build about to replace the index: an `index.json` that
    /// is not kiln's (not a JSON object with a `kiln_version`, as `--out` over a directory
    /// of someone else's files finds) is refused rather than replaced. One an older kiln
    /// wrote in another shape reads as empty (every output is checked again).
    pub(crate) fn read_own(
        dir: &Path,
    ) -> Result<(Self, Vec<Diagnostic>), crate::pipeline::ProjectError> {
        let path = dir.join(INDEX_FILE);
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok((Self::default(), Vec::new()));
        };
        let (index, warnings) = Self::from_json_checked(dir, &bytes);
        if index.kiln_version.is_empty() && !written_by_kiln(&bytes) {
            return Err(crate::pipeline::ProjectError::ForeignIndex { path });
        }
        Ok((index, warnings))
    }

    /// Parses the bytes of `dir/index.json` as [`Index::read_checked`] does: malformed JSON is
    /// an empty index; entries with unsafe paths are dropped with a warning each.
    pub fn from_json_checked(dir: &Path, bytes: &[u8]) -> (Self, Vec<Diagnostic>) {
        // Checked as UTF-8 once, in bulk, rather than string by string as `from_slice` does.
        let mut index: Self = std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| interned::parse(|| serde_json::from_str(text)).ok())
            .unwrap_or_default();
        let mut warnings = safe_output::retain_safe_entries(dir, &mut index.entries);
        warnings.extend(safe_output::retain_safe_packs(dir, &mut index.packs));
        (index, warnings)
    }

    /// Writes `dir/index.json` atomically; returns the written file's metadata.
    pub fn write(&self, dir: &Path) -> std::io::Result<std::fs::Metadata> {
        // Compact: a warm build reads it back, and thousands of entries add up. Streamed
        // through a buffer: at 100,000 variants the whole text would be ~100 MB in memory.
        write_atomic_with(dir, &dir.join(INDEX_FILE), |file| {
            let mut out = std::io::BufWriter::with_capacity(64 << 10, file);
            serde_json::to_writer(&mut out, self).map_err(std::io::Error::other)?;
            out.flush()
        })
    }
}

/// Whether `bytes` are an index some kiln wrote: a JSON object with a `kiln_version`.
fn written_by_kiln(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[allow(dead_code)]
        kiln_version: String,
    }
    serde_json::from_slice::<Probe>(bytes).is_ok()
}

/// `content_hash` as 64 hex digits. Anyone can edit `index.json`: a hash that is not 64 hex
/// digits reads as all zeros, which no file's contents hash to, so the file is re-hashed
/// and rewritten rather than the whole index thrown away.
mod hex_hash {
    use crate::store::ContentKey;
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(hash: &ContentKey, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hash.to_hex())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ContentKey, D::Error> {
        d.deserialize_str(Hex)
    }

    /// Parses the string where it lies (no copy when it has no escapes).
    struct Hex;

    impl serde::de::Visitor<'_> for Hex {
        type Value = ContentKey;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a blake3 hash in hex")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<ContentKey, E> {
            Ok(text.parse().unwrap_or(ContentKey::from_bytes([0; 32])))
        }
    }
}

// The keyword part of a file name is kiln-runtime's rule (`_`, `+`, hashed past the limit), so
// that the runtime can find a variant in an output directory as kiln named it.
pub use kiln_runtime::canon::MAX_KEYWORD_NAME_BYTES;

/// The output path of a variant for a target, relative to the output directory:
/// `Lit/Forward/FOG+SKIN.spv`, `Lit/Forward/_.spv` for no keywords, and past
/// [`MAX_KEYWORD_NAME_BYTES`] of keywords `Lit/Forward/A+B~<32 hex>.spv`.
pub fn output_path(
    shader: &str,
    pass: &str,
    keywords: &[impl AsRef<str>],
    extension: &str,
) -> String {
    let mut path = String::new();
    write_output_path(&mut path, shader, pass, keywords, extension);
    // Held by the index, one per output: no spare capacity.
    path.shrink_to_fit();
    path
}

/// The length of the keyword part of an output's file name, unhashed.
fn keyword_name_len(keywords: &[impl AsRef<str>]) -> usize {
    kiln_runtime::canon::keyword_file_name_len(keywords)
}

/// [`output_path`] into `path` (emptied first), to reuse one buffer for many paths.
pub(crate) fn write_output_path(
    path: &mut String,
    shader: &str,
    pass: &str,
    keywords: &[impl AsRef<str>],
    extension: &str,
) {
    path.clear();
    for part in [shader, "/", pass, "/"] {
        path.push_str(part);
    }
    kiln_runtime::canon::write_keyword_file_name(path, keywords);
    path.push('.');
    path.push_str(extension);
}

/// Whether `path` is [`output_path`] of the same arguments, without building it.
pub(crate) fn is_output_path(
    path: &str,
    shader: &str,
    pass: &str,
    keywords: &[impl AsRef<str>],
    extension: &str,
) -> bool {
    if keyword_name_len(keywords) > MAX_KEYWORD_NAME_BYTES {
        let mut expected = String::new();
        write_output_path(&mut expected, shader, pass, keywords, extension);
        return path == expected;
    }
    let rest = path
        .strip_prefix(shader)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.strip_prefix(pass))
        .and_then(|rest| rest.strip_prefix('/'));
    let Some(mut rest) = rest else {
        return false;
    };
    if keywords.is_empty() {
        rest = match rest.strip_prefix('_') {
            Some(rest) => rest,
            None => return false,
        };
    }
    for (n, keyword) in keywords.iter().enumerate() {
        let after_plus = if n == 0 {
            Some(rest)
        } else {
            rest.strip_prefix('+')
        };
        match after_plus.and_then(|rest| rest.strip_prefix(keyword.as_ref())) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    rest.strip_prefix('.') == Some(extension)
}

/// Prefix of the temporary files outputs and the index are written through.
pub const TEMP_PREFIX: &str = ".kiln-tmp-";

/// A temporary file left by a writer that was killed is removed by the next build once it is
/// this old, where the output directory cannot be locked (see [`OutDirLock`]): a live write
/// takes milliseconds, and another kiln may be writing right now.
pub const TEMP_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// An exclusive advisory lock (`flock`) on an output directory, held by a build from reading
/// the last index to writing the new one: two kiln processes building into one directory
/// take turns instead of interleaving their writes and removals, and a temporary file found
/// there by the holder can only be a killed writer's. The kernel releases it when its holder
/// exits, however it exits.
pub struct OutDirLock {
    /// The open directory the lock is on; `None` where the directory cannot be locked.
    dir: Option<std::fs::File>,
}

impl OutDirLock {
    /// Creates `out_dir` if missing and locks it, waiting while another process holds it.
    /// Returns the lock and whether it had to wait.
    pub fn acquire(out_dir: &Path) -> std::io::Result<(OutDirLock, bool)> {
        std::fs::create_dir_all(out_dir)?;
        #[cfg(unix)]
        {
            let dir = std::fs::File::open(out_dir)?;
            match dir.try_lock() {
                Ok(()) => Ok((OutDirLock { dir: Some(dir) }, false)),
                Err(std::fs::TryLockError::WouldBlock) => {
                    dir.lock()?;
                    Ok((OutDirLock { dir: Some(dir) }, true))
                }
                // A file system without locks (some network and FUSE ones): build unlocked,
                // as before there was a lock, leaving young temporary files alone.
                Err(std::fs::TryLockError::Error(_)) => Ok((OutDirLock { dir: None }, false)),
            }
        }
        #[cfg(not(unix))]
        Ok((OutDirLock { dir: None }, false))
    }

    /// Whether the directory is really locked, so that its temporary files are nobody's.
    pub fn is_exclusive(&self) -> bool {
        self.dir.is_some()
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, then a
/// rename, so that a reader (or a crash) never sees half a file. The file is created with
/// mode 0666 narrowed by the umask, like any build tool's outputs. Returns the written file's
/// metadata, taken before the rename so that it describes kiln's bytes and nobody else's.
///
/// Outputs too get their temporary file beside them, not in one directory: ext4 allocates a
/// new file's inode near its directory's, so temporary files all made in `out/` would crowd
/// one block group, the one where the previous build's removals freed inodes that ext4 scans
/// past for a minute. A killed writer's leftovers are found through the [`WRITING_MARKER`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<std::fs::Metadata> {
    let dir = path.parent().unwrap_or(Path::new("."));
    write_atomic_via(dir, path, bytes)
}

fn write_atomic_via(
    temp_dir: &Path,
    path: &Path,
    bytes: &[u8],
) -> std::io::Result<std::fs::Metadata> {
    write_atomic_with(temp_dir, path, |file| file.write_all(bytes))
}

/// Writes what `fill` writes to `path` atomically, through a temporary file in `temp_dir`.
fn write_atomic_with(
    temp_dir: &Path,
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<std::fs::Metadata> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(TEMP_PREFIX);
    // tempfile's default is 0600; outputs are read by other tools and users.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    // Directories are created only when missing: a `create_dir_all` per file costs a
    // system call per path component on every write.
    let mut file = match builder.tempfile_in(temp_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(temp_dir)?;
            builder.tempfile_in(temp_dir)?
        }
        other => other?,
    };
    fill(file.as_file_mut())?;
    let meta = file.as_file().metadata()?;
    match file.persist(path) {
        Ok(_) => Ok(meta),
        Err(e) if e.error.kind() == std::io::ErrorKind::NotFound => {
            let dir = path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)?;
            e.file.persist(path).map_err(|e| e.error)?;
            Ok(meta)
        }
        Err(e) => Err(e.error),
    }
}

/// Removes the temporary files a killed writer left in `out_dir`: all of them under an
/// exclusive [`OutDirLock`], else those older than [`TEMP_MAX_AGE`]. Directly in `out_dir`
/// (the index and the stat file are written there) always; in every directory below it only
/// when the [`WRITING_MARKER`] says a writer was killed while writing outputs, which it then
/// removes. Returns how many were removed; best effort.
pub fn remove_stale_temps(out_dir: &Path, lock: &OutDirLock) -> usize {
    let marker = out_dir.join(WRITING_MARKER);
    let killed_writer = marker.exists();
    let mut removed = 0;
    let mut dirs = vec![out_dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if killed_writer {
                    dirs.push(entry.path());
                }
                continue;
            }
            if kind.is_file() && is_stale_temp(&entry, dir == out_dir, lock) {
                removed += usize::from(std::fs::remove_file(entry.path()).is_ok());
            }
        }
    }
    if killed_writer && lock.is_exclusive() {
        let _ = std::fs::remove_file(marker);
    }
    removed
}

/// Whether `entry` is a killed writer's temporary file. Earlier versions' names count only
/// directly in `out_dir` (`in_root`), the one place they wrote them.
fn is_stale_temp(entry: &std::fs::DirEntry, in_root: bool, lock: &OutDirLock) -> bool {
    let is_temp = entry
        .file_name()
        .to_str()
        .is_some_and(|name| name.starts_with(TEMP_PREFIX) || (in_root && is_legacy_temp(name)));
    is_temp
        && (lock.is_exclusive()
            || entry
                .metadata()
                .ok()
                .and_then(|meta| meta.modified().ok())
                .and_then(|modified| std::time::SystemTime::now().duration_since(modified).ok())
                .is_some_and(|age| age >= TEMP_MAX_AGE))
}

/// tempfile's default names (`.tmpXXXXXX`), which earlier versions of kiln left behind.
fn is_legacy_temp(name: &str) -> bool {
    name.strip_prefix(".tmp")
        .is_some_and(|rest| rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Removes an output file that no variant produces any more, and its directories if empty.
///
/// Only a file kiln can show it wrote is removed: its index path is a normal relative path,
/// its directory (symbolic links resolved) is inside `out_dir`, it is a regular file (not a
/// link), and its size and blake3 hash are those the index recorded. Returns whether it was
/// removed; a file that fails a check is left alone.
pub fn remove_output(out_dir: &Path, file: &Recorded<'_>) -> std::io::Result<bool> {
    let Some(path) = safe_output::removable_output(out_dir, file)? else {
        return Ok(false);
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut dir: Option<PathBuf> = path.parent().map(Path::to_owned);
    while let Some(d) = dir {
        if d == out_dir || !d.starts_with(out_dir) || std::fs::remove_dir(&d).is_err() {
            break;
        }
        dir = d.parent().map(Path::to_owned);
    }
    Ok(true)
}

/// Marks `out_dir` as being written: a kill from here on may leave temporary files anywhere
/// under it, which the next build looks for while the marker is there. Returns its path,
/// for [`unmark_writing`].
pub(crate) fn mark_writing(out_dir: &Path) -> std::io::Result<PathBuf> {
    let marker = out_dir.join(WRITING_MARKER);
    std::fs::write(&marker, b"")?;
    Ok(marker)
}

/// Every temporary file is gone (renamed into place, or removed on an error): the marker
/// goes.
pub(crate) fn unmark_writing(marker: &Path) {
    let _ = std::fs::remove_file(marker);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(variant: &Arc<IndexVariant>, target: &str, stale: bool) -> IndexEntry {
        IndexEntry {
            variant: Arc::clone(variant),
            target: target.into(),
            path: format!("Lit/Forward/FOG.{target}").into(),
            bytes: 7,
            content_hash: ContentKey::hash(target.as_bytes()),
            stale,
            failed_revision: stale.then(|| "00000000000000ff".into()),
        }
    }

    /// Issue 25, item 8: ten axes of 29-character keywords made file names past 255 bytes.
    #[test]
    fn long_keyword_sets_get_short_distinct_names() {
        let keyword = |axis: usize, on: bool| {
            let word = format!("AXIS{axis:02}_{}", if on { "ON" } else { "OFF" });
            format!("{word:_<29}")
        };
        let mut names = std::collections::BTreeSet::new();
        for bits in 0..1024u32 {
            let keywords: Vec<String> = (0..10)
                .map(|axis| keyword(axis, bits >> axis & 1 == 1))
                .collect();
            assert_eq!(keywords[0].len(), 29);
            let path = output_path("Lit", "Forward", &keywords, "spv");
            let name = path.rsplit('/').next().unwrap();
            assert!(name.len() <= 255 - 10, "{name}");
            assert!(name.contains('~'), "{name}");
            // Whole keywords kept in front, for people reading the directory.
            assert!(name.starts_with(&format!("{}+", keywords[0])), "{name}");
            assert!(is_output_path(&path, "Lit", "Forward", &keywords, "spv"));
            let mut other = keywords.clone();
            other[9] = "X".into();
            assert!(!is_output_path(&path, "Lit", "Forward", &other, "spv"));
            assert!(names.insert(path), "two keyword sets share a name");
        }
        // At the limit a name is still plain; one byte past it, hashed.
        let at_limit = vec!["A".repeat(MAX_KEYWORD_NAME_BYTES)];
        assert_eq!(
            output_path("S", "P", &at_limit, "spv"),
            format!("S/P/{}.spv", at_limit[0])
        );
        let past = vec!["A".repeat(MAX_KEYWORD_NAME_BYTES + 1)];
        let hashed = output_path("S", "P", &past, "spv");
        assert!(
            hashed.starts_with("S/P/~") && hashed.len() == "S/P/~.spv".len() + 32,
            "{hashed}"
        );
        assert!(is_output_path(&hashed, "S", "P", &past, "spv"));
    }

    #[test]
    fn is_output_path_accepts_exactly_what_output_path_builds() {
        let sets: [&[&str]; 4] = [&[], &["FOG"], &["FOG", "SKIN"], &["A", "B", "C"]];
        for keywords in sets {
            for extension in ["spv", "metal"] {
                let path = output_path("Lit", "Forward", keywords, extension);
                assert!(is_output_path(&path, "Lit", "Forward", keywords, extension));
                // Any other argument, or any other path, is refused.
                assert!(!is_output_path(&path, "Li", "Forward", keywords, extension));
                assert!(!is_output_path(&path, "Lit", "Forwar", keywords, extension));
                assert!(!is_output_path(&path, "Lit", "Forward", keywords, "sp"));
                assert!(!is_output_path(&path, "Lit", "Forward", &["X"], extension));
                assert!(!is_output_path(
                    &path,
                    "Lit",
                    "Forward",
                    &["FOG", "SKIN", "X"],
                    extension
                ));
                assert!(!is_output_path(
                    &format!("{path}x"),
                    "Lit",
                    "Forward",
                    keywords,
                    extension
                ));
                assert!(!is_output_path(
                    &format!("x{path}"),
                    "Lit",
                    "Forward",
                    keywords,
                    extension
                ));
                assert!(!is_output_path(
                    &path[1..],
                    "Lit",
                    "Forward",
                    keywords,
                    extension
                ));
            }
        }
        assert!(!is_output_path(
            "Lit/Forward/FOG+.spv",
            "Lit",
            "Forward",
            &["FOG"],
            "spv"
        ));
        assert!(!is_output_path(
            "Lit/Forward/.spv",
            "Lit",
            "Forward",
            &[] as &[&str],
            "spv"
        ));
        assert!(!is_output_path(
            "Lit/Forward/FOGSKIN.spv",
            "Lit",
            "Forward",
            &["FOG", "SKIN"],
            "spv"
        ));
    }

    #[test]
    fn entries_are_written_flat_and_read_back_sharing_their_variant() {
        let variant = Arc::new(IndexVariant {
            shader: "Lit".into(),
            pass: "Forward".into(),
            keywords: Arc::from([Arc::from("FOG")]),
            revision: "0000000000000001".into(),
            digest: "abcdefabcdef".into(),
            inputs: "stamp".into(),
        });
        let index = Index {
            kiln_version: "v".into(),
            entries: vec![entry(&variant, "msl", false), entry(&variant, "spv", true)],
            failures: Vec::new(),
            packs: Vec::new(),
        };
        let json = serde_json::to_string(&index).unwrap();
        let first = format!(
            r#"{{"shader":"Lit","pass":"Forward","keywords":["FOG"],"revision":"0000000000000001","digest":"abcdefabcdef","target":"msl","path":"Lit/Forward/FOG.msl","bytes":7,"content_hash":"{}","inputs":"stamp"}}"#,
            ContentKey::hash(b"msl").to_hex()
        );
        assert!(json.contains(&first), "{json}");
        assert!(
            json.contains(r#""inputs":"stamp","stale":true,"failed_revision":"00000000000000ff"}"#),
            "{json}"
        );

        let (read, warnings) = Index::from_json_checked(Path::new("/out"), json.as_bytes());
        assert!(warnings.is_empty());
        assert_eq!(read, index);
        assert!(Arc::ptr_eq(
            &read.entries[0].variant,
            &read.entries[1].variant
        ));

        // Escapes, as a hand edit may write them, read as the characters they stand for.
        let escaped = json
            .replace(r#""shader":"Lit""#, r#""shader":"L\u0069t""#)
            .replace(
                r#""path":"Lit/Forward/FOG.msl""#,
                r#""path":"Lit\/Forward\/FOG.msl""#,
            );
        assert_ne!(escaped, json);
        let (read, warnings) = Index::from_json_checked(Path::new("/out"), escaped.as_bytes());
        assert!(warnings.is_empty());
        assert_eq!(read, index);

        // Bytes that are not UTF-8 are no index (every output is then checked again).
        let mut broken = json.into_bytes();
        let at = broken.len() / 2;
        broken[at] = 0xff;
        let (read, _) = Index::from_json_checked(Path::new("/out"), &broken);
        assert!(read.entries.is_empty());
    }
}
