//! The content key: a 32-byte blake3 hash naming one artifact, and its hex spelling.

use std::fmt;
use std::str::FromStr;

/// The blake3 hash of everything that determines a compiled artifact (preprocessed text,
/// stage, entry point, target, options), computed by the caller.
///
/// Two inputs with the same key must compile to the same bytes; that is what lets several
/// processes write one entry without locks.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentKey([u8; 32]);

impl ContentKey {
    /// Number of hex digits in [`ContentKey::to_hex`].
    pub const HEX_LEN: usize = 64;

    /// Wraps an already computed 32-byte hash.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        ContentKey(bytes)
    }

    /// Hashes `data` with blake3; for callers whose inputs are one byte string.
    ///
    /// Callers hashing several fields should feed a `blake3::Hasher` with length-prefixed
    /// fields and use [`ContentKey::from_bytes`], so that field boundaries cannot collide.
    pub fn hash(data: &[u8]) -> Self {
        ContentKey(*blake3::hash(data).as_bytes())
    }

    /// The raw 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, 64 digits: how logs and messages name an entry.
    pub fn to_hex(&self) -> String {
        hex_lower(&self.0)
    }
}

impl From<blake3::Hash> for ContentKey {
    fn from(hash: blake3::Hash) -> Self {
        ContentKey(*hash.as_bytes())
    }
}

impl fmt::Display for ContentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ContentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentKey({})", self.to_hex())
    }
}

/// A string that is not 64 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a content key (64 hex digits): {text:?}")]
pub struct ParseContentKeyError {
    /// The rejected text.
    pub text: String,
}

impl FromStr for ContentKey {
    type Err = ParseContentKeyError;

    /// Parses 64 hex digits, either case.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = || ParseContentKeyError {
            text: text.to_owned(),
        };
        let digits = text.as_bytes();
        if digits.len() != Self::HEX_LEN {
            return Err(err());
        }
        // A warm build parses three of these per variant from `index.json`: a table and one
        // check at the end instead of a branch per digit.
        let mut bytes = [0u8; 32];
        let mut invalid = 0u8;
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let (high, low) = (
                HEX_VALUES[usize::from(pair[0])],
                HEX_VALUES[usize::from(pair[1])],
            );
            invalid |= high | low;
            *byte = (high << 4) | (low & 0x0f);
        }
        if invalid & NOT_HEX != 0 {
            return Err(err());
        }
        Ok(ContentKey(bytes))
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Marks a byte that is no hex digit in [`HEX_VALUES`].
const NOT_HEX: u8 = 0x80;

/// Each byte's value as a hex digit, either case, or [`NOT_HEX`].
const HEX_VALUES: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut digit = 0;
    while digit < 16 {
        table[b"0123456789abcdef"[digit] as usize] = digit as u8;
        table[b"0123456789ABCDEF"[digit] as usize] = digit as u8;
        digit += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_accepts_exactly_64_hex_digits_of_either_case() {
        let key = ContentKey::hash(b"kiln");
        let hex = key.to_hex();
        assert_eq!(hex.parse::<ContentKey>().ok(), Some(key));
        assert_eq!(hex.to_uppercase().parse::<ContentKey>().ok(), Some(key));
        for byte in 0u8..128 {
            let is_hex = byte.is_ascii_hexdigit();
            for at in [0, 1, 31, 62, 63] {
                let mut text = hex.clone().into_bytes();
                text[at] = byte;
                let text = String::from_utf8(text).expect("ascii");
                let parsed = text.parse::<ContentKey>();
                assert_eq!(parsed.is_ok(), is_hex, "byte {byte} at {at}");
                if let Ok(parsed) = parsed {
                    assert_eq!(parsed.to_hex(), text.to_lowercase());
                }
            }
        }
        assert!(hex[..63].parse::<ContentKey>().is_err());
        assert!(format!("{hex}0").parse::<ContentKey>().is_err());
        assert!(format!("é{}", &hex[2..]).parse::<ContentKey>().is_err());
    }
}
