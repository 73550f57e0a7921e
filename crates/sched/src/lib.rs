//! ebb's task scheduler (see shared/DESIGN.md, "The scheduler's rules").
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
