//! The pack format, version 1: every variant of a build in one file, mmap-able and read
//! without copying.
//!
//! # Byte layout
//!
//! All integers are little-endian. The file is a fixed header followed by nine sections in a
//! fixed order; every section starts at an 8-byte aligned offset, right after the previous
//! one (rounded up to 8), and every padding byte is zero (checked at open between sections;
//! between artifacts only by DATA's checksum, so that opening touches no data page). Records within a section are
//! fixed-size, so a reader indexes them directly in the mapped bytes.
//!
//! ```text
//! header (HEADER_LEN = 496 bytes)
//!   0  magic         [u8; 8]  b"KILNPACK"
//!   8  version       u32      1
//!  12  header_len    u32      496
//!  16  file_len      u64      the whole file, padding included
//!  24  section_count u32      9
//!  28  flags         u32      0
//!  32  9 x section   { offset u64, len u64, blake3 [u8; 32] }   (48 bytes each)
//! 464  header blake3 [u8; 32] over bytes 0..464
//!
//! sections, in this order (len is the content's length, without the padding after it)
//!  0 STRING_INDEX  n x { offset u32, len u32 }    into STRING_BYTES; a string's id is its index
//!  1 STRING_BYTES  UTF-8, the strings back to back (offset 0, then each after the last)
//!  2 ID_LISTS      u32 string ids; the lists below are (first, count) ranges of it
//!  3 TARGETS       u32 string ids, the pack's targets
//!  4 SHADERS       n x 64 bytes { name u32, declared_first u32, declared_count u32,
//!                                 passes_first u32, passes_count u32,
//!                                 entries_first u32, entries_count u32, reserved u32 = 0,
//!                                 entries_blake3 [u8; 32] (of the shader's ENTRIES rows) }
//!  5 ENTRIES       n x 56 bytes { shader u32, pass u32, keywords_first u32,
//!                                 keywords_count u32, target u32, artifact u32,
//!                                 digest [u8; 12] (lower-case hex), reserved u32 = 0,
//!                                 reflection_offset u64, reflection_len u64 }
//!  6 ARTIFACTS     n x 48 bytes { offset u64, len u64, blake3 [u8; 32] }  into DATA
//!  7 REFLECTION    the distinct non-empty reflection blobs, each once, in strictly
//!                  increasing byte order, each as { len u64, bytes } starting at an 8-aligned
//!                  offset, back to back, zero padding between (none after the last); an
//!                  entry's reflection (offset, len) names a blob's bytes (after its length),
//!                  or is (0, 0) for an empty blob
//!  8 DATA          artifact bytes, each at an 8-aligned offset, in ARTIFACTS order
//! ```
//!
//! # Invariants (checked by the reader before any use)
//!
//! - Strings are distinct, valid UTF-8, each a valid name ([`check_name`](crate::canon::check_name)),
//!   and sorted in [`keyword_order`](crate::canon::keyword_order) (bytes): a string's id
//!   order is its text order, so entries compare as integers and a keyword list sorted by id
//!   is a canonical keyword set. Each string is stored once.
//! - TARGETS, SHADERS (by name), a shader's declared keywords and its passes are strictly
//!   increasing ids. A shader's entries are the contiguous range `entries_first..+count`,
//!   the shaders' ranges partition ENTRIES in order.
//! - Entries are strictly increasing by (shader, pass, keyword id list compared
//!   lexicographically, target): a lookup is a binary search. An entry's pass is one of its
//!   shader's passes, its keywords a strictly increasing list of its shader's declared
//!   keywords (a canonical set), its target one of TARGETS, its digest 12 lower-case hex
//!   digits, its reflection (0, 0) or exactly one blob of REFLECTION.
//! - Reflection blobs are distinct (strictly increasing bytes, so identical blobs are stored
//!   once), laid out as above, and each is used by an entry.
//! - Artifacts are distinct (strictly increasing blake3, so identical bytes are stored once),
//!   laid out back to back in DATA at 8-aligned offsets, and each is used by an entry.
//!
//! # When each invariant is checked: before use, not all at open
//!
//! Opening reads only the header and the small tables, so that it costs about the same at
//! 100 variants or 100,000 (measured in the crate's README):
//!
//! - **At open** ([`Library::open`](crate::Library::open)): the header and its checksum, where
//!   every section lies (order, alignment, zero padding between sections, the file's
//!   length), the checksums of STRING_INDEX, STRING_BYTES, ID_LISTS, TARGETS, SHADERS and
//!   REFLECTION, and their invariants (strings, lists, shaders' order and lists, the
//!   shaders' entry ranges partitioning ENTRIES, the reflection blobs' layout and order).
//! - **On a shader's first use** (the first [`Library::get`](crate::Library::get) or
//!   [`Library::variants`](crate::Library::variants) item that reads its entries): the
//!   blake3 of its ENTRIES rows against its SHADERS record (itself verified at open), then
//!   every invariant of those entries. The result is remembered (one atomic state byte per
//!   shader); a damaged shader is an error each time it is asked for
//!   ([`LookupError::CorruptArtifact`](crate::LookupError::CorruptArtifact), naming the
//!   variant asked for), never a wrong variant.
//! - **On an artifact's first serve**: its ARTIFACTS record against its neighbours (it starts
//!   where the previous one ended, aligned, with a greater blake3; the last ends DATA) and
//!   its bytes against its blake3, remembered likewise, so a damaged artifact is an error,
//!   never wrong bytes, and a steady-state lookup hashes nothing.
//! - **By [`Library::verify_all`](crate::Library::verify_all)**, what no single lookup sees:
//!   the checksums of ENTRIES, ARTIFACTS and DATA as whole sections (DATA's covers the
//!   padding between artifacts), every shader and artifact as above, and that every
//!   artifact and every reflection blob is used by an entry.
//!
//! So a pack the writer would not have written is refused at open, at the first use of what
//! is wrong in it, or by `verify_all`; nothing is served from a table before it is checked.
//!
//! The writer ([`PackWriter`]) is deterministic: the same variants give the same bytes, in
//! whatever order they were added. It writes through a temporary file in the destination's
//! directory, synced and renamed over the destination, so a reader maps either the old pack
//! or the new one, never a torn one, and a mapped pack is never modified in place.

