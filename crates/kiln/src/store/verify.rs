//! What vouches for an entry's bytes: its recorded length and blake3 checksum, checked on
//! every read.
//!
//! SQLite keeps its own pages consistent across crashes, but it does not detect bytes that
//! changed behind its back (a bad disk, a tool writing to the file, a bug): the checksum
//! does, so the store never serves bytes it cannot vouch for.

use std::fmt;

/// Bytes of a blake3 checksum.
pub const CHECKSUM_LEN: usize = 32;

/// Why an entry's row was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CorruptReason {
    /// The payload column does not hold a blob (SQLite columns are dynamically typed, so a
    /// foreign writer can store text, a number or NULL there).
    NotABlob {
        /// The SQLite type found.
        found: &'static str,
    },
    /// The checksum column does not hold a 32-byte blob.
    BadChecksumField,
    /// The payload is not as long as the row's size says (truncated or extended).
    LengthMismatch {
        /// Payload length recorded in the row.
        declared: u64,
        /// Payload bytes actually present.
        actual: u64,
    },
    /// The payload's blake3 hash differs from the one recorded in the row.
    ChecksumMismatch,
}

impl fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptReason::NotABlob { found } => {
                write!(f, "payload is {found}, not a blob")
            }
            CorruptReason::BadChecksumField => {
                write!(f, "checksum is not a {CHECKSUM_LEN}-byte blob")
            }
            CorruptReason::LengthMismatch { declared, actual } => write!(
                f,
                "payload is {actual} bytes but the entry declares {declared}"
            ),
            CorruptReason::ChecksumMismatch => f.write_str("payload checksum mismatch"),
        }
    }
}

/// The checksum recorded for `payload`.
pub fn checksum(payload: &[u8]) -> [u8; CHECKSUM_LEN] {
    *blake3::hash(payload).as_bytes()
}

/// Checks `payload` against the size and checksum recorded with it.
pub fn verify(declared: u64, recorded: &[u8], payload: &[u8]) -> Result<(), CorruptReason> {
    let actual = payload.len() as u64;
    if actual != declared {
        return Err(CorruptReason::LengthMismatch { declared, actual });
    }
    if recorded.len() != CHECKSUM_LEN {
        return Err(CorruptReason::BadChecksumField);
    }
    if blake3::hash(payload).as_bytes() != recorded {
        return Err(CorruptReason::ChecksumMismatch);
    }
    Ok(())
}
