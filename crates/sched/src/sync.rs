//! # Synchronisation facade
//!
//! Every atomic and lock used by the cross-thread parts of the scheduler
//! ([`crate::inbox`] and [`crate::notify`]) is imported from here, never
//! from `std` directly. The loom model tests (`tests/loom.rs`, built only
//! with `--cfg loom`) include those two modules' source files and provide
//! their own `sync` module that maps the same names to `loom`'s types, so
//! the model checks the very code the runtime runs, with no loom
//! dependency in the library itself.

pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::Mutex;
