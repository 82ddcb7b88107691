//! [`Library`]: an opened pack and the engine's lookup.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering as AtomicOrdering};
use std::sync::OnceLock;

use crate::canon::{self, NameFault};
use crate::pack::read::{check_all, check_artifact, check_shader, EntryRec, IdList, View};
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
    /// [`Library::open_dir`]: the directory holds no pack for the target.
    #[error(
        "no pack for target `{target}` in {dir} (expected {}): kiln writes packs when the \
         manifest sets `[output] layout = \"both\"`",
        dir.join(crate::pack_file_name(target)).display()
    )]
    NoPack {
        /// The directory.
        dir: PathBuf,
        /// The target asked for.
        target: String,
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
    /// The variant is damaged in the pack: its artifact, or its shader's entries (checked on
    /// the shader's first use, see [`crate::pack`]).
    #[error("{variant}: {source}")]
    CorruptArtifact {
        /// The variant (`Lit/Forward[FOG;SKIN] for `spirv``), or for iteration the shader
        /// (`the variants of `Lit``).
        variant: String,
        /// The damage.
        source: PackError,
    },
}

/// The pack's bytes, held 8-aligned in memory (a map is page-aligned; owned bytes are copied
/// into u64s), so that tables are read as aligned u32 words.
enum Backing {
    Mapped(memmap2::Mmap),
    Owned(Box<[u64]>, usize),
}

impl Backing {
    fn owned(bytes: &[u8]) -> Backing {
        let words = bytes
            .chunks(8)
            .map(|chunk| {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                u64::from_ne_bytes(word)
            })
            .collect();
        Backing::Owned(words, bytes.len())
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped(map) => map,
            Backing::Owned(words, len) => {
                // SAFETY: u8 has alignment 1 and no invalid bit pattern, so `align_to` views
                // all of the u64s as bytes (nothing before or after), for the same lifetime.
                let (_, bytes, _) = unsafe { words.align_to::<u8>() };
                bytes.get(..*len).unwrap_or(bytes)
            }
        }
    }
}

/// States of an artifact: not yet checked, checked and good, checked and damaged.
const UNCHECKED: u8 = 0;
const GOOD: u8 = 1;
const DAMAGED: u8 = 2;

/// Shaders declaring up to this many keywords look a set up as a bit mask of positions in
/// their declared list, through a table of their entries built on first use; others by a
/// binary search of their entries.
const MASK_KEYWORDS: usize = 64;

/// A checked shader's entries by (pass, keyword mask, target): open addressing, linear
/// probing, each slot an entry's position in the shader's range or [`EMPTY_SLOT`]; empty for
/// a shader with more than [`MASK_KEYWORDS`] declared keywords.
struct ShaderIndex {
    slots: Box<[u32]>,
}

impl ShaderIndex {
    /// The entry of (pass, keyword mask, target), `first` being the shader's first entry.
    #[inline]
    fn find(
        &self,
        view: &View<'_>,
        first: usize,
        pass: u32,
        keywords: u64,
        target: u32,
        declared: IdList<'_>,
    ) -> Option<usize> {
        let mask = self.slots.len().wrapping_sub(1);
        let mut slot = entry_hash(pass, keywords, target) & mask;
        // At least twice as many slots as entries: a probe always meets an empty slot.
        loop {
            let i = *self.slots.get(slot)?;
            if i == EMPTY_SLOT {
                return None;
            }
            let e = first + i as usize;
            let entry = view.entry(e);
            if entry.pass == pass
                && entry.target == target
                && view
                    .ids(entry.keywords)
                    .iter()
                    .eq(mask_ids(keywords, declared))
            {
                return Some(e);
            }
            slot = (slot + 1) & mask;
        }
    }
}

/// The ids of the keywords in `mask` (positions in `declared`), in canonical order.
#[inline]
fn mask_ids(mut mask: u64, declared: IdList<'_>) -> impl Iterator<Item = u32> + '_ {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let p = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            declared.get(p)
        })
    })
}

