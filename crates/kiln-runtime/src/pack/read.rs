//! The pack reader's validation: every offset, length, order and checksum of the header and
//! tables is checked once, at open, before anything is served. After [`validate`] returns a
//! [`Layout`], every record read through [`View`] is in bounds and consistent.

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

/// Where each section lies in the file, validated.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// (offset, len) of each section.
    pub(crate) sections: [(usize, usize); SECTION_COUNT],
    /// DATA's checksum, verified on demand.
    pub(crate) data_sum: [u8; 32],
}

impl Layout {
    pub(crate) fn count(&self, section: usize, record: usize) -> usize {
        self.sections[section].1 / record
    }
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
    pub(crate) digest: usize,
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

/// Typed reads of a pack's records. Out-of-range reads give zeros and empty strings instead
/// of panicking; after [`validate`] none happens.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) layout: &'a Layout,
}

impl<'a> View<'a> {
    fn section(&self, section: usize) -> &'a [u8] {
        let (at, len) = self.layout.sections[section];
        self.bytes.get(at..at.saturating_add(len)).unwrap_or(&[])
    }

    fn u32_in(&self, section: usize, at: usize) -> u32 {
        u32_at(self.section(section), at).unwrap_or(0)
    }

    pub(crate) fn string_count(&self) -> usize {
        self.layout.count(STRING_INDEX, STRING_RECORD)
    }

    /// The bytes of string `id` (empty if out of range): what searches compare, since the
    /// canonical order is byte order and UTF-8 need not be checked again.
    pub(crate) fn string_bytes(&self, id: u32) -> &'a [u8] {
        let at = id as usize * STRING_RECORD;
        let offset = self.u32_in(STRING_INDEX, at) as usize;
        let len = self.u32_in(STRING_INDEX, at + 4) as usize;
        self.section(STRING_BYTES)
            .get(offset..offset.saturating_add(len))
            .unwrap_or(&[])
    }

    /// The name field of shader `i`, without the rest of its record.
    pub(crate) fn shader_name(&self, i: usize) -> u32 {
        self.u32_in(SHADERS, i * SHADER_RECORD)
    }

    /// The string `id`, empty if out of range or not UTF-8 (neither survives validation).
    pub(crate) fn string(&self, id: u32) -> &'a str {
        let at = id as usize * STRING_RECORD;
        let offset = self.u32_in(STRING_INDEX, at) as usize;
        let len = self.u32_in(STRING_INDEX, at + 4) as usize;
        self.section(STRING_BYTES)
            .get(offset..offset.saturating_add(len))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// The id list `(first, count)`, as the raw little-endian bytes of its u32s.
    pub(crate) fn ids(&self, (first, count): (u32, u32)) -> IdList<'a> {
        let at = first as usize * ID_RECORD;
        let len = count as usize * ID_RECORD;
        IdList(
            self.section(ID_LISTS)
                .get(at..at.saturating_add(len))
                .unwrap_or(&[]),
        )
    }

    pub(crate) fn targets(&self) -> IdList<'a> {
        IdList(self.section(TARGETS))
    }

    pub(crate) fn shader_count(&self) -> usize {
        self.layout.count(SHADERS, SHADER_RECORD)
    }

    pub(crate) fn shader(&self, i: usize) -> ShaderRec {
        let at = i * SHADER_RECORD;
        let f = |n: usize| self.u32_in(SHADERS, at + 4 * n);
        ShaderRec {
            name: f(0),
            declared: (f(1), f(2)),
            passes: (f(3), f(4)),
            entries: (f(5), f(6)),
            reserved: f(7),
        }
    }

    pub(crate) fn entry_count(&self) -> usize {
        self.layout.count(ENTRIES, ENTRY_RECORD)
    }

    pub(crate) fn entry(&self, i: usize) -> EntryRec {
        let at = i * ENTRY_RECORD;
        let f = |n: usize| self.u32_in(ENTRIES, at + 4 * n);
        let g = |n: usize| u64_at(self.section(ENTRIES), at + n).unwrap_or(0);
        EntryRec {
            shader: f(0),
            pass: f(1),
            keywords: (f(2), f(3)),
            target: f(4),
            artifact: f(5),
            digest: at + 24,
            reserved: f(9),
            reflection: (g(40), g(48)),
        }
    }

    /// An entry's digest (12 hex digits after validation).
    pub(crate) fn digest(&self, entry: &EntryRec) -> &'a str {
        self.section(ENTRIES)
            .get(entry.digest..entry.digest + canon::DIGEST_HEX_LEN)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    pub(crate) fn reflection(&self, entry: &EntryRec) -> &'a [u8] {
        let (at, len) = (entry.reflection.0 as usize, entry.reflection.1 as usize);
        self.section(REFLECTION)
            .get(at..at.saturating_add(len))
            .unwrap_or(&[])
    }

    pub(crate) fn artifact_count(&self) -> usize {
        self.layout.count(ARTIFACTS, ARTIFACT_RECORD)
    }

    pub(crate) fn artifact(&self, i: usize) -> ArtifactRec {
        let at = i * ARTIFACT_RECORD;
        let s = self.section(ARTIFACTS);
        ArtifactRec {
            offset: u64_at(s, at).unwrap_or(0),
            len: u64_at(s, at + 8).unwrap_or(0),
            sum: sum_at(s, at + 16).unwrap_or([0; 32]),
        }
    }

    /// An artifact's bytes, unverified.
    pub(crate) fn artifact_bytes(&self, rec: &ArtifactRec) -> &'a [u8] {
        let (at, len) = (rec.offset as usize, rec.len as usize);
        self.section(DATA)
            .get(at..at.saturating_add(len))
            .unwrap_or(&[])
    }

    pub(crate) fn data(&self) -> &'a [u8] {
        self.section(DATA)
    }

    /// Compares entry `i`'s key with (pass, keyword ids, target), reading only the fields
    /// it needs.
    pub(crate) fn cmp_entry(
        &self,
        i: usize,
        pass: u32,
        keywords: impl IntoIterator<Item = u32>,
        target: u32,
    ) -> Ordering {
        let at = i * ENTRY_RECORD;
        let field = |n: usize| self.u32_in(ENTRIES, at + 4 * n);
        field(1)
            .cmp(&pass)
            .then_with(|| self.ids((field(2), field(3))).iter().cmp(keywords))
            .then_with(|| field(4).cmp(&target))
    }
}

