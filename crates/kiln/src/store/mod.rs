//! The artifact store.
