//! Canonical variant keys: (shader, pass, keyword set, source revision), immutable.
//!
//! A key is built from any iterable of keyword strings: duplicates are removed and the rest
//! put in ordinal (byte) order, so the same set in any order or with repeats gives one key.
//! Names are interned (`Symbol`) and the set is interned (`KeywordSet`), so a key is 24
//! bytes, `Copy`, and compares and hashes as integers. The text form (`FOG;SKIN`) and the
//! digest exist for display and logs only; the cache is keyed by the structure itself.

mod declared;
mod error;
mod symbol;

pub use declared::DeclaredKeywords;
pub use error::{KeyError, NameFault};
pub use symbol::{KeywordSet, Symbol};

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use symbol::{with_local, KeywordBuf, LocalTables};

/// The identity of one shader variant: which shader, which pass, which keywords, and which
/// revision of its source.
///
/// Immutable: its fields are private and it has no setters. Built by [`VariantKey::new`] or,
/// with validation against a shader's legal keywords, by [`DeclaredKeywords::key`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VariantKey {
    shader: Symbol,
    pass: Symbol,
    keywords: KeywordSet,
    revision: u64,
}

impl VariantKey {
    /// Builds the canonical key of `shader`/`pass` with `keywords` at source `revision`.
    ///
    /// Keyword order and repeats do not matter. Errors name the offending text: an empty
    /// shader or pass name or one holding `|`; an empty keyword or one holding `;`, `|` or
    /// whitespace. Keywords are not checked against a declared set here (see
    /// [`DeclaredKeywords::key`]).
    pub fn new<I>(shader: &str, pass: &str, keywords: I, revision: u64) -> Result<Self, KeyError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        build(shader, pass, keywords, revision, |tables, keyword| {
            tables
                .keyword(keyword, check_keyword)
                .map_err(|fault| KeyError::InvalidKeyword {
                    shader: shader.to_owned(),
                    pass: pass.to_owned(),
                    keyword: keyword.to_owned(),
                    fault,
                })
        })
    }

    /// The shader's name.
    pub fn shader(&self) -> &'static str {
        self.shader.as_str()
    }

    /// The shader's interned name.
    pub fn shader_symbol(&self) -> Symbol {
        self.shader
    }

    /// The pass's name.
    pub fn pass(&self) -> &'static str {
        self.pass.as_str()
    }

    /// The pass's interned name.
    pub fn pass_symbol(&self) -> Symbol {
        self.pass
    }

    /// The canonical keyword set.
    pub fn keywords(&self) -> KeywordSet {
        self.keywords
    }

    /// The keyword set's text form: distinct keywords in ordinal order joined with `;`.
    pub fn keyword_text(&self) -> &'static str {
        self.keywords.text()
    }

    /// The source revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// This key at another source revision.
    pub fn at_revision(&self, revision: u64) -> VariantKey {
        VariantKey { revision, ..*self }
    }

    /// The first 12 hex digits (lower case) of SHA-256 over `shader|pass|keywords|revision`.
    ///
    /// For logs and reports only: 48 bits can collide, so it is never a cache key.
    /// One definition, [`kiln_runtime::canon::variant_digest`]: a pack stores it per variant.
    pub fn digest(&self) -> String {
        kiln_runtime::canon::variant_digest(
            self.shader(),
            self.pass(),
            self.keyword_text(),
            self.revision,
        )
    }
}

impl Hash for VariantKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Two words instead of four writes: cheaper with FxHasher, same information.
        let names = u64::from(self.shader.index()) << 32 | u64::from(self.pass.index());
        state.write_u64(names);
        self.keywords.hash(state);
        state.write_u64(self.revision);
    }
}

impl PartialOrd for VariantKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Ordinal order of (shader, pass, keyword text, revision): stable across processes, unlike
/// the interned numbers.
impl Ord for VariantKey {
    fn cmp(&self, other: &Self) -> Ordering {
        if self == other {
            return Ordering::Equal;
        }
        (
            self.shader(),
            self.pass(),
            self.keyword_text(),
            self.revision,
        )
            .cmp(&(
                other.shader(),
                other.pass(),
                other.keyword_text(),
                other.revision,
            ))
    }
}

/// `Lit/Forward[FOG;SKIN]@7`.
impl fmt::Display for VariantKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}[{}]@{}",
            self.shader(),
            self.pass(),
            self.keyword_text(),
            self.revision
        )
    }
}

impl fmt::Debug for VariantKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VariantKey({self})")
    }
}

