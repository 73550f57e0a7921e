//! A FastCGI application's records, read as ebb's FastCGI connections
//! read them (`mux::fcgi`: the records, then the CGI answer of request 1
//! made into HTTP/1.1): nothing panics, and a complete answer's head
//! parses as HTTP/1.1 (checked in `ebb::fuzzing::fcgi_answer`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ebb::fuzzing::fcgi_answer(data);
});
