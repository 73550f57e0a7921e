//! The stats page's admin form (a POST body), its URI options and its
//! `Authorization` value never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert!(
        ebb::fuzzing::stats_admin(data).is_some(),
        "the target's configuration did not compile"
    );
});
