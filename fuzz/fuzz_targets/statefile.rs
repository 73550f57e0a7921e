//! The server-state file parser never panics on any text; an error names
//! a line of the text (1-based, at most one past its last line).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.split('\n').count();
    match ebb::statefile::parse(text) {
        Ok(tree) => {
            // Everything parsed can be read back without panicking.
            for (_, servers) in tree.iter() {
                for (_, st) in servers.iter() {
                    let _ = ebb::statefile::saved_addr(st, None);
                }
            }
        }
        Err(e) => assert!(e.line <= lines + 1, "line {} of {}", e.line, lines),
    }
});
