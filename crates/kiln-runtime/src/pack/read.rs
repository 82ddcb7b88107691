//! The pack reader's validation, in three steps (see the module doc of [`super`]):
//!
//! - [`validate`], at open: the header, where every section lies, the checksums of the small
//!   tables (strings, id lists, targets, shaders, reflection) and their invariants, and that
//!   the shaders' entry ranges partition ENTRIES. It returns a [`Layout`].
//! - [`check_shader`], before a shader's entries are first used: their checksum (kept in the
//!   shader's record, so verified at open) and every invariant of its entries.
//! - [`check_artifact`], before an artifact is first served: its record's place among its
//!   neighbours and its bytes' checksum.
//!
//! [`check_all`] adds what no single lookup can see (DATA's and every section's own checksum,
//! every artifact and blob used). Reads through [`View`] never panic, whatever the bytes; they
//! are meaningful once the step covering them has passed.

use std::cmp::Ordering;

use super::{
    align_up, ALIGN, ARTIFACTS, ARTIFACT_RECORD, DATA, ENTRIES, ENTRY_RECORD, HEADER_LEN,
    HEADER_SUM_AT, ID_LISTS, ID_RECORD, MAGIC, REFLECTION, SECTIONS_AT, SECTION_COUNT,
    SECTION_NAMES, SECTION_ROW, SHADERS, SHADER_RECORD, STRING_BYTES, STRING_INDEX, STRING_RECORD,
    TARGETS, VERSION,
};
use crate::canon;

/// A pack that cannot be read: damaged, truncated, not a pack, or of another version.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    /// The file does not start with the pack magic.
    #[error("not a kiln pack (bad magic)")]
    BadMagic,
    /// A version this reader does not read.
    #[error("pack version {0} is not supported (this reader reads version {VERSION})")]
    UnsupportedVersion(u32),
    /// The file is shorter (or longer) than its header says.
    #[error("truncated pack: {len} bytes, its header says {expected}")]
    Truncated {
        /// The file's length.
        len: u64,
        /// The length the header records (or the header's own length).
        expected: u64,
    },
    /// The header's checksum does not match.
    #[error("pack header checksum mismatch")]
    HeaderChecksum,
    /// A section's checksum does not match.
    #[error("pack section `{0}`: checksum mismatch")]
    SectionChecksum(&'static str),
    /// A section's content breaks the format.
    #[error("pack section `{section}`: {what}")]
    Malformed {
        /// The section.
        section: &'static str,
        /// What is wrong.
        what: String,
    },
    /// An artifact's bytes do not match their checksum.
    #[error("pack artifact {0}: checksum mismatch")]
    ArtifactChecksum(u32),
}

fn malformed(section: usize, what: impl Into<String>) -> PackError {
    PackError::Malformed {
        section: SECTION_NAMES[section],
        what: what.into(),
    }
}

/// Words per record.
const SHADER_WORDS: usize = SHADER_RECORD / 4;
const ENTRY_WORDS: usize = ENTRY_RECORD / 4;
const STRING_WORDS: usize = STRING_RECORD / 4;

/// Where each section lies in the file, validated, and what open learnt.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// (offset, len) of each section.
    pub(crate) sections: [(usize, usize); SECTION_COUNT],
    /// Each section's checksum as the header records it.
    pub(crate) sums: [[u8; 32]; SECTION_COUNT],
    /// The reflection blobs: (offset of their bytes, length), by offset.
    pub(crate) blobs: Box<[(u64, u64)]>,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

fn sum_at(bytes: &[u8], at: usize) -> Option<[u8; 32]> {
    let b = bytes.get(at..at.checked_add(32)?)?;
    let mut a = [0u8; 32];
    a.copy_from_slice(b);
    Some(a)
}

/// `bytes` as little-endian u32 words, if it is 4-aligned in memory and a multiple of 4 long.
fn words(bytes: &[u8]) -> Option<&[u32]> {
    // SAFETY: every bit pattern is a valid u32, and `align_to` only reinterprets the part of
    // the slice that is suitably aligned, borrowed for the same lifetime.
    let (before, words, after) = unsafe { bytes.align_to::<u32>() };
    (before.is_empty() && after.is_empty()).then_some(words)
}