/// The hash of an entry's key in a [`ShaderIndex`].
#[inline]
fn entry_hash(pass: u32, keywords: u64, target: u32) -> usize {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let m = u128::from(keywords ^ K)
        * u128::from((u64::from(pass) << 32 | u64::from(target)) ^ K.rotate_left(29));
    ((m as u64) ^ (m >> 64) as u64) as usize
}

/// Lists of names up to this length are searched by a scan rather than a hash.
const SCANNED_LIST: usize = 8;

/// No string in this slot of the string table.
const EMPTY_SLOT: u32 = u32::MAX;

/// An opened, validated pack: the engine's door to every variant of a build.
///
/// `Library` is `Send + Sync`; lookups take `&self` and allocate nothing for up to 16
/// keywords unless they fail. Every slice it hands out borrows from it, so a caller that
/// keeps bytes keeps the library (and its mapping) alive: reloading means opening the new
/// pack as a new `Library` and dropping the old one once no slice of it is held.
pub struct Library {
    /// The sections of `backing`, sliced once at open. Its `'static` is a lie told once, in
    /// `from_backing`: the slices point into `backing`'s map or heap buffer, which neither
    /// moves nor changes while the library lives, and [`Library::view`] hands them out only
    /// for the lifetime of `&self`.
    view: View<'static>,
    layout: Layout,
    /// Every string's id by the hash of its text (open addressing, linear probing).
    string_table: Box<[u32]>,
    /// Every string as text (validated at open), by id; borrowed from `backing` like `view`.
    strings: Box<[&'static str]>,
    /// For each string id, the index of the shader of that name, or [`EMPTY_SLOT`].
    shader_of: Box<[u32]>,
    /// Each shader's entries, checked and indexed on its first use.
    shaders: Box<[OnceLock<Result<ShaderIndex, PackError>>]>,
    artifacts: Box<[AtomicU8]>,
    backing: Backing,
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Library")
            .field("bytes", &self.backing.bytes().len())
            .field("variants", &self.len())
            .finish()
    }
}

/// A name's hash for the string table (folded multiplies over 8-byte words, the tail read
/// as overlapping words, with no copy; not for adversarial input, which would only make
/// lookups slower).
#[inline]
fn name_hash(name: &[u8]) -> usize {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let n = name.len();
    let r8 = |at: usize| {
        name.get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes)
    };
    let r4 = |at: usize| {
        name.get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_le_bytes)
    };
    // A folded multiply: the 128-bit product's halves xor-ed, so every input bit reaches
    // the low bits the table indexes with (a plain multiply only carries bits upwards).
    let mix = |h: u64, w: u64| {
        let m = u128::from(h ^ w) * u128::from(K);
        (m as u64) ^ (m >> 64) as u64
    };
    let mut h = (n as u64).wrapping_mul(K);
    if n >= 8 {
        let mut at = 0;
        while at + 8 < n {
            h = mix(h, r8(at));
            at += 8;
        }
        h = mix(h, r8(n - 8));
    } else if n >= 4 {
        h = mix(h, u64::from(r4(0)) | u64::from(r4(n - 4)) << 32);
    } else if n > 0 {
        let b = |at: usize| u64::from(name.get(at).copied().unwrap_or(0));
        h = mix(h, b(0) | b(n / 2) << 8 | b(n - 1) << 16);
    }
    mix(h, K.rotate_left(32)) as usize
}

/// Whether `a` and `b` are the same bytes; for the short names of a pack, without a call.
#[inline]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    let word = |s: &[u8], at: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(b) = s.get(at..at + 8) {
            w.copy_from_slice(b);
        }
        u64::from_ne_bytes(w)
    };
    let half = |s: &[u8], at: usize| -> u32 {
        let mut w = [0u8; 4];
        if let Some(b) = s.get(at..at + 4) {
            w.copy_from_slice(b);
        }
        u32::from_ne_bytes(w)
    };
    match n {
        // Two overlapping words cover 8 to 16 bytes.
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => a == b,
    }
}

