//! kiln-incr: a salsa-style incremental engine.
