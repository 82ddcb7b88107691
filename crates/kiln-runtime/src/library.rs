//! [`Library`]: an opened pack and the engine's lookup.

use std::cmp::Ordering;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering as AtomicOrdering};

use crate::canon::{self, NameFault};
use crate::pack::read::{EntryRec, IdList, View};
use crate::pack::{validate, Layout, PackError};

/// A pack that could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The file could not be opened, read or mapped.
    #[error("cannot open pack {path}: {source}")]
    Io {
        /// The pack's path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid pack.
    #[error("cannot read pack {path}: {source}")]
    Corrupt {
        /// The pack's path.
        path: PathBuf,
        /// What is wrong with it.
        source: PackError,
    },
}

/// A lookup that found no variant, each kind with what the caller needs to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The pack holds no such target.
    #[error("unknown target `{target}` (the pack holds [{}])", targets.join(", "))]
    UnknownTarget {
        /// The target as given.
        target: String,
        /// The pack's targets.
        targets: Vec<String>,
    },
    /// The pack holds no such shader.
    #[error("unknown shader `{shader}`")]
    UnknownShader {
        /// The shader as given.
        shader: String,
    },
    /// The shader declares no such pass.
    #[error("unknown pass `{pass}` of shader `{shader}` (it declares [{}])", passes.join(", "))]
    UnknownPass {
        /// The shader.
        shader: String,
        /// The pass as given.
        pass: String,
        /// The shader's passes.
        passes: Vec<String>,
    },
    /// A keyword that cannot be a keyword at all (empty, whitespace, `;`...).
    #[error("invalid keyword `{keyword}` for {shader}/{pass}: {fault}")]
    InvalidKeyword {
        /// The shader.
        shader: String,
        /// The pass.
        pass: String,
        /// The keyword as given.
        keyword: String,
        /// What is wrong with it.
        fault: NameFault,
    },
    /// A keyword the shader does not declare: never dropped, always an error.
    #[error(
        "unknown keyword `{keyword}` for {shader}/{pass}: shader `{shader}` declares [{}]",
        declared.join(";")
    )]
    UnknownKeyword {
        /// The shader.
        shader: String,
        /// The pass.
        pass: String,
        /// The keyword as given.
        keyword: String,
        /// The shader's declared keywords, in canonical order.
        declared: Vec<String>,
    },
    /// A legal keyword set that the build did not build (or that failed) for this target.
    #[error("{shader}/{pass}[{keywords}] was not built for target `{target}`")]
    NotBuilt {
        /// The shader.
        shader: String,
        /// The pass.
        pass: String,
        /// The canonical keyword set's text form (`FOG;SKIN`).
        keywords: String,
        /// The target.
        target: String,
    },
    /// The variant's artifact is damaged in the pack.
    #[error("{variant}: {source}")]
    CorruptArtifact {
        /// The variant (`Lit/Forward[FOG;SKIN]` for `spirv`).
        variant: String,
        /// The damage.
        source: PackError,
    },
}

enum Backing {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// Artifact states: not yet checked, checked and good, checked and damaged.
const UNCHECKED: u8 = 0;
const GOOD: u8 = 1;
const DAMAGED: u8 = 2;

/// An opened, validated pack: the engine's door to every variant of a build.
///
/// `Library` is `Send + Sync`; lookups take `&self` and allocate nothing for up to 16
/// keywords unless they fail. Every slice it hands out borrows from it, so a caller that
/// keeps bytes keeps the library (and its mapping) alive: reloading means opening the new
/// pack as a new `Library` and dropping the old one once no slice of it is held.
pub struct Library {
    backing: Backing,
    layout: Layout,
    artifacts: Box<[AtomicU8]>,
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Library")
            .field("bytes", &self.bytes().len())
            .field("variants", &self.len())
            .finish()
    }
}

