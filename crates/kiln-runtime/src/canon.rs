//! The canonical keyword rule: one definition, shared by kiln (the build) and the runtime (the
//! engine's lookup).
//!
//! kiln names a variant by (shader, pass, keyword set). A keyword set is *canonical* when its
//! keywords are distinct and in ordinal (byte) order; any order of the same keywords, with or
//! without repeats, names the same variant. Everything here is a pure function of its
//! arguments: kiln's interned keys (`kiln::key`), its manifest, its output file names and the
//! runtime's [`Library::get`](crate::Library::get) all call these functions, so the build
//! and the engine cannot disagree on which variant a keyword set names.
//!
//! - [`check_name`]: the validator of every shader, pass and keyword name (they become path
//!   components and parts of the key's text form).
//! - [`check_keyword_identifier`]: the manifest's stricter rule for declared keywords (they
//!   become preprocessor macros).
//! - [`keyword_order`], [`canonicalize_by`], [`canonicalize`], [`is_canonical`]: the order and
//!   the sort + dedup.
//! - [`write_keyword_text`] (`FOG;SKIN`), [`write_keyword_file_name`] (`FOG+SKIN`, `_` for the
//!   empty set, hashed past [`MAX_KEYWORD_NAME_BYTES`]) and [`variant_digest`] (12 hex digits
//!   for logs).

use std::cmp::Ordering;
use std::fmt;

use sha2::{Digest as _, Sha256};

/// The name of the index file in kiln's output directory (refused as a name: it would collide
/// with the index).
pub const INDEX_FILE: &str = "index.json";

/// The extension of a pack file: kiln writes one pack per target, `<output dir>/<target>.kpack`
/// ([`pack_file_name`]).
pub const PACK_EXTENSION: &str = "kpack";

/// The file name of `target`'s pack in kiln's output directory (`spirv.kpack`), the one rule
/// kiln writes with and [`Library::open_dir`](crate::Library::open_dir) reads with. A target
/// is a valid name ([`check_name`]), so the file name is one path component.
pub fn pack_file_name(target: &str) -> String {
    format!("{target}.{PACK_EXTENSION}")
}

/// The manifest's spelling of "no keyword from this axis"; also the keyword part of the output
/// file name of the empty set (`_.spv`). No declared keyword is ever `_`.
pub const NONE_KEYWORD: &str = "_";

/// Separates keywords in a set's text form (`FOG;SKIN`).
pub const KEYWORD_TEXT_SEPARATOR: char = ';';

/// Separates keywords in an output file name (`FOG+SKIN.spv`).
pub const KEYWORD_FILE_SEPARATOR: char = '+';

/// The longest keyword part of an output's file name. Past it (ten 29-character keywords
/// make 299 bytes, and most file systems stop at 255) the name is the keywords that fit in
/// [`KEPT_KEYWORD_BYTES`], then `~` and 32 hex digits of the blake3 hash of the whole
/// keyword part: `~` is in no keyword (they are identifiers), so such a name never equals a
/// plain one. `index.json` holds every variant's keywords in full.
pub const MAX_KEYWORD_NAME_BYTES: usize = 200;

/// The keywords kept readable in a hashed file name (whole keywords only).
pub const KEPT_KEYWORD_BYTES: usize = 160;

/// The length of a variant digest in hex digits.
pub const DIGEST_HEX_LEN: usize = 12;

/// Why a name was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameFault {
    /// The name is the empty string.
    Empty,
    /// The name holds a character that the key's text form reserves (`;` or `|`).
    Reserved(char),
    /// The name holds a whitespace character.
    Whitespace(char),
    /// The name holds a path separator (`/`, `\`), a drive colon (`:`) or NUL: it would not
    /// be one path component on every platform.
    PathSeparator(char),
    /// The name holds a control character.
    Control(char),
    /// The name starts with `.`: `.` and `..` name existing directories, and the output
    /// directory's hidden files (`.kiln-stat`, `.kiln-tmp-*`) are kiln's own.
    DotName,
    /// The name is `index.json`, the output directory's index.
    IndexName,
}

impl fmt::Display for NameFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameFault::Empty => f.write_str("it is empty"),
            NameFault::Reserved(c) => write!(f, "it holds the reserved character `{c}`"),
            NameFault::Whitespace(c) => write!(f, "it holds whitespace (U+{:04X})", u32::from(*c)),
            NameFault::PathSeparator(c) => write!(
                f,
                "it holds `/`, `\\`, `:` or NUL (U+{:04X}); names become single path components",
                u32::from(*c)
            ),
            NameFault::Control(c) => {
                write!(f, "it holds a control character (U+{:04X})", u32::from(*c))
            }
            NameFault::DotName => {
                f.write_str("it starts with `.` (`.`, `..` and kiln's hidden files in `out/`)")
            }
            NameFault::IndexName => f.write_str("`index.json` is the output directory's index"),
        }
    }
}

impl std::error::Error for NameFault {}

