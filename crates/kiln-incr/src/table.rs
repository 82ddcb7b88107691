//! Storage whose slots never move: a paged vector for keys (and the registries), with an
//! open-addressing index from key to dense `u32` slot index that readers probe without
//! taking any lock (the key interners); and pages by dense id for memos and inputs.
//!
//! Slots are only ever added (under one insert lock per table) and are dropped with the
//! table, so a `&T` handed out under `&self` stays valid until the next `&mut self`.
//! Index tables replaced by a resize are retired, not freed, until `&mut self`
//! ([`KeyTable::release_retired`]), because a reader may still be probing the old one.

use std::alloc::{self, Layout};
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;
use rustc_hash::FxHasher;

/// log2 of the first page's length.
const FIRST_PAGE_BITS: u32 = 5;
/// log2 of the largest page's length: pages double up to it, then stay that size, so a
/// large table wastes at most one page (not half of itself).
const PAGE_BITS: u32 = 12;
/// Number of doubling pages (32, 64, ..., 4096 slots).
const GROWING_PAGES: usize = (PAGE_BITS - FIRST_PAGE_BITS + 1) as usize;
/// Slots held by the doubling pages.
const GROWING_SLOTS: u32 = (1 << (PAGE_BITS + 1)) - (1 << FIRST_PAGE_BITS);
/// log2 of the number of full-size pages one directory block points to (a block is 8 KiB
/// of pointers, allocated when the first slot past the doubling pages is, and the list of
/// blocks another 8 KiB, allocated with the table).
const BLOCK_BITS: u32 = 10;
/// Directory blocks: enough full-size pages to address every `u32` index.
const BLOCKS: usize = 1 << (32 - PAGE_BITS - BLOCK_BITS);

/// Where slot `index` lives: only [`locate`] makes one, so its page and block numbers are
/// in range (the page lookups index without bounds checks).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Location {
    /// In doubling page `page` (length `FIRST_PAGE << page`).
    Growing { page: usize, offset: usize },
    /// In full-size page `page` of directory block `block`.
    Paged {
        block: usize,
        page: usize,
        offset: usize,
    },
}

/// A key id with its [`Location`]. [`Pages`] and [`DensePages`] share one geometry, so the
/// location found while looking a key up in its interner also addresses that key's memo
/// and LRU stamp: the hit path derives it once (see [`Interner::id_located`]). Made only
/// in this module, from `locate(index)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    pub(crate) index: u32,
    location: Location,
}

impl Located {
    #[inline]
    fn new(index: u32, location: Location) -> Self {
        debug_assert_eq!(locate(index), location);
        Located { index, location }
    }
}

#[inline]
fn locate(index: u32) -> Location {
    if index < GROWING_SLOTS {
        let biased = index + (1 << FIRST_PAGE_BITS);
        let top_bit = 31 - biased.leading_zeros();
        Location::Growing {
            page: (top_bit - FIRST_PAGE_BITS) as usize,
            offset: (biased - (1 << top_bit)) as usize,
        }
    } else {
        let rest = index - GROWING_SLOTS;
        let page = rest >> PAGE_BITS;
        Location::Paged {
            block: (page >> BLOCK_BITS) as usize,
            page: (page & ((1 << BLOCK_BITS) - 1)) as usize,
            offset: (rest & ((1 << PAGE_BITS) - 1)) as usize,
        }
    }
}

fn growing_page_len(page: usize) -> usize {
    1usize << (FIRST_PAGE_BITS as usize + page)
}

const FULL_PAGE_LEN: usize = 1 << PAGE_BITS;

/// Pointers to the full-size pages of one directory block.
type Block<T> = [AtomicPtr<T>; 1 << BLOCK_BITS];

/// A vector whose elements never move once pushed. Readers index it through `&self`
/// without locks; pushes must be serialized by the caller.
pub(crate) struct Pages<T> {
    growing: [AtomicPtr<T>; GROWING_PAGES],
    blocks: Box<[AtomicPtr<Block<T>>]>,
    /// Number of initialized slots; every index below it is readable.
    len: AtomicU32,
    _owns: PhantomData<T>,
}

// SAFETY: `Pages` owns its `T`s (like `Vec<T>`); shared access hands out `&T` only.
unsafe impl<T: Send> Send for Pages<T> {}
// SAFETY: `&Pages<T>` gives out `&T` to many threads, and pushes (serialized by the owner's
// lock) move `T`s in from another thread.
unsafe impl<T: Send + Sync> Sync for Pages<T> {}