/// A shader record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShaderRec {
    pub(crate) name: u32,
    pub(crate) declared: (u32, u32),
    pub(crate) passes: (u32, u32),
    pub(crate) entries: (u32, u32),
    reserved: u32,
}

/// An entry record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryRec {
    pub(crate) shader: u32,
    pub(crate) pass: u32,
    pub(crate) keywords: (u32, u32),
    pub(crate) target: u32,
    pub(crate) artifact: u32,
    index: usize,
    reserved: u32,
    pub(crate) reflection: (u64, u64),
}

/// An artifact record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArtifactRec {
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) sum: [u8; 32],
}

/// The sections of a pack, sliced once: the tables as little-endian words where their records
/// are made of u32s (every section is 8-aligned in the file, and the file is held 8-aligned in
/// memory). Out-of-range reads give zeros and empty strings instead of panicking.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct View<'a> {
    pub(crate) string_index: &'a [u32],
    pub(crate) string_bytes: &'a [u8],
    pub(crate) ids: &'a [u32],
    pub(crate) targets: &'a [u32],
    pub(crate) shaders: &'a [u32],
    shader_bytes: &'a [u8],
    entries: &'a [u32],
    entry_bytes: &'a [u8],
    artifacts: &'a [u8],
    reflection: &'a [u8],
    data: &'a [u8],
}

#[inline]
fn word(words: &[u32], i: usize) -> u32 {
    words.get(i).map_or(0, |&w| u32::from_le(w))
}

/// Strings: the id's bytes in `index`/`bytes` (empty if out of range).
#[inline]
pub(crate) fn string_bytes<'a>(index: &[u32], bytes: &'a [u8], id: u32) -> &'a [u8] {
    let at = id as usize * STRING_WORDS;
    let offset = word(index, at) as usize;
    let len = word(index, at + 1) as usize;
    bytes.get(offset..offset.saturating_add(len)).unwrap_or(&[])
}

impl<'a> View<'a> {
    /// The view of `bytes` as `layout` locates its sections; `None` if a table is not
    /// 4-aligned in memory (never for a validated layout over an 8-aligned buffer).
    pub(crate) fn new(bytes: &'a [u8], layout: &Layout) -> Option<View<'a>> {
        let section = |i: usize| {
            let (at, len) = layout.sections[i];
            bytes.get(at..at.checked_add(len)?)
        };
        let shader_bytes = section(SHADERS)?;
        let entry_bytes = section(ENTRIES)?;
        Some(View {
            string_index: words(section(STRING_INDEX)?)?,
            string_bytes: section(STRING_BYTES)?,
            ids: words(section(ID_LISTS)?)?,
            targets: words(section(TARGETS)?)?,
            shaders: words(shader_bytes)?,
            shader_bytes,
            entries: words(entry_bytes)?,
            entry_bytes,
            artifacts: section(ARTIFACTS)?,
            reflection: section(REFLECTION)?,
            data: section(DATA)?,
        })
    }

    pub(crate) fn string_count(&self) -> usize {
        self.string_index.len() / STRING_WORDS
    }

    /// The bytes of string `id` (empty if out of range): what searches compare, since the
    /// canonical order is byte order and UTF-8 need not be checked again.
    #[inline]
    pub(crate) fn string_bytes(&self, id: u32) -> &'a [u8] {
        string_bytes(self.string_index, self.string_bytes, id)
    }

