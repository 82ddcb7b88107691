//! Append-only storage for memos and inputs: a paged vector whose slots never move, and
//! an open-addressing index from key to dense `u32` slot index that readers probe without
//! taking any lock.
//!
//! Slots are only ever added (under one insert lock per table) and are dropped with the
//! table, so a `&T` handed out under `&self` stays valid until the next `&mut self`.
//! Index tables replaced by a resize are retired, not freed, until `&mut self`
//! ([`KeyTable::release_retired`]), because a reader may still be probing the old one.

use std::alloc::{self, Layout};
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

/// log2 of the first page's length.
const FIRST_PAGE_BITS: u32 = 5;
/// log2 of the largest page's length: pages double up to it, then stay that size, so a
/// large table wastes at most one page (not half of itself).
const PAGE_BITS: u32 = 12;
/// Number of doubling pages (32, 64, ..., 4096 slots).
const GROWING_PAGES: usize = (PAGE_BITS - FIRST_PAGE_BITS + 1) as usize;
/// Slots held by the doubling pages.
const GROWING_SLOTS: u32 = (1 << (PAGE_BITS + 1)) - (1 << FIRST_PAGE_BITS);
/// log2 of the number of full-size pages one directory block points to.
const BLOCK_BITS: u32 = 12;
/// Directory blocks: enough full-size pages to address every `u32` index.
const BLOCKS: usize = 1 << (32 - PAGE_BITS - BLOCK_BITS);

/// Where slot `index` lives.
#[derive(Debug, PartialEq, Eq)]
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
        match locate(index) {
            Location::Growing { page, offset } => {
                let base = self.growing[page].load(Ordering::Acquire);
                // SAFETY (for callers): the page exists because a slot in it was pushed.
                base.wrapping_add(offset)
            }
            Location::Paged {
                block,
                page,
                offset,
            } => {
                let directory = self.blocks[block].load(Ordering::Acquire);
                // SAFETY: the block exists because a slot in it was pushed.
                let base = unsafe { &*directory }[page].load(Ordering::Acquire);
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

fn allocate_array<T>(len: usize) -> *mut T {
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

fn free_array<T>(base: *mut T, len: usize) {
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

/// A slot that knows its own key, so the index needs to store only slot numbers.
pub(crate) trait Keyed {
    /// The key type.
    type Key: Eq + Hash;
    /// The slot's key.
    fn key(&self) -> &Self::Key;
}

/// Open-addressing table of `slot index + 1` (0 = empty), at most half full.
struct IndexTable {
    mask: usize,
    entries: Box<[AtomicU32]>,
}

impl IndexTable {
    fn with_capacity(capacity: usize) -> Box<IndexTable> {
        Box::new(IndexTable {
            mask: capacity - 1,
            entries: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    fn insert(&self, hash: u64, index: u32) {
        let mut position = hash as usize & self.mask;
        while self.entries[position].load(Ordering::Relaxed) != 0 {
            position = (position + 1) & self.mask;
        }
        self.entries[position].store(index + 1, Ordering::Release);
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
        let mut current = IndexTable::with_capacity(16);
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
        FxBuildHasher.hash_one(key)
    }

    /// Number of slots.
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

    /// The index and slot of `key`, if interned. Lock-free.
    #[inline]
    pub(crate) fn lookup(&self, key: &S::Key, hash: u64) -> Option<(u32, &S)> {
        // SAFETY: the published table is never freed while `&self` lives (retired tables
        // are freed only through `&mut self`).
        let table = unsafe { &*self.index.load(Ordering::Acquire) };
        let mut position = hash as usize & table.mask;
        loop {
            let entry = table.entries[position].load(Ordering::Acquire);
            if entry == 0 {
                return None;
            }
            let index = entry - 1;
            if let Some(slot) = self.slots.get(index) {
                if slot.key() == key {
                    return Some((index, slot));
                }
            }
            position = (position + 1) & table.mask;
        }
    }

    /// The index and slot of `key`, creating the slot with `make` when absent.
    #[inline]
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
        if entries * 2 > state.current.entries.len() {
            let mut grown = IndexTable::with_capacity(state.current.entries.len() * 2);
            for existing in 0..index {
                if let Some(slot) = self.slots.get(existing) {
                    grown.insert(Self::hash(slot.key()), existing);
                }
            }
            self.index
                .store(&mut *grown as *mut IndexTable, Ordering::Release);
            let old = std::mem::replace(&mut state.current, grown);
            state.retired.push(old);
        }
        state.current.insert(hash, index);
        match self.slots.get(index) {
            Some(slot) => (index, slot),
            None => crate::ingredient::invariant_broken("a pushed slot is missing"),
        }
    }

    /// Frees index tables replaced by resizes; nobody can be probing them under `&mut`.
    pub(crate) fn release_retired(&mut self) {
        self.insert.get_mut().retired.clear();
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