/// A list of u32 ids, read in place.
#[derive(Clone, Copy)]
pub(crate) struct IdList<'a>(&'a [u8]);

impl<'a> IdList<'a> {
    pub(crate) fn len(&self) -> usize {
        self.0.len() / ID_RECORD
    }

    pub(crate) fn get(&self, i: usize) -> u32 {
        u32_at(self.0, i * ID_RECORD).unwrap_or(0)
    }

    pub(crate) fn iter(self) -> impl ExactSizeIterator<Item = u32> + Clone + 'a {
        self.0
            .chunks_exact(ID_RECORD)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The position of the string `key` in this list of ids sorted by their strings (in
    /// [`canon::keyword_order`], which is byte order).
    pub(crate) fn find_str(&self, view: &View<'_>, key: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match view.string_bytes(self.get(mid)).cmp(key.as_bytes()) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Whether the list holds `id` (sorted lists only).
    pub(crate) fn contains(&self, id: u32) -> bool {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid).cmp(&id) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return true,
            }
        }
        false
    }

    fn strictly_increasing(&self) -> bool {
        let mut it = self.iter();
        let Some(mut last) = it.next() else {
            return true;
        };
        for id in it {
            if id <= last {
                return false;
            }
            last = id;
        }
        true
    }
}

/// Checks everything but the artifacts' bytes (see the module doc of [`super`]) and returns
/// where the sections lie.
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
    for (i, &(at, slen)) in sections.iter().enumerate().take(DATA) {
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
    let layout = Layout {
        sections,
        data_sum: sums[DATA],
    };
    check_tables(View {
        bytes,
        layout: &layout,
    })?;
    Ok(layout)
}

