//! Single flight: one compile per key at a time, its outcome shared with every requester
//! that arrived while it ran.

use std::any::Any;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

/// How a compile that other requesters joined ended without an artifact.
#[derive(Clone)]
pub(super) enum Failure {
    /// The compiler returned an error; `error` is the caller's `Arc<E>`, type-erased so that
    /// requesters can share it without the cache knowing `E`.
    Compile {
        error: Arc<dyn Any + Send + Sync>,
        message: String,
    },
    /// The compiler panicked, or its caller unwound before publishing an outcome.
    Panicked { message: String },
}

/// A compile in progress. Requesters of its key wait on it instead of compiling again.
pub(super) struct Flight<A> {
    outcome: Mutex<Option<Result<A, Failure>>>,
    done: Condvar,
}

impl<A: Clone> Flight<A> {
    pub(super) fn new() -> Self {
        Flight {
            outcome: Mutex::new(None),
            done: Condvar::new(),
        }
    }

    /// Blocks until the compile has an outcome, and returns a copy of it.
    pub(super) fn wait(&self) -> Result<A, Failure> {
        let mut outcome = self.outcome.lock();
        loop {
            if let Some(outcome) = outcome.as_ref() {
                return outcome.clone();
            }
            self.done.wait(&mut outcome);
        }
    }

    /// Publishes the outcome and wakes every waiter.
    pub(super) fn complete(&self, outcome: Result<A, Failure>) {
        *self.outcome.lock() = Some(outcome);
        self.done.notify_all();
    }
}

/// The text of a panic payload (`panic!` gives a `&str` or a `String`).
pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-text payload".to_owned()
    }
}
