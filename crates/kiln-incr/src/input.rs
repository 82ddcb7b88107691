//! Input storage: values set from outside, read (and recorded as dependencies) by queries.

use std::fmt::Debug;

use crate::active;
use crate::database::Database;
use crate::durability::Durability;
use crate::event::Listener;
use crate::ingredient::Ingredient;
use crate::memo::Edge;
use crate::query::Input;
use crate::revision::Revision;
use crate::sync::Failure;
use crate::table::{DensePages, Interner};
use std::sync::Arc;

/// One input key. Mutated only under `&mut Database`, so plain fields suffice. A fresh
/// slot (`Default`) is a key never set.
pub(crate) struct InputSlot<V> {
    /// `None`: never set, or removed.
    pub(crate) value: Option<V>,
    /// Revision of the last change; `NEVER` for a key that was only ever missing.
    pub(crate) changed_at: Revision,
    /// `Low` while missing: anything may create it.
    pub(crate) durability: Durability,
}

impl<V> Default for InputSlot<V> {
    fn default() -> Self {
        InputSlot {
            value: None,
            changed_at: Revision::NEVER,
            durability: Durability::Low,
        }
    }
}

/// All keys of one [`Input`] type.
pub(crate) struct InputTable<I: Input> {
    pub(crate) id: u32,
    /// Key ids, shared with every query and input keyed by `I::Key`.
    pub(crate) keys: Arc<Interner<I::Key>>,
    /// The values, by key id.
    pub(crate) slots: DensePages<InputSlot<I::Value>>,
}

impl<I: Input> InputTable<I> {
    pub(crate) fn new(id: u32, keys: Arc<Interner<I::Key>>) -> Self {
        InputTable {
            id,
            keys,
            slots: DensePages::new(),
        }
    }

    /// The dense index of `key`, creating a "missing" slot for a key never set, so that a
    /// query reading it depends on it and sees it appear later.
    pub(crate) fn intern(&self, key: &I::Key) -> (u32, &InputSlot<I::Value>) {
        let index = self.keys.id(key);
        (index, self.slots.get_or_make(index))
    }

    /// Reads `key`, recording the read in the executing query of `database`, if any.
    pub(crate) fn read(&self, database: u64, key: &I::Key) -> Option<I::Value> {
        let (index, slot) = self.intern(key);
        active::record_read(
            database,
            Edge {
                query: self.id,
                key: index,
            },
            slot.durability,
            slot.changed_at,
        );
        slot.value.clone()
    }

    /// Reads `key` without recording the read anywhere (see [`crate::Database::input_untracked`]).
    pub(crate) fn read_untracked(&self, key: &I::Key) -> Option<I::Value> {
        let index = self.keys.find(key)?;
        self.slots.get(index)?.value.clone()
    }

    /// Sets `key` to `value` (`None` removes it), starting a new revision through
    /// `new_revision` (given the durability readers recorded). Returns whether anything
    /// changed: an equal value with the same durability is no change and no revision.
    pub(crate) fn write(
        &mut self,
        key: I::Key,
        value: Option<I::Value>,
        durability: Durability,
        new_revision: impl FnOnce(Durability) -> Revision,
    ) -> bool {
        let (index, _) = self.intern(&key);
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        let durability = if value.is_some() {
            durability
        } else {
            Durability::Low
        };
        if slot.value == value && slot.durability == durability {
            return false;
        }
        // Readers recorded the old durability: every level at or below it must look again.
        slot.changed_at = new_revision(slot.durability);
        slot.value = value;
        slot.durability = durability;
        true
    }
}

impl<I: Input, C: Send + Sync + 'static> Ingredient<C> for InputTable<I> {
    fn with_key(&self, key: u32, visit: &mut dyn FnMut(&'static str, &dyn Debug)) {
        if let Some(key) = self.keys.key(key) {
            visit(I::NAME, key);
        }
    }

    fn maybe_changed_after(
        &self,
        _db: &Database<C>,
        key: u32,
        after: Revision,
        _depth: u32,
    ) -> Result<bool, Failure> {
        Ok(self
            .slots
            .get(key)
            .is_none_or(|slot| slot.changed_at > after))
    }

    fn any_changed_after(
        &self,
        _db: &Database<C>,
        edges: &[Edge],
        after: Revision,
        _depth: u32,
    ) -> Result<bool, Failure> {
        Ok(edges.iter().any(|edge| {
            self.slots
                .get(edge.key)
                .is_none_or(|slot| slot.changed_at > after)
        }))
    }

    fn at_boundary(&mut self, _listener: Option<&Listener>, _revision: Revision) {}
}
