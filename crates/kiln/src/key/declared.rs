//! A shader's declared (legal) keywords, and the keys that may only use them.

use rustc_hash::FxHashSet;

use super::symbol::with_local;
use super::{build, check_keyword, shader_symbol, KeyError, Symbol, VariantKey};

/// The keywords a shader declares (e.g. the union of its keyword axes).
///
/// [`DeclaredKeywords::key`] builds keys that use only these keywords: an unknown keyword is
/// an error naming it and the shader, because silently dropping it would turn a
/// configuration mistake into a cache hit on the wrong variant.
#[derive(Clone, Debug)]
pub struct DeclaredKeywords {
    shader: Symbol,
    legal: FxHashSet<Symbol>,
    /// The declared keywords in ordinal order, for error messages.
    sorted: Vec<&'static str>,
}

impl DeclaredKeywords {
    /// Declares `keywords` as the legal keywords of `shader`. Repeats are allowed; a keyword
    /// that is empty or holds `;`, `|` or whitespace is an error naming it.
    pub fn new<I>(shader: &str, keywords: I) -> Result<Self, KeyError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        with_local(|tables| {
            let shader_name = shader_symbol(tables, shader)?;
            let mut legal = FxHashSet::default();
            let mut sorted = Vec::new();
            for keyword in keywords {
                let keyword = keyword.as_ref();
                let name = tables.keyword(keyword, check_keyword).map_err(|fault| {
                    KeyError::InvalidDeclaredKeyword {
                        shader: shader.to_owned(),
                        keyword: keyword.to_owned(),
                        fault,
                    }
                })?;
                if legal.insert(name) {
                    sorted.push(name.as_str());
                }
            }
            let distinct = kiln_runtime::canon::canonicalize_by(&mut sorted, |name| name);
            sorted.truncate(distinct);
            Ok(DeclaredKeywords {
                shader: shader_name,
                legal,
                sorted,
            })
        })
    }

    /// The shader's name.
    pub fn shader(&self) -> &'static str {
        self.shader.as_str()
    }

    /// The declared keywords in ordinal order.
    pub fn keywords(&self) -> &[&'static str] {
        &self.sorted
    }

    /// Whether `keyword` is declared.
    pub fn contains(&self, keyword: &str) -> bool {
        with_local(|tables| tables.known_keyword(keyword, check_keyword))
            .is_some_and(|symbol| self.legal.contains(&symbol))
    }

    /// Builds the canonical key of this shader's `pass` with `keywords` at `revision`, like
    /// [`VariantKey::new`], and also refuses any keyword the shader does not declare.
    pub fn key<I>(&self, pass: &str, keywords: I, revision: u64) -> Result<VariantKey, KeyError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let shader = self.shader();
        build(shader, pass, keywords, revision, |tables, keyword| {
            tables
                .known_keyword(keyword, check_keyword)
                .filter(|symbol| self.legal.contains(symbol))
                .ok_or_else(|| self.unknown(pass, keyword))
        })
    }

    #[cold]
    fn unknown(&self, pass: &str, keyword: &str) -> KeyError {
        let shader = self.shader().to_owned();
        match check_keyword(keyword) {
            Err(fault) => KeyError::InvalidKeyword {
                shader,
                pass: pass.to_owned(),
                keyword: keyword.to_owned(),
                fault,
            },
            Ok(()) => KeyError::UnknownKeyword {
                shader,
                pass: pass.to_owned(),
                keyword: keyword.to_owned(),
                declared: kiln_runtime::canon::keyword_text(&self.sorted),
            },
        }
    }
}
