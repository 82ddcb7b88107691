//! Errors returned by `VariantCache::get_or_compile`.

use std::sync::Arc;

use crate::key::VariantKey;

/// A request that produced no artifact. Each variant carries the variant's key (its
/// `Display` is `Lit/Forward[FOG;SKIN]@7`) and its digest, for logs.
///
/// The requester that ran the compiler and every requester that waited on it receive the
/// same error; none of them is ever cached.
#[derive(Debug, thiserror::Error)]
pub enum CacheError<E> {
    /// The compiler returned an error.
    #[error("variant {key} ({digest}): compile failed: {source}")]
    Compile {
        /// The variant requested.
        key: VariantKey,
        /// The key's digest.
        digest: String,
        /// The compiler's error, shared by every requester of this compile.
        #[source]
        source: Arc<E>,
    },
    /// The compiler panicked (the panic was contained; the cache stays usable).
    #[error("variant {key} ({digest}): the compiler panicked: {message}")]
    Panicked {
        /// The variant requested.
        key: VariantKey,
        /// The key's digest.
        digest: String,
        /// The panic's message.
        message: String,
    },
    /// This requester waited on a compile started by a requester whose compiler has another
    /// error type, and that compile failed; only its message can be passed on.
    #[error("variant {key} ({digest}): compile failed for another requester: {message}")]
    FailedElsewhere {
        /// The variant requested.
        key: VariantKey,
        /// The key's digest.
        digest: String,
        /// The other compiler's error message.
        message: String,
    },
}

impl<E> CacheError<E> {
    /// The variant whose request failed.
    pub fn key(&self) -> &VariantKey {
        match self {
            CacheError::Compile { key, .. }
            | CacheError::Panicked { key, .. }
            | CacheError::FailedElsewhere { key, .. } => key,
        }
    }

    /// The failed variant's digest.
    pub fn digest(&self) -> &str {
        match self {
            CacheError::Compile { digest, .. }
            | CacheError::Panicked { digest, .. }
            | CacheError::FailedElsewhere { digest, .. } => digest,
        }
    }
}

// By hand: a derive would demand `E: Clone`, but the error is shared through an `Arc`.
impl<E> Clone for CacheError<E> {
    fn clone(&self) -> Self {
        match self {
            CacheError::Compile {
                key,
                digest,
                source,
            } => CacheError::Compile {
                key: *key,
                digest: digest.clone(),
                source: Arc::clone(source),
            },
            CacheError::Panicked {
                key,
                digest,
                message,
            } => CacheError::Panicked {
                key: *key,
                digest: digest.clone(),
                message: message.clone(),
            },
            CacheError::FailedElsewhere {
                key,
                digest,
                message,
            } => CacheError::FailedElsewhere {
                key: *key,
                digest: digest.clone(),
                message: message.clone(),
            },
        }
    }
}
