//! The store entry decoder: any bytes are a payload or a reason, never a panic; an encoded
//! entry always decodes to its payload, and a decoded payload is the one that was written.
#![no_main]

use kiln::store::entry::{decode, encode};
use kiln::store::ContentKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let key = ContentKey::hash(data.get(..8).unwrap_or(data));
    if let Ok(payload) = decode(data, &key) {
        // Only a well-formed entry for this key decodes, and it re-encodes to itself.
        assert_eq!(encode(&key, payload), data);
    }
    let entry = encode(&key, data);
    assert_eq!(decode(&entry, &key), Ok(data));
    // Flipping any byte of the header or payload is detected.
    if !data.is_empty() {
        let mut bad = entry.clone();
        let at = usize::from(data[0]) % bad.len();
        bad[at] ^= 0x55;
        assert!(decode(&bad, &key).is_err());
    }
});