impl Library {
    /// Maps the pack at `path` read-only and validates its header and small tables (see
    /// [`crate::pack`]: a shader's entries are checked on its first use, an artifact on its
    /// first serve, so that opening costs about the same whatever the pack's size).
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
            Backing::owned(&[])
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

    /// Opens the pack kiln wrote for `target` in the output directory `dir`:
    /// `dir/<target>.kpack` ([`crate::pack_file_name`]). A directory without one is
    /// [`OpenError::NoPack`].
    pub fn open_dir(dir: impl AsRef<Path>, target: &str) -> Result<Library, OpenError> {
        let dir = dir.as_ref();
        let path = dir.join(crate::pack_file_name(target));
        match std::fs::metadata(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Err(OpenError::NoPack {
                dir: dir.to_owned(),
                target: target.to_owned(),
            }),
            _ => Library::open(&path),
        }
    }

    /// Validates the pack held in `bytes` (for packs not on disk, and for tests and fuzzing).
    /// The bytes are copied once, to be held 8-aligned.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Library, PackError> {
        Library::from_backing(Backing::owned(&bytes))
    }

    fn from_backing(backing: Backing) -> Result<Library, PackError> {
        let bytes = backing.bytes();
        let layout = validate(bytes)?;
        let view = View::new(bytes, &layout).ok_or_else(|| PackError::Malformed {
            section: "header",
            what: "tables not aligned in memory".to_owned(),
        })?;
        // SAFETY: only the lifetime changes. `view` borrows the bytes of `backing`, a map or a
        // boxed buffer whose address does not change when `backing` moves into the library,
        // and which is neither modified nor dropped before the library (see the field's doc).
        let view = unsafe { std::mem::transmute::<View<'_>, View<'static>>(view) };
        let string_count = view.string_count();
        let strings: Box<[&'static str]> =
            (0..string_count as u32).map(|id| view.string(id)).collect();
        let size = (string_count * 2).next_power_of_two();
        let mut string_table = vec![EMPTY_SLOT; size].into_boxed_slice();
        let mask = size - 1;
        for (id, text) in strings.iter().enumerate() {
            let mut slot = name_hash(text.as_bytes()) & mask;
            while string_table.get(slot).is_some_and(|&s| s != EMPTY_SLOT) {
                slot = (slot + 1) & mask;
            }
            if let Some(s) = string_table.get_mut(slot) {
                // Fewer than u32::MAX strings (checked by `validate`).
                *s = id as u32;
            }
        }
        let shader_count = view.shader_count();
        let mut shader_of = vec![EMPTY_SLOT; string_count].into_boxed_slice();
        for i in 0..shader_count {
            if let Some(s) = shader_of.get_mut(view.shader_name(i) as usize) {
                *s = i as u32;
            }
        }
        let states = |n: usize| (0..n).map(|_| AtomicU8::new(UNCHECKED)).collect();
        Ok(Library {
            shaders: (0..shader_count).map(|_| OnceLock::new()).collect(),
            artifacts: states(view.artifact_count()),
            view,
            layout,
            string_table,
            strings,
            shader_of,
            backing,
        })
    }

    /// The sections, borrowed for as long as `self` (a reference: a `View` is 11 slices).
    #[inline]
    fn view(&self) -> &View<'_> {
        &self.view
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
        (0..view.shader_count()).map(move |i| view.string(view.shader_name(i)))
    }

    /// The keywords `shader` declares, in canonical order.
    pub fn declared_keywords(
        &self,
        shader: &str,
    ) -> Result<impl ExactSizeIterator<Item = &str> + '_, LookupError> {
        let view = self.view();
        let rec = view.shader(self.find_shader(shader)?);
        Ok(view.ids(rec.declared).iter().map(move |id| view.string(id)))
    }

    /// The passes `shader` declares, in canonical order.
    pub fn passes(
        &self,
        shader: &str,
    ) -> Result<impl ExactSizeIterator<Item = &str> + '_, LookupError> {
        let view = self.view();
        let rec = view.shader(self.find_shader(shader)?);
        Ok(view.ids(rec.passes).iter().map(move |id| view.string(id)))
    }

    /// The variant of `shader`'s `pass` with `keywords` for `target`.
    ///
    /// `keywords` in any order and with repeats name the same variant: the canonical set of
    /// [`canon::canonicalize_by`], the rule kiln builds with (here by string id, whose order
    /// is the keywords' byte order). A keyword the shader does not declare is an error
    /// naming the declared ones, never dropped. The shader's entries are checked on its
    /// first lookup and the artifact's checksum the first time it is served.
    pub fn get(
        &self,
        shader: &str,
        pass: &str,
        keywords: &[&str],
        target: &str,
    ) -> Result<Variant<'_>, LookupError> {
        let view = self.view();
        let Some(target_id) = self.find_in(view.targets(), target) else {
            return Err(self.unknown_target(target));
        };
        let s = self.find_shader(shader)?;
        let rec = view.shader(s);
        let passes = view.ids(rec.passes);
        let Some(pass_id) = self.find_in(passes, pass) else {
            return Err(unknown_pass(view, passes, shader, pass));
        };
        let declared = view.ids(rec.declared);
        if declared.len() <= MASK_KEYWORDS {
            // The set as a mask of positions in the declared list: canonical (sorted and
            // distinct) by construction, and the key of the shader's entry table.
            let mut mask = 0u64;
            for keyword in keywords {
                match self.find_position(declared, keyword) {
                    Some(p) => mask |= 1 << p,
                    None => return Err(unknown_keyword(view, declared, shader, pass, keyword)),
                }
            }
            let describe = || {
                let set: Vec<&str> = mask_ids(mask, declared).map(|id| self.string(id)).collect();
                canon::keyword_text(&set)
            };
            let index = self
                .shader_index(s)
                .map_err(|source| LookupError::CorruptArtifact {
                    variant: format!("{shader}/{pass}[{}] for `{target}`", describe()),
                    source,
                })?;
            let found = index
                .find(
                    view,
                    rec.entries.0 as usize,
                    pass_id,
                    mask,
                    target_id,
                    declared,
                )
                .ok_or_else(|| LookupError::NotBuilt {
                    shader: shader.to_owned(),
                    pass: pass.to_owned(),
                    keywords: describe(),
                    target: target.to_owned(),
                })?;
            return self.variant(found);
        }
        // More declared keywords than a mask holds (rare): each keyword checked in the order
        // given (the first unknown one is named, as kiln's `DeclaredKeywords::key` does),
        // then the set made canonical by the rule itself.
        let mut set: Vec<(&str, u32)> = Vec::with_capacity(keywords.len());
        for keyword in keywords {
            match self.find_in(declared, keyword) {
                Some(id) => set.push((self.string(id), id)),
                None => return Err(unknown_keyword(view, declared, shader, pass, keyword)),
            }
        }
        let distinct = canon::canonicalize_by(&mut set, |&(name, _)| name);
        set.truncate(distinct);
        let describe = || {
            let names: Vec<&str> = set.iter().map(|&(name, _)| name).collect();
            canon::keyword_text(&names)
        };
        if let Err(source) = self.shader_index(s) {
            return Err(LookupError::CorruptArtifact {
                variant: format!("{shader}/{pass}[{}] for `{target}`", describe()),
                source,
            });
        }
        let ids: Vec<u32> = set.iter().map(|&(_, id)| id).collect();
        let (first, count) = (rec.entries.0 as usize, rec.entries.1 as usize);
        let found = view
            .find_entry((first, first + count), pass_id, &ids, target_id)
            .ok_or_else(|| LookupError::NotBuilt {
                shader: shader.to_owned(),
                pass: pass.to_owned(),
                keywords: describe(),
                target: target.to_owned(),
            })?;
        self.variant(found)
    }

    /// Every variant of `shader`, in the pack's order: by pass, canonical keyword set, target.
    /// If the shader's entries are damaged, each item is that error.
    pub fn variants(&self, shader: &str) -> Result<Variants<'_>, LookupError> {
        let s = self.find_shader(shader)?;
        let rec = self.view().shader(s);
        let first = rec.entries.0 as usize;
        Ok(Variants {
            library: self,
            shader: s,
            next: first,
            end: first + rec.entries.1 as usize,
        })
    }

    /// The artifact whose blake3 is `hash`, verified as [`Library::get`] serves artifacts;
    /// `None` when the pack holds none. Artifacts are stored sorted by hash, so this is a
    /// binary search: kiln takes the bytes a new pack shares with the old one from the old
    /// one instead of reading every output file again.
    pub fn artifact_by_hash(&self, hash: &[u8; 32]) -> Result<Option<&[u8]>, PackError> {
        let view = self.view();
        let (mut lo, mut hi) = (0, view.artifact_count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match view.artifact(mid).sum.cmp(hash) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.artifact(mid as u32).map(Some),
            }
        }
        Ok(None)
    }

    /// Verifies every byte of the pack: every section's checksum, every shader's entries,
    /// every artifact's checksum, and that every artifact and reflection blob is used.
    /// [`Library::open`] checks only the header and the small tables, and [`Library::get`]
    /// what it reads; this is the full check (for tools, and for tests).
    pub fn verify_all(&self) -> Result<(), PackError> {
        let view = self.view();
        check_all(self.backing.bytes(), &self.layout, view)?;
        for s in 0..view.shader_count() {
            self.shader_index(s)?;
        }
        for i in 0..view.artifact_count() {
            self.artifact(i as u32)?;
        }
        Ok(())
    }

    /// The id of the string `text`, if the pack holds it.
    #[inline]
    fn string_id(&self, text: &str) -> Option<u32> {
        let mask = self.string_table.len().wrapping_sub(1);
        let mut slot = name_hash(text.as_bytes()) & mask;
        // The table is at least twice the number of strings: a probe always meets an empty
        // slot.
        loop {
            let id = self.string_table.get(slot).copied().unwrap_or(EMPTY_SLOT);
            if id == EMPTY_SLOT {
                return None;
            }
            if short_eq(self.string(id).as_bytes(), text.as_bytes()) {
                return Some(id);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The id in `list` (a sorted list of string ids) of the string `text`: a scan of a short
    /// list, the string table for a longer one.
    #[inline]
    fn find_in(&self, list: IdList<'_>, text: &str) -> Option<u32> {
        if list.len() <= SCANNED_LIST {
            list.iter()
                .find(|&id| short_eq(self.string(id).as_bytes(), text.as_bytes()))
        } else {
            self.string_id(text).filter(|&id| list.contains(id))
        }
    }

    /// The position in `list` (a sorted list of string ids) of the string `text`.
    #[inline]
    fn find_position(&self, list: IdList<'_>, text: &str) -> Option<usize> {
        if list.len() <= SCANNED_LIST {
            list.iter()
                .position(|id| short_eq(self.string(id).as_bytes(), text.as_bytes()))
        } else {
            self.string_id(text).and_then(|id| list.position(id))
        }
    }

    /// The string `id` ("" if out of range).
    #[inline]
    fn string(&self, id: u32) -> &str {
        self.strings.get(id as usize).copied().unwrap_or("")
    }

    /// The index of `shader`.
    #[inline]
    fn find_shader(&self, shader: &str) -> Result<usize, LookupError> {
        self.string_id(shader)
            .and_then(|id| self.shader_of.get(id as usize).copied())
            .filter(|&s| s != EMPTY_SLOT)
            .map(|s| s as usize)
            .ok_or_else(|| LookupError::UnknownShader {
                shader: shader.to_owned(),
            })
    }

    /// Shader `s`'s entries, checked and indexed once.
    #[inline]
    fn shader_index(&self, s: usize) -> Result<&ShaderIndex, PackError> {
        match self.shaders.get(s) {
            Some(cell) => cell
                .get_or_init(|| self.index_shader(s))
                .as_ref()
                .map_err(Clone::clone),
            None => Err(PackError::Malformed {
                section: "shaders",
                what: format!("shader {s} out of range"),
            }),
        }
    }

    /// Checks shader `s`'s entries, then indexes them by (pass, keyword mask, target).
    #[cold]
    fn index_shader(&self, s: usize) -> Result<ShaderIndex, PackError> {
        let view = self.view();
        check_shader(view, &self.layout, s)?;
        let rec = view.shader(s);
        let declared = view.ids(rec.declared);
        if declared.len() > MASK_KEYWORDS {
            return Ok(ShaderIndex {
                slots: Box::new([]),
            });
        }
        let (first, count) = (rec.entries.0 as usize, rec.entries.1 as usize);
        let size = (count * 2).next_power_of_two();
        let mut slots = vec![EMPTY_SLOT; size].into_boxed_slice();
        let mask = size - 1;
        for e in first..first + count {
            let entry = view.entry(e);
            let keywords = view.ids(entry.keywords).iter().fold(0u64, |m, id| {
                // Checked: every keyword of the entry is declared.
                m | declared.position(id).map_or(0, |p| 1 << p)
            });
            let mut slot = entry_hash(entry.pass, keywords, entry.target) & mask;
            while slots.get(slot).is_some_and(|&i| i != EMPTY_SLOT) {
                slot = (slot + 1) & mask;
            }
            if let Some(i) = slots.get_mut(slot) {
                *i = (e - first) as u32;
            }
        }
        Ok(ShaderIndex { slots })
    }

    /// The bytes of artifact `index`, checked once.
    #[inline]
    fn artifact(&self, index: u32) -> Result<&[u8], PackError> {
        let view = self.view();
        match self
            .artifacts
            .get(index as usize)
            .map(|state| state.load(AtomicOrdering::Acquire))
        {
            Some(GOOD) => Ok(view.artifact_span(index as usize)),
            _ => self.artifact_slow(index),
        }
    }

    #[cold]
    fn artifact_slow(&self, index: u32) -> Result<&[u8], PackError> {
        let result = check_artifact(self.view(), index as usize);
        if let Some(state) = self.artifacts.get(index as usize) {
            let checked = if result.is_ok() { GOOD } else { DAMAGED };
            state.store(checked, AtomicOrdering::Release);
        }
        result
    }

    /// Entry `entry`'s variant; its shader must have been checked.
    fn variant(&self, entry: usize) -> Result<Variant<'_>, LookupError> {
        let view = self.view();
        let rec: EntryRec = view.entry(entry);
        let keywords = Keywords {
            index: view.string_index,
            bytes: view.string_bytes,
            ids: view.ids(rec.keywords),
        };
        let shader = self.string(rec.shader);
        let pass = self.string(rec.pass);
        let target = self.string(rec.target);
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

    #[cold]
    fn unknown_target(&self, target: &str) -> LookupError {
        LookupError::UnknownTarget {
            target: target.to_owned(),
            targets: self.targets().map(str::to_owned).collect(),
        }
    }
}

#[cold]
fn unknown_pass(view: &View<'_>, passes: IdList<'_>, shader: &str, pass: &str) -> LookupError {
    LookupError::UnknownPass {
        shader: shader.to_owned(),
        pass: pass.to_owned(),
        passes: passes.iter().map(|id| view.string(id).to_owned()).collect(),
    }
}

#[cold]
fn unknown_keyword(
    view: &View<'_>,
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
    index: &'a [u32],
    bytes: &'a [u8],
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
        let (index, bytes) = (self.index, self.bytes);
        self.ids.iter().map(move |id| {
            std::str::from_utf8(crate::pack::read::string_bytes(index, bytes, id)).unwrap_or("")
        })
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

/// The variants of one shader ([`Library::variants`]); an item is an error only when the
/// shader's entries or its artifact are damaged.
pub struct Variants<'a> {
    library: &'a Library,
    shader: usize,
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
        if let Err(source) = self.library.shader_index(self.shader) {
            let view = self.library.view();
            let name = view.string(view.shader_name(self.shader));
            return Some(Err(LookupError::CorruptArtifact {
                variant: format!("the variants of `{name}`"),
                source,
            }));
        }
        Some(self.library.variant(entry))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Variants<'_> {}