    /// The string `id`, empty if out of range or not UTF-8 (neither survives validation).
    pub(crate) fn string(&self, id: u32) -> &'a str {
        std::str::from_utf8(self.string_bytes(id)).unwrap_or("")
    }

    /// The id list `(first, count)` (empty if out of range).
    #[inline]
    pub(crate) fn ids(&self, (first, count): (u32, u32)) -> IdList<'a> {
        let at = first as usize;
        IdList(
            self.ids
                .get(at..at.saturating_add(count as usize))
                .unwrap_or(&[]),
        )
    }

    pub(crate) fn targets(&self) -> IdList<'a> {
        IdList(self.targets)
    }

    pub(crate) fn shader_count(&self) -> usize {
        self.shaders.len() / SHADER_WORDS
    }

    /// The name field of shader `i`, without the rest of its record.
    #[inline]
    pub(crate) fn shader_name(&self, i: usize) -> u32 {
        word(self.shaders, i * SHADER_WORDS)
    }

    #[inline]
    pub(crate) fn shader(&self, i: usize) -> ShaderRec {
        let mut f = [0u32; 8];
        if let Some(w) = self.shaders.get(i * SHADER_WORDS..i * SHADER_WORDS + 8) {
            for (f, &w) in f.iter_mut().zip(w) {
                *f = u32::from_le(w);
            }
        }
        ShaderRec {
            name: f[0],
            declared: (f[1], f[2]),
            passes: (f[3], f[4]),
            entries: (f[5], f[6]),
            reserved: f[7],
        }
    }

    /// The checksum of shader `i`'s entries, from its record.
    fn shader_sum(&self, i: usize) -> [u8; 32] {
        sum_at(self.shader_bytes, i * SHADER_RECORD + 32).unwrap_or([0; 32])
    }

    pub(crate) fn entry_count(&self) -> usize {
        self.entries.len() / ENTRY_WORDS
    }

    #[inline]
    pub(crate) fn entry(&self, i: usize) -> EntryRec {
        let at = i * ENTRY_WORDS;
        let mut f = [0u32; ENTRY_WORDS];
        if let Some(rec) = self
            .entries
            .get(at..at + ENTRY_WORDS)
            .and_then(|r| <&[u32; ENTRY_WORDS]>::try_from(r).ok())
        {
            f = rec.map(u32::from_le);
        }
        let g = |n: usize| u64::from(f[n]) | u64::from(f[n + 1]) << 32;
        EntryRec {
            shader: f[0],
            pass: f[1],
            keywords: (f[2], f[3]),
            target: f[4],
            artifact: f[5],
            index: i,
            reserved: f[9],
            reflection: (g(10), g(12)),
        }
    }

    /// An entry's digest (12 hex digits once its shader is checked).
    pub(crate) fn digest(&self, entry: &EntryRec) -> &'a str {
        let at = entry.index * ENTRY_RECORD + 24;
        self.entry_bytes
            .get(at..at + canon::DIGEST_HEX_LEN)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    pub(crate) fn reflection(&self, entry: &EntryRec) -> &'a [u8] {
        let (at, len) = (entry.reflection.0 as usize, entry.reflection.1 as usize);
        self.reflection
            .get(at..at.saturating_add(len))
            .unwrap_or(&[])
    }

    pub(crate) fn artifact_count(&self) -> usize {
        self.artifacts.len() / ARTIFACT_RECORD
    }

    pub(crate) fn artifact(&self, i: usize) -> ArtifactRec {
        let at = i * ARTIFACT_RECORD;
        let s = self.artifacts;
        ArtifactRec {
            offset: u64_at(s, at).unwrap_or(0),
            len: u64_at(s, at + 8).unwrap_or(0),
            sum: sum_at(s, at + 16).unwrap_or([0; 32]),
        }
    }

    /// Artifact `i`'s bytes as its record locates them, unverified.
    #[inline]
    pub(crate) fn artifact_span(&self, i: usize) -> &'a [u8] {
        let at = i * ARTIFACT_RECORD;
        let (offset, len) = (
            u64_at(self.artifacts, at).unwrap_or(0) as usize,
            u64_at(self.artifacts, at + 8).unwrap_or(0) as usize,
        );
        self.data
            .get(offset..offset.saturating_add(len))
            .unwrap_or(&[])
    }

    /// An artifact's bytes, unverified.
    pub(crate) fn artifact_bytes(&self, rec: &ArtifactRec) -> &'a [u8] {
        let (at, len) = (rec.offset as usize, rec.len as usize);
        self.data.get(at..at.saturating_add(len)).unwrap_or(&[])
    }

    /// Binary search of entries `first..end` for (pass, keyword ids, target), reading only
    /// the fields it needs.
    #[inline]
    pub(crate) fn find_entry(
        &self,
        (first, end): (usize, usize),
        pass: u32,
        keywords: &[u32],
        target: u32,
    ) -> Option<usize> {
        let (mut lo, mut hi) = (first, end);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = mid * ENTRY_WORDS;
            let rec: &[u32; ENTRY_WORDS] = self
                .entries
                .get(at..at + ENTRY_WORDS)
                .and_then(|r| r.try_into().ok())?;
            let order = u32::from_le(rec[1]).cmp(&pass).then_with(|| {
                self.ids((u32::from_le(rec[2]), u32::from_le(rec[3])))
                    .0
                    .iter()
                    .map(|&w| u32::from_le(w))
                    .cmp(keywords.iter().copied())
                    .then_with(|| u32::from_le(rec[4]).cmp(&target))
            });
            match order {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(mid),
            }
        }
        None
    }
}