pub(crate) mod read;
mod write;

pub use read::PackError;
pub(crate) use read::{validate, Layout};
pub use write::{PackWriter, WriteError};

/// The first bytes of every pack.
pub const MAGIC: [u8; 8] = *b"KILNPACK";

/// The pack format version this crate writes and reads.
pub const VERSION: u32 = 1;

/// The header's length in bytes.
pub const HEADER_LEN: usize = 496;

/// The number of sections.
pub(crate) const SECTION_COUNT: usize = 9;

/// Where the section table starts in the header.
pub(crate) const SECTIONS_AT: usize = 32;

/// One section table row: offset, length, blake3.
pub(crate) const SECTION_ROW: usize = 48;

/// Where the header's own checksum starts.
pub(crate) const HEADER_SUM_AT: usize = SECTIONS_AT + SECTION_COUNT * SECTION_ROW;

/// The sections, in file order.
pub(crate) const STRING_INDEX: usize = 0;
pub(crate) const STRING_BYTES: usize = 1;
pub(crate) const ID_LISTS: usize = 2;
pub(crate) const TARGETS: usize = 3;
pub(crate) const SHADERS: usize = 4;
pub(crate) const ENTRIES: usize = 5;
pub(crate) const ARTIFACTS: usize = 6;
pub(crate) const REFLECTION: usize = 7;
pub(crate) const DATA: usize = 8;

/// Section names, for errors.
pub(crate) const SECTION_NAMES: [&str; SECTION_COUNT] = [
    "string index",
    "string bytes",
    "id lists",
    "targets",
    "shaders",
    "entries",
    "artifacts",
    "reflection",
    "data",
];

/// Record sizes.
pub(crate) const STRING_RECORD: usize = 8;
pub(crate) const ID_RECORD: usize = 4;
pub(crate) const SHADER_RECORD: usize = 64;
pub(crate) const ENTRY_RECORD: usize = 56;
pub(crate) const ARTIFACT_RECORD: usize = 48;

/// Every section and every artifact starts at a multiple of this.
pub(crate) const ALIGN: usize = 8;

/// `n` rounded up to [`ALIGN`]; `None` on overflow.
pub(crate) fn align_up(n: usize) -> Option<usize> {
    n.checked_add(ALIGN - 1).map(|n| n & !(ALIGN - 1))
}

const _: () = assert!(HEADER_SUM_AT + 32 == HEADER_LEN);
const _: () = assert!(HEADER_LEN.is_multiple_of(ALIGN));

/// Recomputes the checksums of a damaged pack (each shader's of its entries, every section's,
/// as its header row locates it, and the header's) and its recorded length, so that a fuzzer or a test can reach the
/// table checks behind them. Not for production use: it makes damage look intact.
#[doc(hidden)]
pub fn reseal_for_fuzzing(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    let len = bytes.len() as u64;
    bytes[16..24].copy_from_slice(&len.to_le_bytes());
    let field = |bytes: &[u8], at: usize| {
        let mut n = [0u8; 8];
        n.copy_from_slice(&bytes[at..at + 8]);
        usize::try_from(u64::from_le_bytes(n)).unwrap_or(usize::MAX)
    };
    // Each shader's checksum of its entries, as its record locates them.
    let section = |bytes: &[u8], i: usize| {
        let row = SECTIONS_AT + i * SECTION_ROW;
        let (at, len) = (field(bytes, row), field(bytes, row + 8));
        at.checked_add(len)
            .filter(|&end| end <= bytes.len())
            .map(|end| at..end)
    };
    if let (Some(shaders), Some(entries)) = (section(bytes, SHADERS), section(bytes, ENTRIES)) {
        let mut at = shaders.start;
        while at + SHADER_RECORD <= shaders.end {
            let word = |n: usize| {
                let mut w = [0u8; 4];
                w.copy_from_slice(&bytes[at + 4 * n..at + 4 * n + 4]);
                u32::from_le_bytes(w) as usize
            };
            let (first, count) = (word(5), word(6));
            let rows = first
                .checked_add(count)
                .and_then(|end| end.checked_mul(ENTRY_RECORD))
                .and_then(|end| {
                    Some(entries.start + first * ENTRY_RECORD..entries.start.checked_add(end)?)
                })
                .filter(|rows| rows.end <= entries.end);
            if let Some(rows) = rows {
                let sum = *blake3::hash(&bytes[rows]).as_bytes();
                bytes[at + 32..at + SHADER_RECORD].copy_from_slice(&sum);
            }
            at += SHADER_RECORD;
        }
    }
    for i in 0..SECTION_COUNT {
        let row = SECTIONS_AT + i * SECTION_ROW;
        let (at, section_len) = (field(bytes, row), field(bytes, row + 8));
        let Some(section) = at
            .checked_add(section_len)
            .and_then(|end| bytes.get(at..end))
        else {
            continue;
        };
        let sum = *blake3::hash(section).as_bytes();
        bytes[row + 16..row + 48].copy_from_slice(&sum);
    }
    let sum = *blake3::hash(&bytes[..HEADER_SUM_AT]).as_bytes();
    bytes[HEADER_SUM_AT..HEADER_LEN].copy_from_slice(&sum);
}