impl<T> Pages<T> {
    pub(crate) fn new() -> Self {
        Pages {
            growing: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            blocks: (0..BLOCKS)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            len: AtomicU32::new(0),
            _owns: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> u32 {
        self.len.load(Ordering::Acquire)
    }

    /// Address of slot `index`, which must be below `len` (or being pushed).
    #[inline]
    fn address(&self, index: u32) -> *mut T {
        self.address_at(locate(index))
    }

    /// Address of the slot at `location`, whose index must be below `len`.
    #[inline]
    fn address_at(&self, location: Location) -> *mut T {
        match location {
            Location::Growing { page, offset } => {
                // SAFETY: `locate` gives `page < GROWING_PAGES`.
                let base = unsafe { self.growing.get_unchecked(page) }.load(Ordering::Acquire);
                // SAFETY (for callers): the page exists because a slot in it was pushed.
                base.wrapping_add(offset)
            }
            Location::Paged {
                block,
                page,
                offset,
            } => {
                // SAFETY: `locate` gives `block < BLOCKS` (the length of `blocks`).
                let directory = unsafe { self.blocks.get_unchecked(block) }.load(Ordering::Acquire);
                // SAFETY: the block exists because a slot in it was pushed, and `locate`
                // gives `page < 1 << BLOCK_BITS`.
                let base = unsafe { (*directory).get_unchecked(page) }.load(Ordering::Acquire);
                base.wrapping_add(offset)
            }
        }
    }

    /// The slot at `index`, if it has been pushed.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&T> {
        if index >= self.len.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: `index < len` and `len` is published (Release) after the slot was written
        // and its page allocated; slots are never moved or dropped before `self` is.
        Some(unsafe { &*self.address(index) })
    }

    /// A raw pointer to the slot at `index`, if it has been pushed. It stays valid (the
    /// slot never moves) until `self` is dropped, and being derived from the page's own
    /// pointer, it is not invalidated by a later [`Pages::get_mut`].
    #[inline]
    pub(crate) fn get_ptr(&self, index: u32) -> Option<*mut T> {
        if index >= self.len.load(Ordering::Acquire) {
            return None;
        }
        Some(self.address(index))
    }

    /// Mutable access to the slot at `index`; `&mut self` excludes every reader.
    pub(crate) fn get_mut(&mut self, index: u32) -> Option<&mut T> {
        if index >= *self.len.get_mut() {
            return None;
        }
        // SAFETY: as in `get`, and `&mut self` guarantees exclusive access.
        Some(unsafe { &mut *self.address(index) })
    }

    /// Appends `value`, returning its index.
    ///
    /// # Safety
    /// Calls to `push` must not run concurrently with each other (the owner serializes them
    /// with a lock). Concurrent `get`s are fine.
    pub(crate) unsafe fn push(&self, value: T) -> u32 {
        let index = self.len.load(Ordering::Relaxed);
        assert!(
            index < u32::MAX,
            "kiln-incr: more than u32::MAX keys in one query"
        );
        let slot = match locate(index) {
            Location::Growing { page, offset } => {
                let mut base = self.growing[page].load(Ordering::Acquire);
                if base.is_null() {
                    base = allocate_array::<T>(growing_page_len(page));
                    self.growing[page].store(base, Ordering::Release);
                }
                base.wrapping_add(offset)
            }
            Location::Paged {
                block,
                page,
                offset,
            } => {
                let mut directory = self.blocks[block].load(Ordering::Acquire);
                if directory.is_null() {
                    directory = Box::into_raw(Box::new(std::array::from_fn(|_| {
                        AtomicPtr::new(ptr::null_mut())
                    })));
                    self.blocks[block].store(directory, Ordering::Release);
                }
                // SAFETY: the block was allocated above or by an earlier push.
                let entry = &unsafe { &*directory }[page];
                let mut base = entry.load(Ordering::Acquire);
                if base.is_null() {
                    base = allocate_array::<T>(FULL_PAGE_LEN);
                    entry.store(base, Ordering::Release);
                }
                base.wrapping_add(offset)
            }
        };
        // SAFETY: the slot is inside its page, not yet initialized, and no reader looks at
        // it before `len` is published below.
        unsafe { slot.write(value) };
        self.len.store(index + 1, Ordering::Release);
        index
    }
}

fn array_layout<T>(len: usize) -> Layout {
    Layout::array::<T>(len).unwrap_or_else(|_| alloc::handle_alloc_error(Layout::new::<T>()))
}

/// Allocates room for `len` values of `T` (uninitialized); aborts like `Vec` when the
/// allocator fails. Shared with `memo.rs`'s edge lists.
pub(crate) fn allocate_array<T>(len: usize) -> *mut T {
    let layout = array_layout::<T>(len);
    if layout.size() == 0 {
        return ptr::NonNull::<T>::dangling().as_ptr();
    }
    // SAFETY: the layout has a non-zero size.
    let base = unsafe { alloc::alloc(layout) }.cast::<T>();
    if base.is_null() {
        alloc::handle_alloc_error(layout);
    }
    base
}

/// Frees what [`allocate_array`] returned for the same `len`.
pub(crate) fn free_array<T>(base: *mut T, len: usize) {
    let layout = array_layout::<T>(len);
    if !base.is_null() && layout.size() != 0 {
        // SAFETY: allocated by `allocate_array` with this same layout.
        unsafe { alloc::dealloc(base.cast(), layout) };
    }
}

impl<T> Drop for Pages<T> {
    fn drop(&mut self) {
        let len = *self.len.get_mut();
        for index in 0..len {
            // SAFETY: every index below `len` was initialized exactly once.
            unsafe { ptr::drop_in_place(self.address(index)) };
        }
        for (page, base) in self.growing.iter_mut().enumerate() {
            free_array(*base.get_mut(), growing_page_len(page));
        }
        for directory in self.blocks.iter_mut() {
            let directory = *directory.get_mut();
            if directory.is_null() {
                continue;
            }
            // SAFETY: created by `Box::into_raw` in `push`, freed only here.
            let mut directory = unsafe { Box::from_raw(directory) };
            for base in directory.iter_mut() {
                free_array(*base.get_mut(), FULL_PAGE_LEN);
            }
        }
    }
}

/// A vector indexed by a dense id whose slots never move, for ids handed out elsewhere (a
/// shared [`Interner`]): a page is allocated, with every slot `T::default()`, the first
/// time an id in it is asked for, by whichever thread asks (one compare-and-swap; a loser
/// drops its page). Readers index it through `&self` without locks. Pages double from 32
/// slots up to 4096, then stay that size, as in [`Pages`]: an id space used densely wastes
/// at most the rest of one page; one used sparsely pays a page per id range touched.
pub(crate) struct DensePages<T> {
    growing: [AtomicPtr<T>; GROWING_PAGES],
    blocks: Box<[AtomicPtr<Block<T>>]>,
    _owns: PhantomData<T>,
}

// SAFETY: as for `Pages`: it owns its `T`s and hands out `&T` under `&self`.
unsafe impl<T: Send> Send for DensePages<T> {}
// SAFETY: as for `Pages`; pages made on one thread are read on others.
unsafe impl<T: Send + Sync> Sync for DensePages<T> {}

impl<T: Default> DensePages<T> {
    pub(crate) fn new() -> Self {
        DensePages {
            growing: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            blocks: (0..BLOCKS)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            _owns: PhantomData,
        }
    }