/// A list of u32 ids, read in place.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdList<'a>(&'a [u32]);

impl<'a> IdList<'a> {
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn iter(self) -> impl ExactSizeIterator<Item = u32> + Clone + 'a {
        self.0.iter().map(|&w| u32::from_le(w))
    }

    /// The id at position `i` (0 if out of range).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> u32 {
        word(self.0, i)
    }

    /// The position of `id` (sorted lists only).
    #[inline]
    pub(crate) fn position(&self, id: u32) -> Option<usize> {
        self.0.binary_search_by(|&w| u32::from_le(w).cmp(&id)).ok()
    }

    /// Whether the list holds `id` (sorted lists only).
    pub(crate) fn contains(&self, id: u32) -> bool {
        self.0
            .binary_search_by(|&w| u32::from_le(w).cmp(&id))
            .is_ok()
    }

    fn strictly_increasing(&self) -> bool {
        self.0
            .windows(2)
            .all(|w| u32::from_le(w[0]) < u32::from_le(w[1]))
    }
}

/// Checks the header and the small tables (see the module doc) and returns where the
/// sections lie. `bytes` must be 8-aligned in memory.
pub(crate) fn validate(bytes: &[u8]) -> Result<Layout, PackError> {
    let len = bytes.len() as u64;
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(if MAGIC.starts_with(bytes) {
            PackError::Truncated {
                len,
                expected: HEADER_LEN as u64,
            }
        } else {
            PackError::BadMagic
        });
    }
    let header = bytes.get(..HEADER_LEN).ok_or(PackError::Truncated {
        len,
        expected: HEADER_LEN as u64,
    })?;
    let field = |at| u32_at(header, at).unwrap_or(0);
    let version = field(8);
    if version != VERSION {
        return Err(PackError::UnsupportedVersion(version));
    }
    if blake3::hash(&header[..HEADER_SUM_AT]).as_bytes()[..] != header[HEADER_SUM_AT..] {
        return Err(PackError::HeaderChecksum);
    }
    let file_len = u64_at(header, 16).unwrap_or(0);
    if file_len != len {
        return Err(PackError::Truncated {
            len,
            expected: file_len,
        });
    }
    let header_fault = |what: &str| PackError::Malformed {
        section: "header",
        what: what.to_owned(),
    };
    if field(12) as usize != HEADER_LEN {
        return Err(header_fault("header length"));
    }
    if field(24) as usize != SECTION_COUNT {
        return Err(header_fault("section count"));
    }
    if field(28) != 0 {
        return Err(header_fault("unknown flags"));
    }

    // Sections: back to back at 8-aligned offsets, zero padding, inside the file.
    let mut sections = [(0usize, 0usize); SECTION_COUNT];
    let mut sums = [[0u8; 32]; SECTION_COUNT];
    let mut expected_at = HEADER_LEN;
    for (i, section) in sections.iter_mut().enumerate() {
        let row = SECTIONS_AT + i * SECTION_ROW;
        let at = u64_at(header, row).unwrap_or(u64::MAX);
        let slen = u64_at(header, row + 8).unwrap_or(u64::MAX);
        sums[i] = sum_at(header, row + 16).unwrap_or([0; 32]);
        let (Ok(at), Ok(slen)) = (usize::try_from(at), usize::try_from(slen)) else {
            return Err(malformed(i, "offset or length out of range"));
        };
        if at != expected_at {
            return Err(malformed(
                i,
                format!("starts at {at}, expected {expected_at}"),
            ));
        }
        let end = at
            .checked_add(slen)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| malformed(i, "runs past the end of the file"))?;
        let padded = align_up(end)
            .filter(|&p| p <= bytes.len())
            .ok_or_else(|| malformed(i, "padding runs past the end of the file"))?;
        if bytes[end..padded].iter().any(|&b| b != 0) {
            return Err(malformed(i, "non-zero padding"));
        }
        *section = (at, slen);
        expected_at = padded;
    }
    if expected_at != bytes.len() {
        return Err(PackError::Malformed {
            section: "header",
            what: format!("sections end at {expected_at}, the file at {}", bytes.len()),
        });
    }
    // The small tables' checksums now; ENTRIES is covered per shader (each shader's record
    // holds its entries' checksum), ARTIFACTS per artifact and DATA per artifact, lazily.
    for i in [
        STRING_INDEX,
        STRING_BYTES,
        ID_LISTS,
        TARGETS,
        SHADERS,
        REFLECTION,
    ] {
        let (at, slen) = sections[i];
        if blake3::hash(&bytes[at..at + slen]).as_bytes() != &sums[i] {
            return Err(PackError::SectionChecksum(SECTION_NAMES[i]));
        }
    }
    for (section, record) in [
        (STRING_INDEX, STRING_RECORD),
        (ID_LISTS, ID_RECORD),
        (TARGETS, ID_RECORD),
        (SHADERS, SHADER_RECORD),
        (ENTRIES, ENTRY_RECORD),
        (ARTIFACTS, ARTIFACT_RECORD),
    ] {
        let slen = sections[section].1;
        if slen % record != 0 {
            return Err(malformed(
                section,
                format!("length {slen} is not a multiple of {record}"),
            ));
        }
        if slen / record >= u32::MAX as usize {
            return Err(malformed(section, "too many records"));
        }
    }
    let blobs = reflection_blobs(&bytes[sections[REFLECTION].0..][..sections[REFLECTION].1])?;
    let layout = Layout {
        sections,
        sums,
        blobs: blobs.into_boxed_slice(),
    };
    let view = View::new(bytes, &layout).ok_or_else(|| PackError::Malformed {
        section: "header",
        what: "tables not aligned in memory".to_owned(),
    })?;
    check_tables(view)?;
    Ok(layout)
}

