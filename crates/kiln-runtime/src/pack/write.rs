//! The pack writer: variants in, the deterministic bytes of a pack out, written atomically.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{
    align_up, ARTIFACTS, DATA, ENTRIES, HEADER_LEN, HEADER_SUM_AT, ID_LISTS, MAGIC, REFLECTION,
    SECTIONS_AT, SECTION_COUNT, SECTION_ROW, SHADERS, STRING_BYTES, STRING_INDEX, TARGETS, VERSION,
};
use crate::canon::{self, NameFault};

/// A variant or a declaration the writer refuses: nothing invalid ever reaches a pack.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A shader, pass, keyword or target name that [`canon::check_name`] refuses.
    #[error("invalid {what} name `{name}`: {fault}")]
    InvalidName {
        /// `shader`, `pass`, `keyword` or `target`.
        what: &'static str,
        /// The name as given.
        name: String,
        /// What is wrong with it.
        fault: NameFault,
    },
    /// A variant of a shader that was not added with [`PackWriter::add_shader`].
    #[error("variant of undeclared shader `{0}`")]
    UnknownShader(String),
    /// A shader added twice.
    #[error("shader `{0}` added twice")]
    DuplicateShader(String),
    /// A variant of a pass its shader does not declare.
    #[error("variant of undeclared pass `{pass}` of shader `{shader}`")]
    UnknownPass {
        /// The shader.
        shader: String,
        /// The pass as given.
        pass: String,
    },
    /// A variant with a keyword its shader does not declare.
    #[error("variant of shader `{shader}` with undeclared keyword `{keyword}`")]
    UnknownKeyword {
        /// The shader.
        shader: String,
        /// The keyword as given.
        keyword: String,
    },
    /// A variant for a target that was not added with [`PackWriter::add_target`].
    #[error("variant for undeclared target `{0}`")]
    UnknownTarget(String),
    /// The same (shader, pass, keyword set, target) added twice.
    #[error("variant {0} added twice")]
    DuplicateVariant(String),
    /// A digest that is not 12 lower-case hex digits.
    #[error("digest `{0}` is not 12 lower-case hex digits")]
    BadDigest(String),
    /// More strings, ids, entries or artifacts than 32-bit indices hold.
    #[error("the pack would be too large: {0}")]
    TooLarge(&'static str),
    /// Writing the file failed.
    #[error("cannot write pack {path}: {source}")]
    Io {
        /// The destination.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The key of an entry, in the pack's order: names compare by bytes, as their ids will.
type EntryKey = (String, String, Vec<String>, String);

struct EntryValue {
    digest: [u8; 12],
    artifact: [u8; 32],
    /// The reflection blob's blake3, `None` for an empty blob.
    reflection: Option<[u8; 32]>,
}

#[derive(Default)]
struct ShaderSpec {
    declared: BTreeSet<String>,
    passes: BTreeSet<String>,
}

/// Collects a build's variants and writes them as one pack.
///
/// Declare each shader (its keywords and passes) and each target first, then add variants.
/// Keyword sets may be given in any order and with repeats; they are canonicalised by
/// [`canon::canonicalize`]. The bytes depend only on what was added, not on the order.
#[derive(Default)]
pub struct PackWriter {
    shaders: BTreeMap<String, ShaderSpec>,
    targets: BTreeSet<String>,
    entries: BTreeMap<EntryKey, EntryValue>,
    /// Distinct artifacts by blake3: identical bytes are held and stored once.
    artifacts: BTreeMap<[u8; 32], Vec<u8>>,
    /// Distinct non-empty reflection blobs by blake3: stored once, in byte order.
    reflections: HashMap<[u8; 32], Vec<u8>>,
}

fn checked(what: &'static str, name: &str) -> Result<String, WriteError> {
    canon::check_name(name).map_err(|fault| WriteError::InvalidName {
        what,
        name: name.to_owned(),
        fault,
    })?;
    Ok(name.to_owned())
}

impl PackWriter {
    /// An empty pack.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares `shader` with its legal keywords and its passes (repeats allowed). The runtime
    /// names the declared keywords when a lookup uses another one.
    pub fn add_shader<K, P>(
        &mut self,
        shader: &str,
        declared: K,
        passes: P,
    ) -> Result<(), WriteError>
    where
        K: IntoIterator,
        K::Item: AsRef<str>,
        P: IntoIterator,
        P::Item: AsRef<str>,
    {
        let name = checked("shader", shader)?;
        if self.shaders.contains_key(&name) {
            return Err(WriteError::DuplicateShader(name));
        }
        let mut spec = ShaderSpec::default();
        for keyword in declared {
            spec.declared.insert(checked("keyword", keyword.as_ref())?);
        }
        for pass in passes {
            spec.passes.insert(checked("pass", pass.as_ref())?);
        }
        self.shaders.insert(name, spec);
        Ok(())
    }

    /// Declares a target (repeats allowed).
    pub fn add_target(&mut self, target: &str) -> Result<(), WriteError> {
        self.targets.insert(checked("target", target)?);
        Ok(())
    }

    /// Adds the variant (`shader`, `pass`, `keywords`) for `target`: its 12-hex `digest` (as
    /// kiln computed it, [`canon::variant_digest`]), its artifact `bytes` and its
    /// `reflection` blob (empty for none). Identical artifacts, and identical reflection
    /// blobs, are stored once.
    #[allow(clippy::too_many_arguments)]
    pub fn add_variant<S: AsRef<str>>(
        &mut self,
        shader: &str,
        pass: &str,
        keywords: &[S],
        target: &str,
        digest: &str,
        bytes: &[u8],
        reflection: &[u8],
    ) -> Result<(), WriteError> {
        let spec = self
            .shaders
            .get(shader)
            .ok_or_else(|| WriteError::UnknownShader(shader.to_owned()))?;
        if !spec.passes.contains(pass) {
            return Err(WriteError::UnknownPass {
                shader: shader.to_owned(),
                pass: pass.to_owned(),
            });
        }
        let mut set: Vec<&str> = keywords.iter().map(AsRef::as_ref).collect();
        for keyword in &set {
            if !spec.declared.contains(*keyword) {
                return Err(WriteError::UnknownKeyword {
                    shader: shader.to_owned(),
                    keyword: (*keyword).to_owned(),
                });
            }
        }
        let n = canon::canonicalize_by(&mut set, |k| k);
        set.truncate(n);
        if !self.targets.contains(target) {
            return Err(WriteError::UnknownTarget(target.to_owned()));
        }
        let digest: [u8; 12] = digest
            .as_bytes()
            .try_into()
            .ok()
            .filter(|d: &[u8; 12]| canon::is_digest(d))
            .ok_or_else(|| WriteError::BadDigest(digest.to_owned()))?;
        let key: EntryKey = (
            shader.to_owned(),
            pass.to_owned(),
            set.iter().map(|k| (*k).to_owned()).collect(),
            target.to_owned(),
        );
        if self.entries.contains_key(&key) {
            return Err(WriteError::DuplicateVariant(format!(
                "{shader}/{pass}[{}] for {target}",
                canon::keyword_text(&set)
            )));
        }
        let hash = *blake3::hash(bytes).as_bytes();
        self.artifacts.entry(hash).or_insert_with(|| bytes.to_vec());
        let reflection = (!reflection.is_empty()).then(|| {
            let sum = *blake3::hash(reflection).as_bytes();
            self.reflections
                .entry(sum)
                .or_insert_with(|| reflection.to_vec());
            sum
        });
        self.entries.insert(
            key,
            EntryValue {
                digest,
                artifact: hash,
                reflection,
            },
        );
        Ok(())
    }

    /// The number of variants added.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no variant was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The pack's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WriteError> {
        // Strings: every name once, in byte order, so ids compare as the names do.
        let mut names: BTreeSet<&str> = BTreeSet::new();
        for (shader, spec) in &self.shaders {
            names.insert(shader);
            names.extend(spec.declared.iter().map(String::as_str));
            names.extend(spec.passes.iter().map(String::as_str));
        }
        names.extend(self.targets.iter().map(String::as_str));
        let ids: HashMap<&str, u32> = names
            .iter()
            .enumerate()
            .map(|(i, &name)| Ok((name, index(i, "strings")?)))
            .collect::<Result<_, WriteError>>()?;
        let id = |name: &str| ids.get(name).copied().unwrap_or(u32::MAX);

        let mut string_index = Vec::new();
        let mut string_bytes = Vec::new();
        for name in &names {
            put_u32(
                &mut string_index,
                index(string_bytes.len(), "string bytes")?,
            );
            put_u32(&mut string_index, index(name.len(), "string bytes")?);
            string_bytes.extend_from_slice(name.as_bytes());
        }

        // Id lists: each distinct list once, in order of first use.
        let mut id_lists: Vec<u32> = Vec::new();
        let mut list_at: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut list = |list: Vec<u32>| -> Result<(u32, u32), WriteError> {
            let count = index(list.len(), "id lists")?;
            if let Some(&first) = list_at.get(&list) {
                return Ok((first, count));
            }
            let first = index(id_lists.len(), "id lists")?;
            id_lists.extend_from_slice(&list);
            list_at.insert(list, first);
            Ok((first, count))
        };

        let mut targets = Vec::new();
        for target in &self.targets {
            put_u32(&mut targets, id(target));
        }

        let artifact_index: HashMap<&[u8; 32], u32> = self
            .artifacts
            .keys()
            .enumerate()
            .map(|(i, hash)| Ok((hash, index(i, "artifacts")?)))
            .collect::<Result<_, WriteError>>()?;

        // Reflection: each distinct non-empty blob once, in byte order, as its length (u64)
        // then its bytes, each blob's length at an 8-aligned offset.
        let mut blobs: Vec<(&[u8; 32], &Vec<u8>)> = self.reflections.iter().collect();
        blobs.sort_unstable_by(|a, b| a.1.cmp(b.1));
        let mut reflection: Vec<u8> = Vec::new();
        let mut blob_at: HashMap<&[u8; 32], (u64, u64)> = HashMap::new();
        for (sum, blob) in blobs {
            pad(&mut reflection);
            put_u64(&mut reflection, blob.len() as u64);
            blob_at.insert(sum, (reflection.len() as u64, blob.len() as u64));
            reflection.extend_from_slice(blob);
        }

        let mut shaders = Vec::new();
        let mut entries = Vec::new();
        let mut entry_count = 0usize;
        for (shader, spec) in &self.shaders {
            let declared = list(spec.declared.iter().map(|k| id(k)).collect())?;
            let passes = list(spec.passes.iter().map(|p| id(p)).collect())?;
            let first = entry_count;
            let range = (shader.clone(), String::new(), Vec::new(), String::new())..;
            for ((s, pass, keywords, target), value) in self.entries.range(range) {
                if s != shader {
                    break;
                }
                let (kw_first, kw_count) = list(keywords.iter().map(|k| id(k)).collect())?;
                put_u32(&mut entries, id(s));
                put_u32(&mut entries, id(pass));
                put_u32(&mut entries, kw_first);
                put_u32(&mut entries, kw_count);
                put_u32(&mut entries, id(target));
                put_u32(
                    &mut entries,
                    artifact_index.get(&value.artifact).copied().unwrap_or(0),
                );
                entries.extend_from_slice(&value.digest);
                put_u32(&mut entries, 0);
                // Reflection: where the blob's bytes start, and their length; (0, 0) for none.
                let (r_at, r_len) = value
                    .reflection
                    .and_then(|sum| blob_at.get(&sum).copied())
                    .unwrap_or((0, 0));
                put_u64(&mut entries, r_at);
                put_u64(&mut entries, r_len);
                entry_count += 1;
            }
            put_u32(&mut shaders, id(shader));
            put_u32(&mut shaders, declared.0);
            put_u32(&mut shaders, declared.1);
            put_u32(&mut shaders, passes.0);
            put_u32(&mut shaders, passes.1);
            put_u32(&mut shaders, index(first, "entries")?);
            put_u32(&mut shaders, index(entry_count - first, "entries")?);
            put_u32(&mut shaders, 0);
            // The checksum of this shader's rows of ENTRIES, checked on its first use.
            let rows = &entries[first * super::ENTRY_RECORD..];
            shaders.extend_from_slice(blake3::hash(rows).as_bytes());
        }
        index(entry_count, "entries")?;

        let mut id_bytes = Vec::with_capacity(id_lists.len() * 4);
        for n in &id_lists {
            put_u32(&mut id_bytes, *n);
        }

        let mut artifacts = Vec::new();
        let mut data = Vec::new();
        for (hash, bytes) in &self.artifacts {
            pad(&mut data);
            put_u64(&mut artifacts, data.len() as u64);
            put_u64(&mut artifacts, bytes.len() as u64);
            artifacts.extend_from_slice(hash);
            data.extend_from_slice(bytes);
        }

        let mut sections: [&[u8]; SECTION_COUNT] = [&[]; SECTION_COUNT];
        sections[STRING_INDEX] = &string_index;
        sections[STRING_BYTES] = &string_bytes;
        sections[ID_LISTS] = &id_bytes;
        sections[TARGETS] = &targets;
        sections[SHADERS] = &shaders;
        sections[ENTRIES] = &entries;
        sections[ARTIFACTS] = &artifacts;
        sections[REFLECTION] = &reflection;
        sections[DATA] = &data;

        let mut out = vec![0u8; HEADER_LEN];
        let mut rows = Vec::with_capacity(SECTION_COUNT * SECTION_ROW);
        for section in sections {
            put_u64(&mut rows, out.len() as u64);
            put_u64(&mut rows, section.len() as u64);
            rows.extend_from_slice(blake3::hash(section).as_bytes());
            out.extend_from_slice(section);
            pad(&mut out);
        }
        let mut header = Vec::with_capacity(HEADER_LEN);
        header.extend_from_slice(&MAGIC);
        put_u32(&mut header, VERSION);
        put_u32(&mut header, HEADER_LEN as u32);
        put_u64(&mut header, out.len() as u64);
        put_u32(&mut header, SECTION_COUNT as u32);
        put_u32(&mut header, 0);
        debug_assert_eq!(header.len(), SECTIONS_AT);
        header.extend_from_slice(&rows);
        debug_assert_eq!(header.len(), HEADER_SUM_AT);
        let sum = blake3::hash(&header);
        header.extend_from_slice(sum.as_bytes());
        out[..HEADER_LEN].copy_from_slice(&header);
        Ok(out)
    }

    /// Writes the pack to `path` atomically: to a temporary file beside it, synced, then
    /// renamed over `path` (and the directory synced where the platform allows). A reader
    /// that mapped the old file keeps reading the old bytes.
    pub fn write(&self, path: &Path) -> Result<(), WriteError> {
        let bytes = self.to_bytes()?;
        write_atomically(path, &bytes).map_err(|source| WriteError::Io {
            path: path.to_owned(),
            source,
        })
    }
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"))?;
    let mut temp_name = std::ffi::OsString::from(format!(
        ".kiln-tmp-{}-{}-",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    temp_name.push(file_name);
    let temp = dir.join(temp_name);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)?;
        #[cfg(unix)]
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn index(n: usize, what: &'static str) -> Result<u32, WriteError> {
    u32::try_from(n)
        .ok()
        .filter(|&n| n < u32::MAX)
        .ok_or(WriteError::TooLarge(what))
}

fn put_u32(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_le_bytes());
}

/// Zero bytes up to the next multiple of [`super::ALIGN`].
fn pad(out: &mut Vec<u8>) {
    let to = align_up(out.len()).unwrap_or(out.len());
    out.resize(to, 0);
}