    /// Address of slot `index` if its page exists.
    #[inline]
    fn address(&self, index: u32) -> Option<*mut T> {
        self.address_at(locate(index))
    }

    /// Address of the slot at `location` if its page exists.
    #[inline]
    fn address_at(&self, location: Location) -> Option<*mut T> {
        let (base, offset) = match location {
            Location::Growing { page, offset } => {
                // SAFETY: `locate` gives `page < GROWING_PAGES`.
                let base = unsafe { self.growing.get_unchecked(page) }.load(Ordering::Acquire);
                (base, offset)
            }
            Location::Paged {
                block,
                page,
                offset,
            } => {
                // SAFETY: `locate` gives `block < BLOCKS` (the length of `blocks`).
                let directory = unsafe { self.blocks.get_unchecked(block) }.load(Ordering::Acquire);
                if directory.is_null() {
                    return None;
                }
                // SAFETY: a published block stays allocated until `self` is dropped, and
                // `locate` gives `page < 1 << BLOCK_BITS`.
                let base = unsafe { (*directory).get_unchecked(page) }.load(Ordering::Acquire);
                (base, offset)
            }
        };
        (!base.is_null()).then(|| base.wrapping_add(offset))
    }

    /// The slot at `index`, if its page was made.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&T> {
        // SAFETY: a published page is fully initialized (Release/Acquire on its pointer)
        // and neither moved nor freed before `self` is dropped.
        self.address(index).map(|slot| unsafe { &*slot })
    }

    /// The slot at `index`, making its page if needed.
    #[inline]
    pub(crate) fn get_or_make(&self, index: u32) -> &T {
        match self.get(index) {
            Some(slot) => slot,
            None => self.make(index),
        }
    }

    /// [`DensePages::get`] for an id already located.
    #[inline]
    pub(crate) fn get_at(&self, at: Located) -> Option<&T> {
        // SAFETY: as in `get`.
        self.address_at(at.location).map(|slot| unsafe { &*slot })
    }

    /// [`DensePages::get_or_make`] for an id already located.
    #[inline]
    pub(crate) fn get_or_make_at(&self, at: Located) -> &T {
        match self.get_at(at) {
            Some(slot) => slot,
            None => self.make(at.index),
        }
    }

