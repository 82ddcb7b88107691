//! A value as stored in the remote, and what vouches for it.
//!
//! Version 2 adds a keyed MAC beside the plain checksum. The checksum (blake3 of the
//! payload) catches damage but anyone can compute it, so without a key whoever can write to
//! the Redis chooses the bytes every reader gets. With a shared secret ([`RemoteKey`], from
//! `KILN_REMOTE_KEY`), writers add blake3's keyed hash over the value's key, length and
//! payload, and readers that hold the secret refuse any value without a valid one: a value
//! forged or copied from elsewhere by someone without the secret is rejected, never served.

use std::fmt;

use super::super::verify::{self, CorruptReason, CHECKSUM_LEN};
use super::super::{ContentKey, Namespace};

/// The format tag every value starts with (version 2: with a MAC field).
pub(crate) const MAGIC: &[u8; 8] = b"kilnrv2\n";

/// `derive_key`'s context: a key derived for anything else never verifies a value.
const KEY_CONTEXT: &str = "kiln remote cache value MAC, format 2";

/// Bytes of the MAC field.
const MAC_LEN: usize = 32;

/// Values made without a key.
const UNKEYED: u8 = 0;
/// Values with a blake3 keyed hash.
const KEYED: u8 = 1;

/// The secret that writers and readers share, as a blake3 key.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteKey([u8; 32]);

impl RemoteKey {
    /// The shortest secret accepted, in bytes.
    pub const MIN_SECRET_BYTES: usize = 16;

    /// The key derived from `secret`; `None` when it is shorter than
    /// [`Self::MIN_SECRET_BYTES`] (a short secret is guessed offline from one value).
    pub fn from_secret(secret: &[u8]) -> Option<Self> {
        (secret.len() >= Self::MIN_SECRET_BYTES)
            .then(|| Self(blake3::derive_key(KEY_CONTEXT, secret)))
    }

    fn mac(&self, ns: &[u8], key: &ContentKey, payload: &[u8]) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.0);
        // Lengths first: no two (namespace, payload) pairs hash the same bytes.
        hasher.update(&(ns.len() as u64).to_le_bytes());
        hasher.update(ns);
        hasher.update(key.as_bytes());
        hasher.update(&(payload.len() as u64).to_le_bytes());
        hasher.update(payload);
        hasher.finalize()
    }
}

impl fmt::Debug for RemoteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RemoteKey(***)")
    }
}

/// Why a value read from the remote was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Not a kiln value of this format (another tool's, or damaged in its header).
    Format,
    /// A kiln value, but for another key (stored under the wrong name).
    WrongKey,
    /// The payload fails its length or checksum.
    Corrupt(CorruptReason),
    /// A key is configured and the value has no valid MAC for it: written without the key,
    /// with another key, or forged.
    Unauthenticated,
    /// Longer than [`super::MAX_VALUE_BYTES`] (or the configured cap): not read.
    TooLarge {
        /// Its length, from the reply's header.
        len: u64,
        /// The cap.
        cap: usize,
    },
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::Format => f.write_str("not a kiln value"),
            Rejected::WrongKey => f.write_str("value belongs to another key"),
            Rejected::Corrupt(reason) => reason.fmt(f),
            Rejected::Unauthenticated => {
                f.write_str("no valid MAC for KILN_REMOTE_KEY (written without the key, or forged)")
            }
            Rejected::TooLarge { len, cap } => {
                write!(
                    f,
                    "a value of {len} bytes, over the {cap}-byte cap: not read"
                )
            }
        }
    }
}

/// A value as stored: the format tag, its own key (namespace name, content key), its MAC
/// (kind byte, 32 bytes; zeros without a key), the payload's blake3 checksum and length,
/// the payload.
pub fn encode(
    ns: &Namespace,
    key: &ContentKey,
    mac: Option<&RemoteKey>,
    payload: &[u8],
) -> Vec<u8> {
    let ns_name = ns.dir_name().as_bytes();
    let mut value = Vec::with_capacity(
        MAGIC.len() + 4 + ns_name.len() + 32 + 1 + MAC_LEN + CHECKSUM_LEN + 8 + payload.len(),
    );
    value.extend_from_slice(MAGIC);
    value.extend_from_slice(&(ns_name.len() as u32).to_le_bytes());
    value.extend_from_slice(ns_name);
    value.extend_from_slice(key.as_bytes());
    match mac {
        Some(secret) => {
            value.push(KEYED);
            value.extend_from_slice(secret.mac(ns_name, key, payload).as_bytes());
        }
        None => {
            value.push(UNKEYED);
            value.extend_from_slice(&[0; MAC_LEN]);
        }
    }
    value.extend_from_slice(&verify::checksum(payload));
    value.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    value.extend_from_slice(payload);
    value
}

