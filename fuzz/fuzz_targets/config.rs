//! The configuration parser never panics on any text, every error it
//! reports names the file and a line that exists, and what parses also
//! compiles or is refused with located errors (never a panic).
#![no_main]

use ebb::config::parse_str_with_env;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A fixed environment: fuzz inputs use ${A} and ${B}.
    let env = |n: &str| match n {
        "A" => Some("127.0.0.1:8080".to_string()),
        "B" => Some("x y".to_string()),
        _ => None,
    };
    let lines = text.split('\n').count() as u32;
    match parse_str_with_env("f.cfg", text, &env) {
        Ok(cfg) => {
            if let Err(errs) = ebb::proxy::compile(&cfg) {
                for e in errs {
                    assert!(e.to_string().starts_with("f.cfg"));
                }
            }
        }
        Err(errs) => {
            assert!(!errs.is_empty());
            for e in errs {
                assert_eq!(&*e.loc.file, "f.cfg");
                assert!(e.loc.line <= lines, "line {} of {}", e.loc.line, lines);
            }
        }
    }
});