    #[cold]
    #[inline(never)]
    fn make(&self, index: u32) -> &T {
        let (entry, len, offset) = match locate(index) {
            Location::Growing { page, offset } => {
                (&self.growing[page], growing_page_len(page), offset)
            }
            Location::Paged {
                block,
                page,
                offset,
            } => {
                let directory = install(
                    &self.blocks[block],
                    1,
                    |_| {
                        Box::into_raw(Box::new(std::array::from_fn(|_| {
                            AtomicPtr::new(ptr::null_mut())
                        })))
                    },
                    |directory, _| {
                        // SAFETY: made just above by `Box::into_raw`, never published.
                        drop(unsafe { Box::from_raw(directory) });
                    },
                );
                // SAFETY: a published block stays allocated until `self` is dropped.
                (&unsafe { &*directory }[page], FULL_PAGE_LEN, offset)
            }
        };
        let base = install(entry, len, new_page::<T>, free_page::<T>);
        // SAFETY: as in `get`.
        unsafe { &*base.wrapping_add(offset) }
    }

    /// Mutable access to the slot at `index`, if its page was made.
    pub(crate) fn get_mut(&mut self, index: u32) -> Option<&mut T> {
        // SAFETY: as in `get`, and `&mut self` excludes every other access.
        self.address(index).map(|slot| unsafe { &mut *slot })
    }

    /// Calls `visit` with the index and slot of every slot of every page made, in order.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(u32, &T)) {
        self.for_each_page(|first, base, len| {
            for offset in 0..len {
                // SAFETY: as in `get`.
                visit(first + offset as u32, unsafe { &*base.add(offset) });
            }
        });
    }

    /// Calls `visit` with the index and slot of every slot of every page made, mutably.
    pub(crate) fn for_each_mut(&mut self, mut visit: impl FnMut(u32, &mut T)) {
        self.for_each_page(|first, base, len| {
            for offset in 0..len {
                // SAFETY: as in `get_mut`.
                visit(first + offset as u32, unsafe { &mut *base.add(offset) });
            }
        });
    }

    /// Every page made: its first index, base and length.
    fn for_each_page(&self, mut visit: impl FnMut(u32, *mut T, usize)) {
        let mut first = 0u32;
        for (page, base) in self.growing.iter().enumerate() {
            let base = base.load(Ordering::Acquire);
            if !base.is_null() {
                visit(first, base, growing_page_len(page));
            }
            first += growing_page_len(page) as u32;
        }
        for (block, directory) in self.blocks.iter().enumerate() {
            let directory = directory.load(Ordering::Acquire);
            if directory.is_null() {
                continue;
            }
            // SAFETY: a published block stays allocated until `self` is dropped.
            for (page, base) in unsafe { &*directory }.iter().enumerate() {
                let base = base.load(Ordering::Acquire);
                if !base.is_null() {
                    let pages_before = (block << BLOCK_BITS) + page;
                    let first = GROWING_SLOTS as usize + pages_before * FULL_PAGE_LEN;
                    visit(first as u32, base, FULL_PAGE_LEN);
                }
            }
        }
    }
}

impl<T> Drop for DensePages<T> {
    fn drop(&mut self) {
        for (page, base) in self.growing.iter_mut().enumerate() {
            free_page(*base.get_mut(), growing_page_len(page));
        }
        for directory in self.blocks.iter_mut() {
            let directory = *directory.get_mut();
            if directory.is_null() {
                continue;
            }
            // SAFETY: made by `Box::into_raw` in `make`, freed only here.
            let mut directory = unsafe { Box::from_raw(directory) };
            for base in directory.iter_mut() {
                free_page(*base.get_mut(), FULL_PAGE_LEN);
            }
        }
    }
}

/// Publishes `make(len)` in `entry` unless another thread published first (then `discard`s
/// it); returns what `entry` holds.
fn install<P>(
    entry: &AtomicPtr<P>,
    len: usize,
    make: impl FnOnce(usize) -> *mut P,
    discard: impl FnOnce(*mut P, usize),
) -> *mut P {
    let current = entry.load(Ordering::Acquire);
    if !current.is_null() {
        return current;
    }
    let made = make(len);
    match entry.compare_exchange(ptr::null_mut(), made, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => made,
        Err(winner) => {
            discard(made, len);
            winner
        }
    }
}

/// A page of `len` default slots.
fn new_page<T: Default>(len: usize) -> *mut T {
    let base = allocate_array::<T>(len);
    for offset in 0..len {
        // SAFETY: inside the allocation, not yet initialized.
        unsafe { base.add(offset).write(T::default()) };
    }
    base
}

/// Drops the slots of a page made by [`new_page`] and frees it (null: nothing).
fn free_page<T>(base: *mut T, len: usize) {
    if base.is_null() {
        return;
    }
    for offset in 0..len {
        // SAFETY: every slot of a made page is initialized, and dropped once, here.
        unsafe { ptr::drop_in_place(base.add(offset)) };
    }
    free_array(base, len);
}

/// A key of an [`Interner`].
pub(crate) struct KeySlot<K>(pub(crate) K);

impl<K: Eq + Hash> Keyed for KeySlot<K> {
    type Key = K;
    fn key(&self) -> &K {
        &self.0
    }
}

/// Dense ids for the keys of one key type, shared by every query and input keyed by it, so
/// that a key is stored and indexed once however many queries read it; each query keeps its
/// memos in [`DensePages`] by that id.
pub(crate) type Interner<K> = KeyTable<KeySlot<K>>;