impl Library {
    /// Maps the pack at `path` read-only and validates it (see [`crate::pack`]).
    ///
    /// kiln never modifies a pack in place (it writes a new file and renames it over the
    /// old one), so the mapping stays valid while the library lives. Do not truncate or
    /// rewrite a pack in place by other means while a library has it open.
    pub fn open(path: impl AsRef<Path>) -> Result<Library, OpenError> {
        let path = path.as_ref();
        let io = |source| OpenError::Io {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let backing = if len == 0 {
            Backing::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and private to this library. Its soundness rests on
            // the file not being changed while mapped: kiln replaces packs by rename, never in
            // place, and `open` documents that callers must not modify it either.
            Backing::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Library::from_backing(backing).map_err(|source| OpenError::Corrupt {
            path: path.to_owned(),
            source,
        })
    }

    /// Validates the pack held in `bytes` (for packs not on disk, and for tests and fuzzing).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Library, PackError> {
        Library::from_backing(Backing::Owned(bytes))
    }

    fn from_backing(backing: Backing) -> Result<Library, PackError> {
        let bytes: &[u8] = match &backing {
            Backing::Mapped(map) => map,
            Backing::Owned(bytes) => bytes,
        };
        let layout = validate(bytes)?;
        let count = View {
            bytes,
            layout: &layout,
        }
        .artifact_count();
        let artifacts = (0..count).map(|_| AtomicU8::new(UNCHECKED)).collect();
        Ok(Library {
            backing,
            layout,
            artifacts,
        })
    }

    fn bytes(&self) -> &[u8] {
        match &self.backing {
            Backing::Mapped(map) => map,
            Backing::Owned(bytes) => bytes,
        }
    }

    fn view(&self) -> View<'_> {
        View {
            bytes: self.bytes(),
            layout: &self.layout,
        }
    }

    /// The number of variants (entries: one per shader, pass, keyword set and target).
    pub fn len(&self) -> usize {
        self.view().entry_count()
    }

    /// Whether the pack holds no variant.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pack's targets, in canonical order.
    pub fn targets(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        let view = self.view();
        view.targets().iter().map(move |id| view.string(id))
    }

    /// The pack's shaders, in canonical order.
    pub fn shaders(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        let view = self.view();
        (0..view.shader_count()).map(move |i| view.string(view.shader(i).name))
    }