/// Checks a shader, pass or keyword name: it becomes one path component under the output
/// directory, and part of the key's text form `shader|pass|keywords|revision`. Not empty, not
/// starting with `.` (so not `.`, `..` or one of kiln's hidden files), not `index.json`, no
/// `/`, `\`, `:` (a drive on Windows: `C:`), NUL or other control character, no `|` or `;`,
/// no whitespace.
pub fn check_name(name: &str) -> Result<(), NameFault> {
    if name.is_empty() {
        return Err(NameFault::Empty);
    }
    if name.starts_with('.') {
        return Err(NameFault::DotName);
    }
    if name == INDEX_FILE {
        return Err(NameFault::IndexName);
    }
    for c in name.chars() {
        match c {
            '/' | '\\' | ':' | '\0' => return Err(NameFault::PathSeparator(c)),
            '|' | ';' => return Err(NameFault::Reserved(c)),
            c if c.is_whitespace() => return Err(NameFault::Whitespace(c)),
            c if c.is_control() => return Err(NameFault::Control(c)),
            _ => {}
        }
    }
    Ok(())
}

/// The manifest's rule for a declared keyword: keywords become preprocessor macros, so they
/// must be identifiers (ASCII letters, digits and `_`, not starting with a digit). Every
/// identifier passes [`check_name`] too. The error completes "keyword `X` ...".
pub fn check_keyword_identifier(word: &str) -> Result<(), &'static str> {
    let mut chars = word.chars();
    match chars.next() {
        None => Err("is empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => Err("must start with a letter or `_`"),
        _ if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            Err("may hold only letters, digits and `_`")
        }
        _ => Ok(()),
    }
}

/// The canonical order of keywords: ordinal (byte) order, independent of locale, of the order
/// given and of kiln's interning.
#[inline]
pub fn keyword_order(a: &str, b: &str) -> Ordering {
    a.as_bytes().cmp(b.as_bytes())
}

/// Puts `items` in canonical order of their keyword (`key`) and moves one of each distinct
/// keyword to the front; returns how many there are. `items[..n]` is then the canonical set.
/// No allocation: the runtime canonicalises a query on the stack with it.
#[inline]
pub fn canonicalize_by<T>(items: &mut [T], key: impl Fn(&T) -> &str) -> usize {
    // Insertion sort for the usual handful of keywords, the library sort past it.
    if items.len() <= 16 {
        for i in 1..items.len() {
            let mut j = i;
            while j > 0 && keyword_order(key(&items[j - 1]), key(&items[j])) == Ordering::Greater {
                items.swap(j - 1, j);
                j -= 1;
            }
        }
    } else {
        items.sort_unstable_by(|a, b| keyword_order(key(a), key(b)));
    }
    let mut kept = 0;
    for i in 0..items.len() {
        if kept == 0 || key(&items[kept - 1]) != key(&items[i]) {
            items.swap(kept, i);
            kept += 1;
        }
    }
    kept
}

/// The canonical set of `keywords`: distinct, in [`keyword_order`].
pub fn canonicalize<S: AsRef<str>>(mut keywords: Vec<S>) -> Vec<S> {
    let n = canonicalize_by(&mut keywords, |k| k.as_ref());
    keywords.truncate(n);
    keywords
}

/// Whether `keywords` is canonical: strictly increasing in [`keyword_order`].
pub fn is_canonical<S: AsRef<str>>(keywords: &[S]) -> bool {
    keywords
        .windows(2)
        .all(|w| keyword_order(w[0].as_ref(), w[1].as_ref()) == Ordering::Less)
}

/// Appends the text form of a canonical set to `out`: keywords joined with `;` (`FOG;SKIN`),
/// nothing for the empty set.
pub fn write_keyword_text<S: AsRef<str>>(out: &mut String, canonical: &[S]) {
    for (n, keyword) in canonical.iter().enumerate() {
        if n > 0 {
            out.push(KEYWORD_TEXT_SEPARATOR);
        }
        out.push_str(keyword.as_ref());
    }
}

/// The text form of a canonical set ([`write_keyword_text`]).
pub fn keyword_text<S: AsRef<str>>(canonical: &[S]) -> String {
    let mut out = String::new();
    write_keyword_text(&mut out, canonical);
    out
}

/// The length of the keyword part of an output's file name, before any hashing.
pub fn keyword_file_name_len<S: AsRef<str>>(canonical: &[S]) -> usize {
    let bytes: usize = canonical.iter().map(|k| k.as_ref().len()).sum();
    bytes + canonical.len().saturating_sub(1)
}