/// The payload of `value` if it is the intact value of `key` in `ns` and, with `mac`, it
/// carries a valid MAC for that key.
pub fn decode(
    ns: &Namespace,
    key: &ContentKey,
    mac: Option<&RemoteKey>,
    mut value: Vec<u8>,
) -> Result<Vec<u8>, Rejected> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], Rejected> {
        if rest.len() < n {
            return Err(Rejected::Format);
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head)
    }
    let mut rest = &value[..];
    if take(&mut rest, MAGIC.len())? != MAGIC {
        return Err(Rejected::Format);
    }
    let mut ns_len = [0u8; 4];
    ns_len.copy_from_slice(take(&mut rest, 4)?);
    let ns_len = u32::from_le_bytes(ns_len) as usize;
    let ns_name = take(&mut rest, ns_len)?;
    let content = take(&mut rest, 32)?;
    if ns_name != ns.dir_name().as_bytes() || content != key.as_bytes() {
        return Err(Rejected::WrongKey);
    }
    let kind = take(&mut rest, 1)?[0];
    let mut recorded_mac = [0u8; MAC_LEN];
    recorded_mac.copy_from_slice(take(&mut rest, MAC_LEN)?);
    if kind != UNKEYED && kind != KEYED {
        return Err(Rejected::Format);
    }
    let checksum = take(&mut rest, CHECKSUM_LEN)?;
    let mut len = [0u8; 8];
    len.copy_from_slice(take(&mut rest, 8)?);
    let declared = u64::from_le_bytes(len);
    verify::verify(declared, checksum, rest).map_err(Rejected::Corrupt)?;
    if let Some(secret) = mac {
        // `blake3::Hash`'s equality is constant-time.
        if kind != KEYED || secret.mac(ns_name, key, rest) != blake3::Hash::from(recorded_mac) {
            return Err(Rejected::Unauthenticated);
        }
    }
    let header = value.len() - rest.len();
    value.drain(..header);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns() -> Namespace {
        Namespace::new("spirv", "naga 30")
    }

    fn secret(text: &str) -> RemoteKey {
        RemoteKey::from_secret(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_value_round_trips_and_vouches_for_its_key() {
        let key = ContentKey::hash(b"text");
        let value = encode(&ns(), &key, None, b"payload");
        assert_eq!(
            decode(&ns(), &key, None, value.clone()).unwrap(),
            b"payload"
        );
        let other = ContentKey::hash(b"other");
        assert_eq!(
            decode(&ns(), &other, None, value.clone()),
            Err(Rejected::WrongKey)
        );
        let msl = Namespace::new("msl", "naga 30");
        assert_eq!(
            decode(&msl, &key, None, value.clone()),
            Err(Rejected::WrongKey)
        );
        let mut flipped = value.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(
            decode(&ns(), &key, None, flipped),
            Err(Rejected::Corrupt(CorruptReason::ChecksumMismatch))
        );
        let mut cut = value.clone();
        cut.pop();
        assert!(matches!(
            decode(&ns(), &key, None, cut),
            Err(Rejected::Corrupt(CorruptReason::LengthMismatch { .. }))
        ));
        assert_eq!(
            decode(&ns(), &key, None, b"junk".to_vec()),
            Err(Rejected::Format)
        );
        assert_eq!(decode(&ns(), &key, None, Vec::new()), Err(Rejected::Format));
        // A version 1 value (no MAC field) is another format, not a damaged value.
        let mut v1 = value.clone();
        v1[..8].copy_from_slice(b"kilnrv1\n");
        assert_eq!(decode(&ns(), &key, None, v1), Err(Rejected::Format));
    }

    #[test]
    fn with_a_key_only_values_made_with_it_are_served() {
        let key = ContentKey::hash(b"text");
        let ci = secret("the CI secret, 32 bytes or so...");
        let signed = encode(&ns(), &key, Some(&ci), b"spirv");
        assert_eq!(
            decode(&ns(), &key, Some(&ci), signed.clone()).unwrap(),
            b"spirv"
        );
        // Readers without the key still check the checksum and serve it.
        assert_eq!(decode(&ns(), &key, None, signed.clone()).unwrap(), b"spirv");
        // Unkeyed, or keyed with another secret: refused by a reader with the key.
        let plain = encode(&ns(), &key, None, b"forged");
        assert_eq!(
            decode(&ns(), &key, Some(&ci), plain),
            Err(Rejected::Unauthenticated)
        );
        let other = encode(
            &ns(),
            &key,
            Some(&secret("not the CI secret at all")),
            b"forged",
        );
        assert_eq!(
            decode(&ns(), &key, Some(&ci), other),
            Err(Rejected::Unauthenticated)
        );
        // A signed value moved under another key fails its key check, its MAC too.
        let moved = encode(&ns(), &ContentKey::hash(b"other"), Some(&ci), b"spirv");
        assert_eq!(
            decode(&ns(), &key, Some(&ci), moved),
            Err(Rejected::WrongKey)
        );
        // The payload swapped and the checksum recomputed: the MAC does not follow.
        let mut swapped = signed[..signed.len() - 5 - 8 - CHECKSUM_LEN].to_vec();
        swapped.extend_from_slice(&verify::checksum(b"evil!"));
        swapped.extend_from_slice(&5u64.to_le_bytes());
        swapped.extend_from_slice(b"evil!");
        assert_eq!(
            decode(&ns(), &key, None, swapped.clone()).unwrap(),
            b"evil!"
        );
        assert_eq!(
            decode(&ns(), &key, Some(&ci), swapped),
            Err(Rejected::Unauthenticated)
        );
        assert!(RemoteKey::from_secret(b"short").is_none());
        assert_eq!(format!("{ci:?}"), "RemoteKey(***)");
    }
}