    /// The keywords `shader` declares, in canonical order.
    pub fn declared_keywords(
        &self,
        shader: &str,
    ) -> Result<impl ExactSizeIterator<Item = &str> + '_, LookupError> {
        let view = self.view();
        let rec = self.find_shader(shader)?;
        Ok(view.ids(rec.declared).iter().map(move |id| view.string(id)))
    }

    /// The passes `shader` declares, in canonical order.
    pub fn passes(
        &self,
        shader: &str,
    ) -> Result<impl ExactSizeIterator<Item = &str> + '_, LookupError> {
        let view = self.view();
        let rec = self.find_shader(shader)?;
        Ok(view.ids(rec.passes).iter().map(move |id| view.string(id)))
    }

    /// The variant of `shader`'s `pass` with `keywords` for `target`.
    ///
    /// `keywords` in any order and with repeats name the same variant: they are
    /// canonicalised by [`canon::canonicalize_by`], the rule kiln builds with. A keyword the
    /// shader does not declare is an error naming the declared ones, never dropped. The
    /// artifact's checksum is verified the first time it is served.
    pub fn get(
        &self,
        shader: &str,
        pass: &str,
        keywords: &[&str],
        target: &str,
    ) -> Result<Variant<'_>, LookupError> {
        let view = self.view();
        let targets = view.targets();
        let target_id = match targets.find_str(&view, target) {
            Some(i) => targets.get(i),
            None => {
                return Err(LookupError::UnknownTarget {
                    target: target.to_owned(),
                    targets: self.targets().map(str::to_owned).collect(),
                })
            }
        };
        let rec = self.find_shader(shader)?;
        let passes = view.ids(rec.passes);
        let pass_id = match passes.find_str(&view, pass) {
            Some(i) => passes.get(i),
            None => {
                return Err(LookupError::UnknownPass {
                    shader: shader.to_owned(),
                    pass: pass.to_owned(),
                    passes: passes.iter().map(|id| view.string(id).to_owned()).collect(),
                })
            }
        };
        let declared = view.ids(rec.declared);
        let found = with_pairs(keywords, |pairs| {
            // Each keyword checked in the order given (the first unknown one is named, as
            // kiln's `DeclaredKeywords::key` does), then the set made canonical by the rule.
            for (keyword, id) in pairs.iter_mut() {
                match declared.find_str(&view, keyword) {
                    Some(i) => *id = declared.get(i),
                    None => return Err(unknown_keyword(view, declared, shader, pass, keyword)),
                }
            }
            let distinct = canon::canonicalize_by(pairs, |&(keyword, _)| keyword);
            let set = &pairs[..distinct];
            let (first, count) = (rec.entries.0 as usize, rec.entries.1 as usize);
            let (mut lo, mut hi) = (first, first + count);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match view.cmp_entry(mid, pass_id, set.iter().map(|&(_, id)| id), target_id) {
                    Ordering::Less => lo = mid + 1,
                    Ordering::Greater => hi = mid,
                    Ordering::Equal => return Ok(mid),
                }
            }
            let set: Vec<&str> = set.iter().map(|&(keyword, _)| keyword).collect();
            Err(LookupError::NotBuilt {
                shader: shader.to_owned(),
                pass: pass.to_owned(),
                keywords: canon::keyword_text(&set),
                target: target.to_owned(),
            })
        })?;
        self.variant(found)
    }

    /// Every variant of `shader`, in the pack's order: by pass, canonical keyword set, target.
    pub fn variants(&self, shader: &str) -> Result<Variants<'_>, LookupError> {
        let rec = self.find_shader(shader)?;
        let first = rec.entries.0 as usize;
        Ok(Variants {
            library: self,
            next: first,
            end: first + rec.entries.1 as usize,
        })
    }

    /// Verifies every byte of the pack: the data section's checksum and every artifact's.
    /// [`Library::open`] checks only the header and tables, and [`Library::get`] each
    /// artifact it serves; this is the full check (for tools, and for tests).
    pub fn verify_all(&self) -> Result<(), PackError> {
        let view = self.view();
        if blake3::hash(view.data()).as_bytes() != &self.layout.data_sum {
            return Err(PackError::SectionChecksum("data"));
        }
        for i in 0..view.artifact_count() {
            self.artifact(i as u32)?;
        }
        Ok(())
    }

    fn find_shader(&self, shader: &str) -> Result<crate::pack::read::ShaderRec, LookupError> {
        let view = self.view();
        // Byte order is `canon::keyword_order`, the order the writer sorted names in.
        let (mut lo, mut hi) = (0, view.shader_count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match view
                .string_bytes(view.shader_name(mid))
                .cmp(shader.as_bytes())
            {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(view.shader(mid)),
            }
        }
        Err(LookupError::UnknownShader {
            shader: shader.to_owned(),
        })
    }

    /// The bytes of artifact `index`, verified once.
    fn artifact(&self, index: u32) -> Result<&[u8], PackError> {
        let view = self.view();
        let rec = view.artifact(index as usize);
        let bytes = view.artifact_bytes(&rec);
        let state = self
            .artifacts
            .get(index as usize)
            .ok_or(PackError::ArtifactChecksum(index))?;
        match state.load(AtomicOrdering::Acquire) {
            GOOD => Ok(bytes),
            DAMAGED => Err(PackError::ArtifactChecksum(index)),
            _ => {
                let good = blake3::hash(bytes).as_bytes() == &rec.sum;
                state.store(if good { GOOD } else { DAMAGED }, AtomicOrdering::Release);
                if good {
                    Ok(bytes)
                } else {
                    Err(PackError::ArtifactChecksum(index))
                }
            }
        }
    }

    fn variant(&self, entry: usize) -> Result<Variant<'_>, LookupError> {
        let view = self.view();
        let rec: EntryRec = view.entry(entry);
        let keywords = Keywords {
            view,
            ids: view.ids(rec.keywords),
        };
        let shader = view.string(rec.shader);
        let pass = view.string(rec.pass);
        let target = view.string(rec.target);
        let bytes = self
            .artifact(rec.artifact)
            .map_err(|source| LookupError::CorruptArtifact {
                variant: format!("{shader}/{pass}[{}] for `{target}`", keywords.text()),
                source,
            })?;
        Ok(Variant {
            shader,
            pass,
            keywords,
            target,
            digest: view.digest(&rec),
            bytes,
            reflection: view.reflection(&rec),
        })
    }
}