/// Validates and interns the names, admits every keyword through `admit` (which validates
/// it), and interns the canonical set; all through this thread's tables.
fn build<I>(
    shader: &str,
    pass: &str,
    keywords: I,
    revision: u64,
    mut admit: impl FnMut(&mut LocalTables, &str) -> Result<Symbol, KeyError>,
) -> Result<VariantKey, KeyError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    with_local(|tables| {
        let shader_name = shader_symbol(tables, shader)?;
        let pass_name = tables
            .name(pass, check_name)
            .map_err(|fault| KeyError::InvalidPass {
                shader: shader.to_owned(),
                pass: pass.to_owned(),
                fault,
            })?;
        let mut buf = KeywordBuf::new();
        for keyword in keywords {
            buf.push(admit(tables, keyword.as_ref())?);
        }
        Ok(VariantKey {
            shader: shader_name,
            pass: pass_name,
            keywords: buf.intern_set(tables),
            revision,
        })
    })
}

/// The symbol of `name` as a shader or pass name, interned through this thread's tables;
/// `None` when no key can hold that name.
/// Interns a shader name, refusing one that is empty or holds `|`.
fn shader_symbol(tables: &mut LocalTables, shader: &str) -> Result<Symbol, KeyError> {
    tables
        .name(shader, check_name)
        .map_err(|fault| KeyError::InvalidShader {
            shader: shader.to_owned(),
            fault,
        })
}

pub(crate) fn name_symbol(name: &str) -> Option<Symbol> {
    with_local(|tables| tables.name(name, check_name).ok())
}

/// Shader and pass names become directories under the output directory: one validator,
/// shared with the manifest ([`crate::boundary::check_name`]).
fn check_name(name: &str) -> Result<(), NameFault> {
    crate::boundary::check_name(name)
}

