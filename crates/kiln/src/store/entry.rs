//! The on-disk format of one store entry: a fixed header that vouches for the payload.
//!
//! ```text
//! offset  size  field
//!      0     8  magic            b"KILNSTOR"
//!      8     4  format version   u32 little endian, currently 1
//!     12     8  payload length   u64 little endian
//!     20    32  payload blake3   hash of the payload bytes
//!     52    32  content key      the key the entry was saved under, echoed
//!     84     n  payload
//! ```
//!
//! Every header byte is checked on load: the magic and version directly, the length against
//! the file's size, the checksum against the payload, and the echoed key against the key
//! asked for (which catches a file copied or renamed under the wrong name). A header
//! checksum would add nothing.

use std::fmt;

use super::content_key::ContentKey;

/// First bytes of every entry.
pub const MAGIC: [u8; 8] = *b"KILNSTOR";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 84;

const VERSION_AT: usize = 8;
const LENGTH_AT: usize = 12;
const CHECKSUM_AT: usize = 20;
const KEY_AT: usize = 52;

/// Why an entry's bytes were rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CorruptReason {
    /// The file is shorter than a header (an empty file included).
    TruncatedHeader {
        /// The file's length in bytes.
        len: u64,
    },
    /// The file does not start with [`MAGIC`].
    BadMagic,
    /// The header names a format version this build does not read.
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// The header echoes another content key than the one the file is named after.
    WrongKey {
        /// The key found in the header.
        found: ContentKey,
    },
    /// The payload is not as long as the header says (truncated or extended).
    LengthMismatch {
        /// Payload length in the header.
        declared: u64,
        /// Payload bytes actually present.
        actual: u64,
    },
    /// The payload's blake3 hash differs from the one in the header.
    ChecksumMismatch,
}

impl fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptReason::TruncatedHeader { len } => write!(
                f,
                "truncated: {len} bytes, shorter than the {HEADER_LEN}-byte header"
            ),
            CorruptReason::BadMagic => f.write_str("not a kiln store entry (bad magic bytes)"),
            CorruptReason::UnsupportedVersion { found } => write!(
                f,
                "unsupported entry format version {found} (this kiln reads {FORMAT_VERSION})"
            ),
            CorruptReason::WrongKey { found } => {
                write!(f, "entry belongs to another content key ({found})")
            }
            CorruptReason::LengthMismatch { declared, actual } => write!(
                f,
                "payload is {actual} bytes but the header declares {declared}"
            ),
            CorruptReason::ChecksumMismatch => f.write_str("payload checksum mismatch"),
        }
    }
}

/// A header that passed the checks that need no payload: magic, version and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Declared payload length.
    pub payload_len: u64,
    /// Declared blake3 hash of the payload.
    pub checksum: [u8; 32],
}

/// The header for `payload` saved under `key`.
pub fn encode_header(key: &ContentKey, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..VERSION_AT].copy_from_slice(&MAGIC);
    header[VERSION_AT..LENGTH_AT].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header[LENGTH_AT..CHECKSUM_AT].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    header[CHECKSUM_AT..KEY_AT].copy_from_slice(blake3::hash(payload).as_bytes());
    header[KEY_AT..].copy_from_slice(key.as_bytes());
    header
}

/// A whole entry: header then payload.
pub fn encode(key: &ContentKey, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(&encode_header(key, payload));
    bytes.extend_from_slice(payload);
    bytes
}

/// Checks the magic, version and echoed key of `header` (the first [`HEADER_LEN`] bytes of
/// a file, or fewer if the file is shorter).
pub fn decode_header(header: &[u8], expected: &ContentKey) -> Result<Header, CorruptReason> {
    let Some(header) = header.get(..HEADER_LEN) else {
        return Err(CorruptReason::TruncatedHeader {
            len: header.len() as u64,
        });
    };
    if header[..VERSION_AT] != MAGIC {
        return Err(CorruptReason::BadMagic);
    }
    let version = u32::from_le_bytes(array(&header[VERSION_AT..LENGTH_AT]));
    if version != FORMAT_VERSION {
        return Err(CorruptReason::UnsupportedVersion { found: version });
    }
    let found = ContentKey::from_bytes(array(&header[KEY_AT..]));
    if found != *expected {
        return Err(CorruptReason::WrongKey { found });
    }
    Ok(Header {
        payload_len: u64::from_le_bytes(array(&header[LENGTH_AT..CHECKSUM_AT])),
        checksum: array(&header[CHECKSUM_AT..KEY_AT]),
    })
}

/// Checks `payload` against a decoded header's length and checksum.
pub fn verify_payload(header: &Header, payload: &[u8]) -> Result<(), CorruptReason> {
    let actual = payload.len() as u64;
    if actual != header.payload_len {
        return Err(CorruptReason::LengthMismatch {
            declared: header.payload_len,
            actual,
        });
    }
    if blake3::hash(payload).as_bytes() != &header.checksum {
        return Err(CorruptReason::ChecksumMismatch);
    }
    Ok(())
}

/// Checks a whole entry and returns its payload.
pub fn decode<'a>(bytes: &'a [u8], expected: &ContentKey) -> Result<&'a [u8], CorruptReason> {
    let header = decode_header(bytes, expected)?;
    let payload = bytes.get(HEADER_LEN..).unwrap_or_default();
    verify_payload(&header, payload)?;
    Ok(payload)
}

/// Copies a slice whose length the caller's constant offsets guarantee.
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(bytes);
    out
}