#[cold]
fn unknown_keyword(
    view: View<'_>,
    declared: IdList<'_>,
    shader: &str,
    pass: &str,
    keyword: &str,
) -> LookupError {
    match canon::check_name(keyword) {
        Err(fault) => LookupError::InvalidKeyword {
            shader: shader.to_owned(),
            pass: pass.to_owned(),
            keyword: keyword.to_owned(),
            fault,
        },
        Ok(()) => LookupError::UnknownKeyword {
            shader: shader.to_owned(),
            pass: pass.to_owned(),
            keyword: keyword.to_owned(),
            declared: declared
                .iter()
                .map(|id| view.string(id).to_owned())
                .collect(),
        },
    }
}

/// Keyword sets up to this size are canonicalised on the stack.
const INLINE_KEYWORDS: usize = 16;

/// Runs `f` with `keywords` paired with a string id each (0 until `f` sets it), on the stack
/// for up to [`INLINE_KEYWORDS`].
fn with_pairs<'k, R>(keywords: &[&'k str], f: impl FnOnce(&mut [(&'k str, u32)]) -> R) -> R {
    if keywords.len() <= INLINE_KEYWORDS {
        let mut pairs = [("", 0u32); INLINE_KEYWORDS];
        let pairs = &mut pairs[..keywords.len()];
        for (pair, &keyword) in pairs.iter_mut().zip(keywords) {
            pair.0 = keyword;
        }
        f(pairs)
    } else {
        let mut pairs: Vec<(&str, u32)> = keywords.iter().map(|&k| (k, 0)).collect();
        f(&mut pairs)
    }
}

/// One variant, borrowed from its [`Library`].
#[derive(Clone, Copy, Debug)]
pub struct Variant<'a> {
    /// The shader's name.
    pub shader: &'a str,
    /// The pass's name.
    pub pass: &'a str,
    /// The canonical keyword set.
    pub keywords: Keywords<'a>,
    /// The target's name.
    pub target: &'a str,
    /// 12 lower-case hex digits naming the variant in kiln's logs
    /// ([`canon::variant_digest`]).
    pub digest: &'a str,
    /// The compiled artifact, verified against its checksum.
    pub bytes: &'a [u8],
    /// The variant's reflection blob as the build stored it (empty when none), borrowed from
    /// the pack; identical blobs share one copy.
    pub reflection: &'a [u8],
}

/// A canonical keyword set read in place: distinct keywords in [`canon::keyword_order`].
#[derive(Clone, Copy)]
pub struct Keywords<'a> {
    view: View<'a>,
    ids: IdList<'a>,
}

impl<'a> Keywords<'a> {
    /// The number of keywords.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.len() == 0
    }

    /// The keywords, in canonical order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a str> + Clone + 'a {
        let view = self.view;
        self.ids.iter().map(move |id| view.string(id))
    }

    /// The text form (`FOG;SKIN`), as kiln's keys print it.
    pub fn text(&self) -> String {
        canon::keyword_text(&self.iter().collect::<Vec<_>>())
    }

    /// The keywords as owned strings.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }
}

impl fmt::Debug for Keywords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The variants of one shader ([`Library::variants`]); an item is an error only when its
/// artifact is damaged.
pub struct Variants<'a> {
    library: &'a Library,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Variants<'a> {
    type Item = Result<Variant<'a>, LookupError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let entry = self.next;
        self.next += 1;
        Some(self.library.variant(entry))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Variants<'_> {}
