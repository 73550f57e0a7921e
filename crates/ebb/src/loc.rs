//! A position in the configuration (`file:line`), in a module of its own so
//! that what runs (variables, samples, logs) can name the line a rule came
//! from without importing the configuration's types.

use std::fmt;
use std::sync::Arc;

/// A position in the configuration: file name and 1-based line number.
/// Line 0 means "the file as a whole" (e.g. it could not be read).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Loc {
    pub file: Arc<str>,
    pub line: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{}:{}", self.file, self.line)
        }
    }
}