impl<K: Eq + Hash + Clone> Interner<K> {
    /// The id of `key`, interning it.
    #[inline(always)]
    pub(crate) fn id(&self, key: &K) -> u32 {
        self.intern(key, |_| KeySlot(key.clone())).0
    }

    /// The id of `key` and its location (the same in every [`DensePages`] by this id),
    /// interning it: the hit path's lookup, which locates the id once for the key
    /// compare, the memo and the LRU stamp.
    #[inline(always)]
    pub(crate) fn id_located(&self, key: &K) -> Located {
        let hash = Self::hash(key);
        match self.lookup_located(key, hash) {
            Some((id, location, _)) => Located::new(id, location),
            None => {
                let id = self.insert_slow(key, hash, |_| KeySlot(key.clone())).0;
                Located::new(id, locate(id))
            }
        }
    }

    /// The id of `key`, if interned.
    pub(crate) fn find(&self, key: &K) -> Option<u32> {
        self.lookup(key, Self::hash(key)).map(|(id, _)| id)
    }

    /// The key with id `id`.
    #[inline]
    pub(crate) fn key(&self, id: u32) -> Option<&K> {
        self.get(id).map(|slot| &slot.0)
    }
}

/// A slot that knows its own key, so the index needs to store only slot numbers.
pub(crate) trait Keyed {
    /// The key type.
    type Key: Eq + Hash;
    /// The slot's key.
    fn key(&self) -> &Self::Key;
}

/// Hashes keys for the index. A key that hashes as a single integer (`u32`, `u64`, a
/// newtype around one, ...) hashes to that integer itself, so that the index can place
/// sequential keys in adjacent entries (see [`IndexTable`]); any other key gets FxHash.
#[derive(Default)]
pub(crate) struct KeyHasher {
    mixed: FxHasher,
    first: u64,
    /// Integer writes seen; `MANY` once anything else was written.
    writes: u32,
}

impl KeyHasher {
    const MANY: u32 = 2;

    #[inline]
    fn integer(&mut self, value: u64) {
        if self.writes == 0 {
            self.first = value;
        }
        self.writes += 1;
        self.mixed.write_u64(value);
    }
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.writes = Self::MANY;
        self.mixed.write(bytes);
    }
    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.integer(u64::from(value));
    }
    #[inline]
    fn write_u16(&mut self, value: u16) {
        self.integer(u64::from(value));
    }
    #[inline]
    fn write_u32(&mut self, value: u32) {
        self.integer(u64::from(value));
    }
    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.integer(value);
    }
    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.integer(value as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        if self.writes == 1 {
            self.first
        } else {
            self.mixed.finish()
        }
    }
}

/// Longest probe (entries past a key's home) an insert may need before an order-keeping
/// index is rebuilt spread; far beyond what hashed keys meet at half load.
const MAX_DISPLACEMENT: u32 = 48;

/// Open-addressing table of `slot index + 1` (0 = empty), at most half full.
///
/// It starts *order-keeping*: a key's home is its hash's low bits, so integer keys (which
/// hash to themselves, [`KeyHasher`]) that are sequential, as dense ids usually are, sit in
/// adjacent entries and a scan over them walks the index linearly instead of missing the
/// cache once per key. Keys whose low bits collide (strides of a power of two, ids with tag
/// bits) would pile up there, so inserts measure how far they probe, and an index whose
/// keys are displaced too far (one insert beyond [`MAX_DISPLACEMENT`], or twice the entry
/// count in total) is rebuilt *spread*, placing keys by a multiplicative hash, for good.
struct IndexTable {
    mask: usize,
    /// `64 - log2(capacity)`: how far a spread position is shifted down.
    shift: u32,
    spread: bool,
    /// Sum of the displacements of the entries inserted (for the total bound); written
    /// only under the table's insert lock, atomic because readers share the table.
    displacement: AtomicU64,
    entries: Box<[AtomicU32]>,
}