/// Appends the keyword part of a variant's output file name to `out`: `_` for the empty set,
/// else the keywords joined with `+` (`FOG+SKIN`); past [`MAX_KEYWORD_NAME_BYTES`] the whole
/// keywords that fit in [`KEPT_KEYWORD_BYTES`], `~` and 32 hex digits of the blake3 hash of
/// the unhashed part.
pub fn write_keyword_file_name<S: AsRef<str>>(out: &mut String, canonical: &[S]) {
    if canonical.is_empty() {
        out.push_str(NONE_KEYWORD);
        return;
    }
    let start = out.len();
    for (n, keyword) in canonical.iter().enumerate() {
        if n > 0 {
            out.push(KEYWORD_FILE_SEPARATOR);
        }
        out.push_str(keyword.as_ref());
    }
    if out.len() - start > MAX_KEYWORD_NAME_BYTES {
        let hash = blake3::hash(&out.as_bytes()[start..]);
        // Whole keywords up to the kept length: cut at the last `+` that fits.
        let kept = out[start..]
            .match_indices(KEYWORD_FILE_SEPARATOR)
            .map(|(at, _)| at)
            .take_while(|&at| at <= KEPT_KEYWORD_BYTES)
            .last()
            .unwrap_or(0);
        out.truncate(start + kept);
        out.push('~');
        out.push_str(&hash.to_hex()[..32]);
    }
}

/// The 12-hex digest (lower case) that names a variant in logs: the first 6 bytes of SHA-256
/// over `shader|pass|keyword_text|revision`, where `keyword_text` is the canonical set's text
/// form and `revision` the shader's source revision in decimal.
///
/// For logs and reports only: 48 bits can collide, so it is never a cache key. A pack stores
/// each variant's digest as kiln computed it (the runtime does not know revisions).
pub fn variant_digest(shader: &str, pass: &str, keyword_text: &str, revision: u64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(shader.as_bytes());
    hasher.update(b"|");
    hasher.update(pass.as_bytes());
    hasher.update(b"|");
    hasher.update(keyword_text.as_bytes());
    hasher.update(b"|");
    hasher.update(revision.to_string().as_bytes());
    let hash = hasher.finalize();
    let mut hex = String::with_capacity(DIGEST_HEX_LEN);
    for byte in &hash[..DIGEST_HEX_LEN / 2] {
        hex.push(hex_digit(byte >> 4));
        hex.push(hex_digit(byte & 0xf));
    }
    hex
}

/// Whether `text` has the form of a digest: [`DIGEST_HEX_LEN`] lower-case hex digits.
pub fn is_digest(text: &[u8]) -> bool {
    text.len() == DIGEST_HEX_LEN && text.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0xf)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_the_founding_documents_golden_value() {
        assert_eq!(
            variant_digest("Lit", "Forward", "FOG;SKIN", 7),
            "2a876a0d5092"
        );
        assert!(is_digest(b"2a876a0d5092"));
        assert!(!is_digest(b"2A876a0d5092"));
        assert!(!is_digest(b"2a876a0d509"));
    }

    #[test]
    fn canonical_sets_are_sorted_by_bytes_and_distinct() {
        assert_eq!(
            canonicalize(vec!["SKIN", "FOG", "SKIN", "Zz", "a", "FOG"]),
            ["FOG", "SKIN", "Zz", "a"]
        );
        let many: Vec<String> = (0..40).rev().map(|i| format!("K{:02}", i % 20)).collect();
        let set = canonicalize(many);
        assert_eq!(set.len(), 20);
        assert!(is_canonical(&set));
        assert!(!is_canonical(&["B", "A"]));
        assert!(!is_canonical(&["A", "A"]));
        assert_eq!(keyword_text(&set[..2]), "K00;K01");
        assert_eq!(keyword_text::<&str>(&[]), "");
    }

    proptest::proptest! {
        /// The stack-friendly sort + dedup is the set a `BTreeSet` (byte order) makes, below
        /// and above the insertion-sort cut-off.
        #[test]
        fn canonicalize_is_a_sorted_set(words in proptest::collection::vec("[A-Ca-c_é0-9]{1,3}", 0..40)) {
            let want: Vec<String> = words.iter().cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
            let got = canonicalize(words);
            proptest::prop_assert!(is_canonical(&got));
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn file_names() {
        let name = |set: &[&str]| {
            let mut out = String::new();
            write_keyword_file_name(&mut out, set);
            out
        };
        assert_eq!(name(&[]), "_");
        assert_eq!(name(&["FOG", "SKIN"]), "FOG+SKIN");
        let long: Vec<String> = (0..10).map(|i| format!("{i}{}", "A".repeat(28))).collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let hashed = name(&long);
        assert!(hashed.len() < MAX_KEYWORD_NAME_BYTES, "{hashed}");
        assert!(hashed.contains('~'), "{hashed}");
    }

    #[test]
    fn identifiers_are_names() {
        for word in ["FOG", "_x", "A1"] {
            assert_eq!(check_keyword_identifier(word), Ok(()));
            assert_eq!(check_name(word), Ok(()));
        }
        assert!(check_keyword_identifier("1A").is_err());
        assert!(check_keyword_identifier("A-B").is_err());
        assert_eq!(check_name("index.json"), Err(NameFault::IndexName));
    }
}
