//! No depth limit: execution and verification recurse along dependency chains (a query's
//! `execute` fetches its dependencies; verifying a memo verifies its edges first), so a
//! chain a million deep would overflow any fixed stack. Each recursion point runs its
//! body through [`guarded`], which moves it onto a fresh heap-allocated stack segment
//! when the current one is nearly used up (`stacker`, as rustc does). A check is a
//! stack-pointer comparison; it sits where recursion is unbounded, which is only the
//! claimed paths (an execution, or a claimed verification): never on the cache-hit path,
//! a shallow re-read, or the first `UNCLAIMED_DEPTH` levels of an unclaimed walk.

/// Stack that must remain for a recursion step to run without a new segment: one step
/// (engine frames plus the user's `execute` up to its next fetch) must fit in it.
const RED_ZONE: usize = 256 * 1024;

/// Size of each new stack segment.
const SEGMENT: usize = 4 * 1024 * 1024;

/// Runs `step` with at least [`RED_ZONE`] bytes of stack.
#[inline]
pub(crate) fn guarded<R>(step: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, step)
}