/// The small tables' invariants, once the sections are known to lie in the file.
fn check_tables(view: View<'_>) -> Result<(), PackError> {
    // Strings: back to back, UTF-8, valid names, strictly increasing.
    let strings = view.string_count();
    let string_bytes = view.string_bytes;
    let mut next = 0usize;
    let mut last: Option<&str> = None;
    for id in 0..strings {
        let at = word(view.string_index, id * STRING_WORDS) as usize;
        let slen = word(view.string_index, id * STRING_WORDS + 1) as usize;
        if at != next {
            return Err(malformed(
                STRING_INDEX,
                format!("string {id} is not where the last ended"),
            ));
        }
        next = at + slen;
        let text = string_bytes
            .get(at..next)
            .ok_or_else(|| malformed(STRING_INDEX, format!("string {id} out of bounds")))?;
        let text = std::str::from_utf8(text)
            .map_err(|_| malformed(STRING_BYTES, format!("string {id} is not UTF-8")))?;
        if let Err(fault) = canon::check_name(text) {
            return Err(malformed(
                STRING_BYTES,
                format!("string {id} is not a name: {fault}"),
            ));
        }
        if last.is_some_and(|last| canon::keyword_order(last, text) != Ordering::Less) {
            return Err(malformed(
                STRING_BYTES,
                format!("string {id} is out of order"),
            ));
        }
        last = Some(text);
    }
    if next != string_bytes.len() {
        return Err(malformed(STRING_BYTES, "bytes no string uses"));
    }
    let strings = strings as u32;
    let ids = IdList(view.ids);
    if ids.iter().any(|id| id >= strings) {
        return Err(malformed(ID_LISTS, "a string id out of range"));
    }
    let targets = view.targets();
    if targets.iter().any(|id| id >= strings) || !targets.strictly_increasing() {
        return Err(malformed(TARGETS, "ids out of range or order"));
    }

    // Shaders: names in order, lists in bounds and sorted, entry ranges partitioning ENTRIES.
    let id_count = ids.len() as u64;
    let in_ids = |(first, count): (u32, u32)| u64::from(first) + u64::from(count) <= id_count;
    let entries = view.entry_count();
    let mut next_entry = 0usize;
    for i in 0..view.shader_count() {
        let shader = view.shader(i);
        let fault = |what: &str| malformed(SHADERS, format!("shader {i}: {what}"));
        if shader.name >= strings || shader.reserved != 0 {
            return Err(fault("bad name or reserved field"));
        }
        if i > 0 && view.shader_name(i - 1) >= shader.name {
            return Err(fault("out of order"));
        }
        if !in_ids(shader.declared) || !in_ids(shader.passes) {
            return Err(fault("list out of bounds"));
        }
        let declared = view.ids(shader.declared);
        let passes = view.ids(shader.passes);
        if !declared.strictly_increasing() || !passes.strictly_increasing() {
            return Err(fault("declared keywords or passes out of order"));
        }
        if shader.entries.0 as usize != next_entry {
            return Err(fault("entries not where the last shader's ended"));
        }
        let end = next_entry + shader.entries.1 as usize;
        if end > entries {
            return Err(fault("entries out of bounds"));
        }
        next_entry = end;
    }
    if next_entry != entries {
        return Err(malformed(ENTRIES, "entries no shader owns"));
    }
    Ok(())
}