/// Keywords become part of an output file name (`FOG+SKIN.spv`) and of the key's text form
/// (`;`-separated): the same rules as names.
fn check_keyword(keyword: &str) -> Result<(), NameFault> {
    crate::boundary::check_name(keyword)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(shader: &str, pass: &str, keywords: &[&str], revision: u64) -> VariantKey {
        VariantKey::new(shader, pass, keywords, revision).unwrap()
    }

    #[test]
    fn digest_matches_the_founding_documents_golden_value() {
        assert_eq!(
            key("Lit", "Forward", &["FOG", "SKIN"], 7).digest(),
            "2a876a0d5092"
        );
    }

    #[test]
    fn keyword_order_is_canonical() {
        let a = key("Lit", "Forward", &["FOG", "SKIN"], 7);
        let b = key("Lit", "Forward", &["SKIN", "FOG", "FOG"], 7);
        assert_eq!(a, b);
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.keyword_text(), "FOG;SKIN");
    }

    #[test]
    fn pass_partitions_cache() {
        let a = key("Lit", "Forward", &["FOG"], 7);
        let b = key("Lit", "Shadow", &["FOG"], 7);
        assert_ne!(a, b);
        assert_ne!(a.digest(), b.digest());
    }

    #[test]
    fn display_and_accessors() {
        let k = key("Lit", "Forward", &["SKIN", "FOG"], 7);
        assert_eq!(k.to_string(), "Lit/Forward[FOG;SKIN]@7");
        assert_eq!(k.shader(), "Lit");
        assert_eq!(k.pass(), "Forward");
        assert_eq!(k.keywords().names(), ["FOG", "SKIN"]);
        assert_eq!(k.revision(), 7);
        assert_eq!(k.at_revision(8).to_string(), "Lit/Forward[FOG;SKIN]@8");
        assert_eq!(key("Lit", "Forward", &[], 1).to_string(), "Lit/Forward[]@1");
    }

    #[test]
    fn order_is_by_bytes_not_by_interning_order() {
        // Intern "b_late" before "a_late" so that symbol numbers disagree with byte order.
        let _ = Symbol::intern("zz_order_b");
        let _ = Symbol::intern("zz_order_a");
        let k = key(
            "Lit",
            "Forward",
            &["zz_order_b", "zz_order_a", "Zz_order"],
            1,
        );
        assert_eq!(k.keyword_text(), "Zz_order;zz_order_a;zz_order_b");
    }

    #[test]
    fn sets_larger_than_the_stack_buffer_are_canonical_too() {
        let names: Vec<String> = (0..40).map(|i| format!("K{:02}", 39 - i)).collect();
        let mut doubled = names.clone();
        doubled.extend(names.iter().rev().cloned());
        let a = VariantKey::new("Lit", "Forward", &names, 3).unwrap();
        let b = VariantKey::new("Lit", "Forward", &doubled, 3).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.keywords().len(), 40);
        assert!(a.keyword_text().starts_with("K00;K01;"));
    }

    #[test]
    fn invalid_keywords_are_errors_naming_them() {
        for (bad, fault) in [
            ("", NameFault::Empty),
            ("FO;G", NameFault::Reserved(';')),
            ("FO|G", NameFault::Reserved('|')),
            ("FO G", NameFault::Whitespace(' ')),
            ("FOG\t", NameFault::Whitespace('\t')),
        ] {
            let err = VariantKey::new("Lit", "Forward", ["SKIN", bad], 7).unwrap_err();
            assert_eq!(
                err,
                KeyError::InvalidKeyword {
                    shader: "Lit".into(),
                    pass: "Forward".into(),
                    keyword: bad.into(),
                    fault,
                }
            );
            assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        }
    }

    #[test]
    fn invalid_shader_and_pass_names_are_errors() {
        let err = VariantKey::new("", "Forward", ["FOG"], 7).unwrap_err();
        assert!(matches!(
            err,
            KeyError::InvalidShader {
                fault: NameFault::Empty,
                ..
            }
        ));
        let err = VariantKey::new("Li|t", "Forward", ["FOG"], 7).unwrap_err();
        assert!(err.to_string().contains("`Li|t`"), "{err}");
        let err = VariantKey::new("Lit", "For|ward", ["FOG"], 7).unwrap_err();
        assert!(err.to_string().contains("`For|ward`"), "{err}");
        let err = VariantKey::new("Lit", "", ["FOG"], 7).unwrap_err();
        assert!(matches!(
            err,
            KeyError::InvalidPass {
                fault: NameFault::Empty,
                ..
            }
        ));
        // One validator for names and keywords, the manifest's too: names become path
        // components, so no whitespace, separators, `.` or `..`.
        for bad in ["My Lit", "..", ".", "a/b", "a\\b", "a\0b"] {
            assert!(
                VariantKey::new(bad, "Forward", ["FOG"], 7).is_err(),
                "{bad:?}"
            );
            assert!(VariantKey::new("Lit", bad, ["FOG"], 7).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn declared_keywords_refuse_unknown_ones_naming_keyword_and_shader() {
        let declared = DeclaredKeywords::new("Lit", ["SKIN", "FOG", "FOG"]).unwrap();
        assert_eq!(declared.keywords(), ["FOG", "SKIN"]);
        assert!(declared.contains("FOG"));
        assert!(!declared.contains("RAIN"));
        let k = declared.key("Forward", ["SKIN", "FOG"], 7).unwrap();
        assert_eq!(k, key("Lit", "Forward", &["FOG", "SKIN"], 7));
        let err = declared.key("Forward", ["FOG", "RAIN"], 7).unwrap_err();
        assert_eq!(
            err,
            KeyError::UnknownKeyword {
                shader: "Lit".into(),
                pass: "Forward".into(),
                keyword: "RAIN".into(),
                declared: "FOG;SKIN".into(),
            }
        );
        let text = err.to_string();
        assert!(text.contains("`RAIN`") && text.contains("Lit"), "{text}");
        // A malformed keyword is reported as malformed, not merely unknown.
        let err = declared.key("Forward", ["FO G"], 7).unwrap_err();
        assert!(matches!(err, KeyError::InvalidKeyword { .. }), "{err}");
        let err = DeclaredKeywords::new("Lit", ["FOG", "BAD;ONE"]).unwrap_err();
        assert!(err.to_string().contains("`BAD;ONE`"), "{err}");
    }

    #[test]
    fn keyword_sets_are_interned_once() {
        let a = key("Lit", "Forward", &["SKIN", "FOG"], 1).keywords();
        let b = key("Unlit", "Shadow", &["FOG", "SKIN", "SKIN"], 2).keywords();
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.names(), b.names()));
        assert!(a.contains(Symbol::intern("FOG")));
        assert!(!a.contains(Symbol::intern("RAIN")));
        assert_eq!((a.len(), a.is_empty()), (2, false));
        assert!(key("Lit", "Forward", &[], 1).keywords().is_empty());
    }

    #[test]
    fn keys_order_ordinally() {
        let mut keys = [
            key("Lit", "Shadow", &[], 1),
            key("Lit", "Forward", &["SKIN"], 1),
            key("Lit", "Forward", &["FOG"], 2),
            key("Lit", "Forward", &["FOG"], 1),
            key("Alpha", "Forward", &[], 9),
        ];
        keys.sort();
        let text: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "Alpha/Forward[]@9",
                "Lit/Forward[FOG]@1",
                "Lit/Forward[FOG]@2",
                "Lit/Forward[SKIN]@1",
                "Lit/Shadow[]@1"
            ]
        );
    }
}
