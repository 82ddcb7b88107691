//! What one variant's artifacts query takes from its build and gives back besides its memo
//! value: the build's shader revisions in, and how the artifacts were obtained, their bytes,
//! store warnings and compile times out.
//!
//! The engine memoizes a query's value only; what an execution produces for the build that
//! ran it (an artifact's bytes, which must not stay in a memo, or how it was obtained, which
//! belongs to that build alone) comes back to the worker that asked, as salsa's accumulators
//! bring diagnostics back. A worker asks for one variant's artifacts inside [`VariantScope::run`]
//! and the engine executes that query on the thread that asks (nobody else asks for the same
//! variant in a build), so the execution finds the scope on its own thread. Scopes nest: a
//! worker that waits inside a query may run another variant's task, which gets a scope of its
//! own and restores the outer one when it returns.

use super::services::{Outcome, VariantArtifacts};
use crate::identity::Revision;
use crate::pipeline::Diagnostic;
use crate::store::ContentKey;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::Arc;

/// Every shader's source revision in this build, computed before any variant runs, and the
/// 16-hex name the index gives it. A shader whose revision cannot be computed is absent: its
/// variants fail with the reason.
#[derive(Debug, Default)]
pub(crate) struct Revisions(FxHashMap<Arc<str>, ShaderRevision>);

/// One shader's revision and its name in `index.json`.
#[derive(Debug)]
pub(crate) struct ShaderRevision {
    pub revision: Revision,
    /// `revision.short()` as 16 hex digits, one string shared by every entry of the shader.
    pub name: Arc<str>,
}

impl ShaderRevision {
    /// [`crate::identity::input_stamp`] of a variant of this shader.
    pub fn input_stamp(&self, pass: &str, keywords: &[Arc<str>]) -> String {
        crate::identity::input_stamp(&self.revision, pass, keywords.iter().map(|k| &**k))
    }
}

impl Revisions {
    /// From each shader's revision.
    pub fn new(revisions: impl IntoIterator<Item = (Arc<str>, Revision)>) -> Self {
        Self(
            revisions
                .into_iter()
                .map(|(shader, revision)| {
                    let name = Arc::from(format!("{:016x}", revision.short()));
                    (shader, ShaderRevision { revision, name })
                })
                .collect(),
        )
    }

    /// The revision of `shader`, if it could be computed.
    pub fn get(&self, shader: &str) -> Option<&ShaderRevision> {
        self.0.get(shader)
    }

    /// Every shader with its revision.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &ShaderRevision)> {
        self.0.iter()
    }
}

/// What the execution of one variant's artifacts query produced for its build.
#[derive(Default)]
pub(crate) struct Byproducts {
    /// How the artifacts were obtained; `None` when nothing executed (the engine re-verified
    /// the memo).
    pub outcome: Option<Outcome>,
    /// The artifacts' bytes, when the execution had them in hand: the worker writes the
    /// outputs from them without a trip to the variant cache or the store.
    pub fresh: Option<Arc<VariantArtifacts>>,
    /// Store trouble met and repaired on the way.
    pub warnings: Vec<Diagnostic>,
    /// Compile time (µs) of each job compiled, by job key, for the remote cache.
    pub costs: Vec<(ContentKey, u64)>,
    /// Time spent compiling for the variant, µs, for the build's history (one sum, with or
    /// without a remote cache).
    pub compile_us: u64,
    /// The variant's preprocessing re-executed on the way (see
    /// [`super::events::EventCounts`]); with no `outcome`, the variant was cut off early.
    pub inputs_reran: bool,
}

/// The scope a worker runs one variant's artifacts query in.
pub(crate) struct VariantScope {
    revisions: Arc<Revisions>,
    byproducts: Byproducts,
}

thread_local! {
    static CURRENT: RefCell<Option<VariantScope>> = const { RefCell::new(None) };
}

impl VariantScope {
    /// Runs `work` (which asks the engine for one variant's artifacts) with this build's
    /// `revisions`; returns its result and what the query's execution produced.
    pub fn run<R>(revisions: &Arc<Revisions>, work: impl FnOnce() -> R) -> (R, Byproducts) {
        let scope = VariantScope {
            revisions: Arc::clone(revisions),
            byproducts: Byproducts::default(),
        };
        let outer = CURRENT.with(|current| current.replace(Some(scope)));
        // Restores the outer scope when `work` unwinds; on return, `take` restores it and
        // hands back this scope, after which the guard does nothing.
        struct Restore(Option<Option<VariantScope>>);
        impl Restore {
            fn take(&mut self) -> Option<VariantScope> {
                let outer = self.0.take()?;
                CURRENT.with(|current| current.replace(outer))
            }
        }
        impl Drop for Restore {
            fn drop(&mut self) {
                self.take();
            }
        }
        let mut restore = Restore(Some(outer));
        let result = work();
        let mine = restore.take();
        let made = mine.map(|scope| scope.byproducts).unwrap_or_default();
        (result, made)
    }

    /// The revision of `shader` in the build of the variant running on this thread; `None`
    /// outside a variant's scope.
    pub fn revision(shader: &str) -> Option<Revision> {
        CURRENT.with(|current| {
            let current = current.borrow();
            Some(current.as_ref()?.revisions.get(shader)?.revision)
        })
    }

    /// Records something the running execution produced; dropped outside a variant's scope
    /// (nobody asked for it: the build reads what it needs again).
    pub fn record(add: impl FnOnce(&mut Byproducts)) {
        CURRENT.with(|current| {
            if let Some(scope) = current.borrow_mut().as_mut() {
                add(&mut scope.byproducts);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached() -> impl FnOnce(&mut Byproducts) {
        |made| made.outcome = Some(Outcome::Cached)
    }

    #[test]
    fn a_nested_scope_keeps_its_own_byproducts_and_gives_the_outer_one_back() {
        let revisions = Arc::new(Revisions::default());
        let ((), outer) = VariantScope::run(&revisions, || {
            let ((), inner) = VariantScope::run(&revisions, || VariantScope::record(cached()));
            assert_eq!(inner.outcome, Some(Outcome::Cached));
            // What the outer execution records after the inner one returned is its own.
            VariantScope::record(|made| made.outcome = Some(Outcome::Compiled));
        });
        assert_eq!(outer.outcome, Some(Outcome::Compiled));
        // Outside every scope, records go nowhere.
        VariantScope::record(cached());
        assert!(CURRENT.with(|current| current.borrow().is_none()));
    }

    #[test]
    fn an_unwinding_scope_gives_the_outer_one_back() {
        let revisions = Arc::new(Revisions::default());
        let ((), outer) = VariantScope::run(&revisions, || {
            let unwound = std::panic::catch_unwind(|| {
                VariantScope::run(&revisions, || panic!("a query panicked"))
            });
            assert!(unwound.is_err());
            VariantScope::record(cached());
        });
        assert_eq!(outer.outcome, Some(Outcome::Cached));
    }
}