/// Checks shader `i`'s entries (its record is checked at open): their checksum, then that
/// each is one of its shader's passes, a canonical set of its declared keywords, a target
/// of the pack, an artifact of the pack, a 12-hex digest and a reflection blob or none, in
/// strictly increasing order.
pub(crate) fn check_shader(view: &View<'_>, layout: &Layout, i: usize) -> Result<(), PackError> {
    let shader = view.shader(i);
    let (first, count) = (shader.entries.0 as usize, shader.entries.1 as usize);
    let rows = view
        .entry_bytes
        .get(first * ENTRY_RECORD..(first + count) * ENTRY_RECORD)
        .ok_or_else(|| malformed(SHADERS, format!("shader {i}: entries out of bounds")))?;
    if blake3::hash(rows).as_bytes() != &view.shader_sum(i) {
        return Err(PackError::SectionChecksum(SECTION_NAMES[ENTRIES]));
    }
    let declared = view.ids(shader.declared);
    let passes = view.ids(shader.passes);
    let targets = view.targets();
    let id_count = view.ids.len() as u64;
    let artifacts = view.artifact_count();
    for e in first..first + count {
        let entry = view.entry(e);
        let fault = |what: &str| malformed(ENTRIES, format!("entry {e}: {what}"));
        if entry.shader != shader.name || entry.reserved != 0 {
            return Err(fault("wrong shader or reserved field"));
        }
        if !passes.contains(entry.pass) {
            return Err(fault("pass not declared by its shader"));
        }
        if u64::from(entry.keywords.0) + u64::from(entry.keywords.1) > id_count {
            return Err(fault("keywords out of bounds"));
        }
        let keywords = view.ids(entry.keywords);
        if !keywords.strictly_increasing() || keywords.iter().any(|k| !declared.contains(k)) {
            return Err(fault("keywords not a canonical set of declared keywords"));
        }
        if !targets.contains(entry.target) {
            return Err(fault("unknown target"));
        }
        if entry.artifact as usize >= artifacts {
            return Err(fault("artifact out of range"));
        }
        if !canon::is_digest(view.digest(&entry).as_bytes()) {
            return Err(fault("digest is not 12 lower-case hex digits"));
        }
        if blob_of(layout, entry.reflection).is_none() {
            return Err(fault("reflection is not a blob of the section"));
        }
        if e > first {
            let before = view.entry(e - 1);
            let order = before
                .pass
                .cmp(&entry.pass)
                .then_with(|| view.ids(before.keywords).iter().cmp(keywords.iter()))
                .then_with(|| before.target.cmp(&entry.target));
            if order != Ordering::Less {
                return Err(fault("out of order"));
            }
        }
    }
    Ok(())
}

/// The blob an entry's reflection names: `Some(None)` for none (0, 0), `Some(Some(k))` for
/// blob `k`, `None` if it names no blob exactly.
fn blob_of(layout: &Layout, reflection: (u64, u64)) -> Option<Option<usize>> {
    match reflection {
        (0, 0) => Some(None),
        (at, len) => layout
            .blobs
            .binary_search_by(|&(b, _)| b.cmp(&at))
            .ok()
            .filter(|&k| layout.blobs[k].1 == len)
            .map(Some),
    }
}

