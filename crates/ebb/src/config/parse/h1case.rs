//! The `global` keywords `h1-case-adjust FROM TO` and `h1-case-adjust-file
//! PATH` ([`crate::http1::CaseMap`]): the lines fill the map as they are
//! read; the file, the last one named, is read once the configuration is
//! (as HAProxy's post-parser does), a bad line of it refused as its own
//! `file:line`.

use super::Parser;
use crate::config::types::*;
use std::path::PathBuf;

pub(super) fn global(g: &mut Global, w: &[String], loc: &Loc) -> Result<(), String> {
    let kw = w[0].as_str();
    match (kw, &w[1..]) {
        ("h1-case-adjust", [from, to]) if !from.is_empty() && !to.is_empty() => {
            g.h1_case.add(from, to)
        }
        ("h1-case-adjust", [_, _, extra, ..]) => Err(format!(
            "'{kw}' cannot handle unexpected argument '{extra}'"
        )),
        ("h1-case-adjust", _) => Err(format!("'{kw}' expects <from> and <to> as argument.")),
        (_, [file]) if !file.is_empty() => {
            g.h1_case_file = Some(Spanned {
                value: PathBuf::from(file),
                loc: loc.clone(),
            });
            Ok(())
        }
        (_, [_, extra, ..]) => Err(format!(
            "'{kw}' cannot handle unexpected argument '{extra}'"
        )),
        _ => Err(format!("'{kw}' expects <file> as argument.")),
    }
}

impl Parser<'_> {
    /// Reads the `h1-case-adjust-file` into the map, after the
    /// `h1-case-adjust` lines (a duplicate of one is the file's error).
    pub(super) fn read_h1_case_file(&mut self) {
        let Some(f) = self.global.h1_case_file.clone() else {
            return;
        };
        let text = match std::fs::read(&f.value) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => {
                let msg = format!(
                    "h1-case-adjust-file '{}': failed to open file ({e})",
                    f.value.display()
                );
                self.error(f.loc, msg);
                return;
            }
        };
        if let Err((line, msg)) = self.global.h1_case.add_file(&text) {
            let at = Loc {
                file: f.value.to_string_lossy().into(),
                line,
            };
            let msg = format!("{msg} (the 'h1-case-adjust-file' of {})", f.loc);
            self.error(at, msg);
        }
    }
}