/// The tables' own invariants, once the sections are known to lie in the file.
fn check_tables(view: View<'_>) -> Result<(), PackError> {
    // Strings: back to back, UTF-8, valid names, strictly increasing.
    let strings = view.string_count();
    let string_bytes = view.section(STRING_BYTES);
    let mut next = 0usize;
    let mut last: Option<&str> = None;
    for id in 0..strings {
        let at = view.u32_in(STRING_INDEX, id * STRING_RECORD) as usize;
        let slen = view.u32_in(STRING_INDEX, id * STRING_RECORD + 4) as usize;
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
    let ids = IdList(view.section(ID_LISTS));
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
    let artifacts = view.artifact_count();
    let mut used = vec![false; artifacts];
    let blobs = reflection_blobs(view.section(REFLECTION))?;
    let mut blob_used = vec![false; blobs.len()];
    let mut next_entry = 0usize;
    for i in 0..view.shader_count() {
        let shader = view.shader(i);
        let fault = |what: &str| malformed(SHADERS, format!("shader {i}: {what}"));
        if shader.name >= strings || shader.reserved != 0 {
            return Err(fault("bad name or reserved field"));
        }
        if i > 0 && view.shader(i - 1).name >= shader.name {
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
        for e in next_entry..end {
            let entry = view.entry(e);
            let fault = |what: &str| malformed(ENTRIES, format!("entry {e}: {what}"));
            if entry.shader != shader.name || entry.reserved != 0 {
                return Err(fault("wrong shader or reserved field"));
            }
            if !passes.contains(entry.pass) {
                return Err(fault("pass not declared by its shader"));
            }
            if !in_ids(entry.keywords) {
                return Err(fault("keywords out of bounds"));
            }
            let keywords = view.ids(entry.keywords);
            if !keywords.strictly_increasing() || keywords.iter().any(|k| !declared.contains(k)) {
                return Err(fault("keywords not a canonical set of declared keywords"));
            }
            if !targets.contains(entry.target) {
                return Err(fault("unknown target"));
            }
            let used_artifact = used
                .get_mut(entry.artifact as usize)
                .ok_or_else(|| fault("artifact out of range"))?;
            *used_artifact = true;
            if !canon::is_digest(view.digest(&entry).as_bytes()) {
                return Err(fault("digest is not 12 lower-case hex digits"));
            }
            match entry.reflection {
                (0, 0) => {}
                (r_at, r_len) => {
                    let k = blobs
                        .binary_search_by(|&(at, _)| at.cmp(&r_at))
                        .ok()
                        .filter(|&k| blobs[k].1 == r_len)
                        .ok_or_else(|| fault("reflection is not a blob of the section"))?;
                    blob_used[k] = true;
                }
            }
            if e > next_entry {
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
        next_entry = end;
    }
    if next_entry != entries {
        return Err(malformed(ENTRIES, "entries no shader owns"));
    }
    if blob_used.contains(&false) {
        return Err(malformed(REFLECTION, "a blob no entry uses"));
    }

    // Artifacts: distinct, back to back in DATA at aligned offsets, each used.
    let data_len = view.data().len() as u64;
    let mut next_at = 0u64;
    for (i, &is_used) in used.iter().enumerate() {
        let rec = view.artifact(i);
        let fault = |what: &str| malformed(ARTIFACTS, format!("artifact {i}: {what}"));
        if rec.offset != next_at {
            return Err(fault("not where the last one ended"));
        }
        let end = rec
            .offset
            .checked_add(rec.len)
            .filter(|&end| end <= data_len)
            .ok_or_else(|| fault("out of bounds"))?;
        if i > 0 && view.artifact(i - 1).sum >= rec.sum {
            return Err(fault("checksums out of order"));
        }
        if !is_used {
            return Err(fault("used by no entry"));
        }
        // The padding between artifacts is not read here: opening must not touch the data
        // pages. DATA's checksum (`verify_all`) covers it; a served artifact is checked by
        // its own.
        let padded = end
            .checked_add(ALIGN as u64 - 1)
            .map(|n| n & !(ALIGN as u64 - 1));
        next_at = padded.ok_or_else(|| fault("out of bounds"))?;
    }
    let last_end = match artifacts {
        0 => 0,
        n => {
            let rec = view.artifact(n - 1);
            rec.offset + rec.len
        }
    };
    if last_end != data_len {
        return Err(malformed(DATA, "bytes no artifact uses"));
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
        let padding = section
            .get(end..next)
            .filter(|p| next < section.len() && p.iter().all(|&b| b == 0))
            .ok_or_else(|| fault("bad padding"))?;
        debug_assert!(padding.len() < ALIGN);
        at = next;
    }
    Ok(blobs)
}