/// Checks artifact `i`'s record against its neighbours (it starts where the previous one
/// ended, aligned; its checksum is greater; the last ends DATA) and its bytes against its
/// checksum, and returns its bytes.
pub(crate) fn check_artifact<'a>(view: &View<'a>, i: usize) -> Result<&'a [u8], PackError> {
    let fault = |what: &str| malformed(ARTIFACTS, format!("artifact {i}: {what}"));
    let count = view.artifact_count();
    if i >= count {
        return Err(fault("out of range"));
    }
    let rec = view.artifact(i);
    let expected_at = match i {
        0 => 0,
        _ => {
            let before = view.artifact(i - 1);
            if before.sum >= rec.sum {
                return Err(fault("checksums out of order"));
            }
            before
                .offset
                .checked_add(before.len)
                .and_then(|end| end.checked_add(ALIGN as u64 - 1))
                .map(|n| n & !(ALIGN as u64 - 1))
                .ok_or_else(|| fault("out of bounds"))?
        }
    };
    if rec.offset != expected_at {
        return Err(fault("not where the last one ended"));
    }
    let data_len = view.data.len() as u64;
    let end = rec
        .offset
        .checked_add(rec.len)
        .filter(|&end| end <= data_len)
        .ok_or_else(|| fault("out of bounds"))?;
    if i + 1 == count && end != data_len {
        return Err(malformed(DATA, "bytes no artifact uses"));
    }
    let bytes = view.artifact_bytes(&rec);
    if blake3::hash(bytes).as_bytes() != &rec.sum {
        return Err(PackError::ArtifactChecksum(i as u32));
    }
    Ok(bytes)
}

/// What no lookup sees: every section's checksum (ENTRIES, ARTIFACTS and DATA included), an
/// empty DATA when there is no artifact, and every artifact and reflection blob used by an
/// entry. Shaders and artifacts are checked by the caller.
pub(crate) fn check_all(bytes: &[u8], layout: &Layout, view: &View<'_>) -> Result<(), PackError> {
    for (i, &(at, slen)) in layout.sections.iter().enumerate() {
        let section = bytes
            .get(at..at.saturating_add(slen))
            .ok_or(PackError::SectionChecksum(SECTION_NAMES[i]))?;
        if blake3::hash(section).as_bytes() != &layout.sums[i] {
            return Err(PackError::SectionChecksum(SECTION_NAMES[i]));
        }
    }
    if view.artifact_count() == 0 && !view.data.is_empty() {
        return Err(malformed(DATA, "bytes no artifact uses"));
    }
    let mut used = vec![false; view.artifact_count()];
    let mut blob_used = vec![false; layout.blobs.len()];
    for e in 0..view.entry_count() {
        let entry = view.entry(e);
        if let Some(used) = used.get_mut(entry.artifact as usize) {
            *used = true;
        }
        if let Some(Some(k)) = blob_of(layout, entry.reflection) {
            blob_used[k] = true;
        }
    }
    if let Some(i) = used.iter().position(|&u| !u) {
        return Err(malformed(
            ARTIFACTS,
            format!("artifact {i}: used by no entry"),
        ));
    }
    if blob_used.contains(&false) {
        return Err(malformed(REFLECTION, "a blob no entry uses"));
    }
    Ok(())
}

/// The blobs of a REFLECTION section, as (offset of their bytes, length): each a u64 length
/// at an 8-aligned offset then its bytes, non-empty, distinct and in strictly increasing byte
/// order, back to back with zero padding (none after the last).
pub(crate) fn reflection_blobs(section: &[u8]) -> Result<Vec<(u64, u64)>, PackError> {
    let mut blobs = Vec::new();
    let mut at = 0usize;
    let mut last: Option<&[u8]> = None;
    while at < section.len() {
        let fault = |what: &str| malformed(REFLECTION, format!("blob at {at}: {what}"));
        let len = u64_at(section, at).ok_or_else(|| fault("truncated length"))?;
        let start = at + 8;
        let blob = usize::try_from(len)
            .ok()
            .and_then(|len| section.get(start..start.checked_add(len)?))
            .ok_or_else(|| fault("out of bounds"))?;
        if blob.is_empty() || last.is_some_and(|last| last >= blob) {
            return Err(fault("empty, repeated or out of order"));
        }
        last = Some(blob);
        blobs.push((start as u64, len));
        let end = start + blob.len();
        if end == section.len() {
            break;
        }
        let next = align_up(end).ok_or_else(|| fault("out of bounds"))?;
        section
            .get(end..next)
            .filter(|p| next < section.len() && p.iter().all(|&b| b == 0))
            .ok_or_else(|| fault("bad padding"))?;
        at = next;
    }
    Ok(blobs)
}
