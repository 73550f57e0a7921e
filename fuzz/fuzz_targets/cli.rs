//! The runtime CLI (`stats socket` commands): any line, at any level,
//! never panics; the process it acts on is built from a configuration
//! with servers, agents, maps, ACLs, stick tables, a cache and resolvers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert!(ebb::fuzzing::cli(data).is_some(), "the target's process did not build");
});
