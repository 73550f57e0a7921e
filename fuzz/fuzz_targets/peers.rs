//! The peers protocol decoder (a session's message stream: framing, table
//! definitions, updates applied to tables of every key type) never
//! panics and keeps the tables' trees consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ebb::peers::fuzz_messages(data);
});