impl IndexTable {
    fn with_capacity(capacity: usize, spread: bool) -> Box<IndexTable> {
        Box::new(IndexTable {
            mask: capacity - 1,
            shift: 64 - capacity.trailing_zeros(),
            spread,
            displacement: AtomicU64::new(0),
            entries: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// Where probing for `hash` starts.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        if self.spread {
            (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
        } else {
            hash as usize & self.mask
        }
    }

    /// Inserts `index`; returns how many entries past its home it landed.
    /// Callers serialize inserts (the table's insert lock, or a table not yet published).
    fn insert(&self, hash: u64, index: u32) -> u32 {
        let mut position = self.home(hash);
        let mut displacement = 0;
        while self.entries[position].load(Ordering::Relaxed) != 0 {
            position = (position + 1) & self.mask;
            displacement += 1;
        }
        self.entries[position].store(index + 1, Ordering::Release);
        self.displacement
            .fetch_add(u64::from(displacement), Ordering::Relaxed);
        displacement
    }

    /// Whether an order-keeping table's keys pile up enough to be rebuilt spread.
    fn clustered(&self, last_displacement: u32, entries: usize) -> bool {
        !self.spread
            && (last_displacement > MAX_DISPLACEMENT
                || self.displacement.load(Ordering::Relaxed)
                    > 2 * entries as u64 + u64::from(MAX_DISPLACEMENT))
    }
}

struct InsertState {
    /// The table readers currently probe (also published in `KeyTable::index`).
    current: Box<IndexTable>,
    /// Tables replaced by a resize, kept alive for readers still probing them. Boxed
    /// because readers hold pointers to the `IndexTable` itself, which must not move.
    #[allow(clippy::vec_box)]
    retired: Vec<Box<IndexTable>>,
}

/// Slots of type `S` addressed by key (interning: key -> dense `u32`) and by index.
pub(crate) struct KeyTable<S: Keyed> {
    slots: Pages<S>,
    index: AtomicPtr<IndexTable>,
    insert: Mutex<InsertState>,
}

impl<S: Keyed> KeyTable<S> {
    pub(crate) fn new() -> Self {
        let mut current = IndexTable::with_capacity(16, false);
        let index = AtomicPtr::new(&mut *current as *mut IndexTable);
        KeyTable {
            slots: Pages::new(),
            index,
            insert: Mutex::new(InsertState {
                current,
                retired: Vec::new(),
            }),
        }
    }

    #[inline]
    pub(crate) fn hash(key: &S::Key) -> u64 {
        let mut hasher = KeyHasher::default();
        key.hash(&mut hasher);
        hasher.finish()
    }

    /// Number of slots.
    #[cfg(test)]
    pub(crate) fn len(&self) -> u32 {
        self.slots.len()
    }

    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&S> {
        self.slots.get(index)
    }

    pub(crate) fn get_mut(&mut self, index: u32) -> Option<&mut S> {
        self.slots.get_mut(index)
    }

    /// A raw pointer to the slot at `index` (see [`Pages::get_ptr`]).
    pub(crate) fn get_ptr(&self, index: u32) -> Option<*mut S> {
        self.slots.get_ptr(index)
    }

    /// The index and slot of `key`, if interned. Lock-free.
    #[inline]
    pub(crate) fn lookup(&self, key: &S::Key, hash: u64) -> Option<(u32, &S)> {
        self.lookup_located(key, hash)
            .map(|(index, _, slot)| (index, slot))
    }

    /// [`KeyTable::lookup`], also giving the slot's location.
    #[inline]
    fn lookup_located(&self, key: &S::Key, hash: u64) -> Option<(u32, Location, &S)> {
        // SAFETY: the published table is never freed while `&self` lives (retired tables
        // are freed only through `&mut self`).
        let table = unsafe { &*self.index.load(Ordering::Acquire) };
        let mut position = table.home(hash);
        loop {
            let entry = table.entries[position].load(Ordering::Acquire);
            if entry == 0 {
                return None;
            }
            let index = entry - 1;
            let location = locate(index);
            // SAFETY: an entry becomes visible (its own Release store in `insert_slow`, or
            // the Release publication of a table made by `rebuild`) only after its slot was
            // pushed, and we loaded both the table and the entry with Acquire: the slot and
            // its page are visible (no `len` check needed), and never move or drop under
            // `&self`.
            let slot = unsafe { &*self.slots.address_at(location) };
            if slot.key() == key {
                return Some((index, location, slot));
            }
            position = (position + 1) & table.mask;
        }
    }

    /// The index and slot of `key`, creating the slot with `make` when absent. Always
    /// inlined: it is the hit path's key lookup (a call costs a quarter of a hit).
    #[inline(always)]
    pub(crate) fn intern(&self, key: &S::Key, make: impl FnOnce(u32) -> S) -> (u32, &S) {
        let hash = Self::hash(key);
        match self.lookup(key, hash) {
            Some(found) => found,
            None => self.insert_slow(key, hash, make),
        }
    }

    #[cold]
    fn insert_slow(&self, key: &S::Key, hash: u64, make: impl FnOnce(u32) -> S) -> (u32, &S) {
        let mut state = self.insert.lock();
        if let Some(found) = self.lookup(key, hash) {
            return found;
        }
        let slot = make(self.slots.len());
        // SAFETY: pushes happen only here, under `self.insert`.
        let index = unsafe { self.slots.push(slot) };
        let entries = index as usize + 1;
        let capacity = state.current.entries.len();
        if entries * 2 > capacity {
            let grown = self.rebuild(capacity * 2, state.current.spread, entries);
            self.publish(&mut state, grown);
        } else {
            let displacement = state.current.insert(hash, index);
            if state.current.clustered(displacement, entries) {
                let spread = self.rebuild(capacity, true, entries);
                self.publish(&mut state, spread);
            }
        }
        match self.slots.get(index) {
            Some(slot) => (index, slot),
            None => crate::ingredient::invariant_broken("a pushed slot is missing"),
        }
    }

    /// A new index of `capacity` over the first `entries` slots (spread if asked, or if an
    /// order-keeping one turns out clustered).
    fn rebuild(&self, capacity: usize, spread: bool, entries: usize) -> Box<IndexTable> {
        let build = |spread| {
            let table = IndexTable::with_capacity(capacity, spread);
            let mut clustered = false;
            for existing in 0..entries as u32 {
                if let Some(slot) = self.slots.get(existing) {
                    let displacement = table.insert(Self::hash(slot.key()), existing);
                    if table.clustered(displacement, entries) {
                        clustered = true;
                        break;
                    }
                }
            }
            (table, clustered)
        };
        match build(spread) {
            (table, false) => table,
            (_, true) => build(true).0,
        }
    }

    /// Makes `table` the one readers probe, retiring the old one.
    fn publish(&self, state: &mut InsertState, mut table: Box<IndexTable>) {
        self.index
            .store(&mut *table as *mut IndexTable, Ordering::Release);
        let old = std::mem::replace(&mut state.current, table);
        state.retired.push(old);
    }

    /// Frees index tables replaced by resizes; nobody can be probing them under `&mut`.
    pub(crate) fn release_retired(&mut self) {
        self.insert.get_mut().retired.clear();
    }

    /// [`KeyTable::release_retired`] for a table shared through an `Arc`.
    ///
    /// # Safety
    /// Nobody probes the table meanwhile: the caller holds `&mut` to everything that can
    /// reach it (the shared interners of a database, under `&mut Database`).
    pub(crate) unsafe fn release_retired_shared(&self) {
        self.insert.lock().retired.clear();
    }

    /// Every slot, mutably (for boundary work such as eviction).
    pub(crate) fn for_each_mut(&mut self, mut visit: impl FnMut(u32, &mut S)) {
        let len = self.slots.len();
        for index in 0..len {
            if let Some(slot) = self.slots.get_mut(index) {
                visit(index, slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(String);
    impl Keyed for Named {
        type Key = String;
        fn key(&self) -> &String {
            &self.0
        }
    }

    #[test]
    fn dense_pages_make_one_page_per_range_and_keep_slots() {
        let mut pages = DensePages::<AtomicU32>::new();
        assert!(pages.get(5).is_none());
        let far = GROWING_SLOTS + 3 * FULL_PAGE_LEN as u32 + 7;
        pages.get_or_make(5).store(55, Ordering::Relaxed);
        pages.get_or_make(far).store(77, Ordering::Relaxed);
        assert_eq!(
            pages.get(5).map(|slot| slot.load(Ordering::Relaxed)),
            Some(55)
        );
        assert_eq!(
            pages.get(6).map(|slot| slot.load(Ordering::Relaxed)),
            Some(0)
        );
        assert_eq!(
            pages.get(far).map(|slot| slot.load(Ordering::Relaxed)),
            Some(77)
        );
        assert!(pages.get(40).is_none(), "a page nobody asked for was made");
        let mut seen = Vec::new();
        pages.for_each_mut(|index, slot| {
            if *slot.get_mut() != 0 {
                seen.push(index);
            }
        });
        assert_eq!(seen, [5, far]);
        let mut count = 0;
        pages.for_each(|_, _| count += 1);
        assert_eq!(
            count,
            32 + FULL_PAGE_LEN,
            "the first page and one full page"
        );
    }

    #[test]
    fn concurrent_page_making_hands_out_one_slot_per_index() {
        let pages = DensePages::<AtomicU32>::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for index in (0..20_000u32).step_by(3) {
                        pages.get_or_make(index).fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        for index in 0..20_000u32 {
            let want = if index % 3 == 0 { 4 } else { 0 };
            assert_eq!(
                pages.get(index).map(|slot| slot.load(Ordering::Relaxed)),
                Some(want),
                "index {index}"
            );
        }
    }

    #[test]
    fn locate_covers_pages_without_gaps() {
        let growing = |page, offset| Location::Growing { page, offset };
        assert_eq!(locate(0), growing(0, 0));
        assert_eq!(locate(31), growing(0, 31));
        assert_eq!(locate(32), growing(1, 0));
        assert_eq!(locate(95), growing(1, 63));
        assert_eq!(locate(96), growing(2, 0));
        assert_eq!(
            locate(GROWING_SLOTS - 1),
            growing(GROWING_PAGES - 1, FULL_PAGE_LEN - 1)
        );
        let paged = |block, page, offset| Location::Paged {
            block,
            page,
            offset,
        };
        assert_eq!(locate(GROWING_SLOTS), paged(0, 0, 0));
        assert_eq!(locate(GROWING_SLOTS + 4097), paged(0, 1, 1));
        assert!(matches!(locate(u32::MAX), Location::Paged { block, .. } if block == BLOCKS - 1));
    }

    #[test]
    fn pages_beyond_the_growing_ones_keep_values() {
        let table = KeyTable::<Named>::new();
        for n in 0..20_000u32 {
            assert_eq!(table.intern(&n.to_string(), |_| Named(n.to_string())).0, n);
        }
        for n in (0..20_000u32).step_by(997) {
            assert_eq!(
                table.get(n).map(|slot| slot.0.as_str()),
                Some(n.to_string().as_str())
            );
        }
    }

    #[test]
    fn interning_is_stable_across_resizes() {
        let table = KeyTable::<Named>::new();
        let indices: Vec<u32> = (0..5000)
            .map(|n| table.intern(&n.to_string(), |_| Named(n.to_string())).0)
            .collect();
        for (n, index) in indices.iter().enumerate() {
            assert_eq!(*index, n as u32);
            assert_eq!(table.intern(&n.to_string(), |_| unreachable!()).0, *index);
            assert_eq!(
                table.get(*index).map(|slot| slot.0.clone()),
                Some(n.to_string())
            );
        }
        let absent = "absent".to_string();
        assert!(table
            .lookup(&absent, KeyTable::<Named>::hash(&absent))
            .is_none());
    }

    struct Numbered(u64);
    impl Keyed for Numbered {
        type Key = u64;
        fn key(&self) -> &u64 {
            &self.0
        }
    }

    fn current_index(table: &KeyTable<Numbered>) -> (bool, Vec<u32>) {
        let state = table.insert.lock();
        let entries = state
            .current
            .entries
            .iter()
            .map(|entry| entry.load(Ordering::Relaxed))
            .collect();
        (state.current.spread, entries)
    }

    #[test]
    fn integer_keys_hash_to_themselves_and_others_are_mixed() {
        assert_eq!(KeyTable::<Numbered>::hash(&77), 77);
        assert_eq!(KeyTable::<Named>::hash(&"a".to_string()), {
            let mut hasher = FxHasher::default();
            "a".hash(&mut hasher);
            hasher.finish()
        });
        // Two integer writes are not one integer: no identity for tuples.
        let mut pair = KeyHasher::default();
        (1u32, 2u32).hash(&mut pair);
        assert_ne!(pair.finish(), 1);
    }

    #[test]
    fn sequential_integer_keys_sit_in_adjacent_entries() {
        let table = KeyTable::<Numbered>::new();
        for n in 0..10_000u64 {
            assert_eq!(table.intern(&n, |_| Numbered(n)).0, n as u32);
        }
        let (spread, entries) = current_index(&table);
        assert!(!spread);
        for (n, entry) in entries.iter().take(10_000).enumerate() {
            assert_eq!(*entry, n as u32 + 1, "key {n} is not at its own entry");
        }
    }

    #[test]
    fn colliding_integer_keys_switch_the_index_to_spread() {
        let table = KeyTable::<Numbered>::new();
        // Multiples of 2^20 all share their low 20 bits: order-keeping would pile them up.
        let keys: Vec<u64> = (0..5000u64).map(|k| k << 20).collect();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(table.intern(key, |_| Numbered(*key)).0, i as u32);
        }
        let (spread, _) = current_index(&table);
        assert!(spread, "the clustered index was not rebuilt spread");
        let state = table.insert.lock();
        assert!(
            state.current.displacement.load(Ordering::Relaxed) < 2 * keys.len() as u64,
            "spread placement still clusters"
        );
        drop(state);
        for (i, key) in keys.iter().enumerate() {
            let found = table.lookup(key, KeyTable::<Numbered>::hash(key));
            assert_eq!(found.map(|(index, _)| index), Some(i as u32));
        }
        assert!(table.lookup(&3, 3).is_none());
    }

    #[test]
    fn concurrent_interning_through_a_switch_gives_one_index_per_key() {
        let table = KeyTable::<Numbered>::new();
        let keys: Vec<u64> = (0..3000u64).map(|k| (k << 24) | (k & 1)).collect();
        let results: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        keys.iter()
                            .map(|key| table.intern(key, |_| Numbered(*key)).0)
                            .collect::<Vec<u32>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap())
                .collect()
        });
        assert_eq!(table.len(), 3000);
        for other in &results[1..] {
            assert_eq!(other, &results[0]);
        }
        assert!(current_index(&table).0);
    }

    #[test]
    fn concurrent_interning_gives_one_index_per_key() {
        let table = KeyTable::<Named>::new();
        let results: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..2000)
                            .map(|n| table.intern(&n.to_string(), |_| Named(n.to_string())).0)
                            .collect::<Vec<u32>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap())
                .collect()
        });
        assert_eq!(table.len(), 2000);
        for other in &results[1..] {
            assert_eq!(other, &results[0]);
        }
    }
}
