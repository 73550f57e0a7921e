//! Servers' answers to health checks (HTTP/1 and HTTP/2 checks, tcp-check
//! matches, the MySQL, PostgreSQL, Redis, LDAP, SMTP, SPOP and SSLv3
//! checks) and agents' replies never panic, whatever the bytes and however
//! they are split.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert!(
        ebb::fuzzing::check_reply(data).is_some(),
        "the target's configuration did not compile"
    );
});
