//! The global section's environment keywords: `setenv`, `presetenv`,
//! `unsetenv` and `resetenv` (configuration.txt 3.1).
//!
//! HAProxy changes its own environment as it reads these lines, so the lines
//! after them see the change in `"${NAME}"`, in addresses and in the `env()`
//! fetch, and the processes it starts (`program` sections) inherit it.
//!
//! ebb reads a configuration in a running, threaded process too (a SIGHUP
//! reload), where changing the process's environment would race with the
//! other threads. So the parser keeps the changes in an overlay of its own
//! thread, which every environment read of the parse goes through
//! ([`get`]); the final set of changes travels in the configuration
//! (`Global::environ`) and the binary applies it to the process once, at
//! start, before any thread or child exists.

use std::cell::RefCell;
use std::collections::HashMap;

/// The environment as the configuration changed it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overlay {
    /// `resetenv` ran: every variable not in `vars` is gone.
    pub cleared: bool,
    /// Variables set (`Some`) or removed (`None`) since the start.
    pub vars: HashMap<String, Option<String>>,
}

impl Overlay {
    /// Whether the configuration changed nothing.
    pub fn is_empty(&self) -> bool {
        !self.cleared && self.vars.is_empty()
    }

    fn lookup(&self, name: &str, base: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        match self.vars.get(name) {
            Some(v) => v.clone(),
            None if self.cleared => None,
            None => base(name),
        }
    }

    /// Makes the process's environment what the configuration said. Only
    /// for a process with no other thread yet (see the module's notes).
    pub fn apply_to_process(&self) {
        if self.cleared {
            for (k, _) in std::env::vars_os() {
                let keep = k.to_str().is_some_and(|k| self.vars.contains_key(k));
                if !keep {
                    std::env::remove_var(&k);
                }
            }
        }
        for (k, v) in &self.vars {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
    }
}

thread_local! {
    static OVERLAY: RefCell<Overlay> = RefCell::new(Overlay::default());
}

/// A parse starts from the process's environment as it is.
pub(crate) fn reset() {
    OVERLAY.with(|o| *o.borrow_mut() = Overlay::default());
}

/// The overlay the parse built (and a fresh one for the next parse).
pub(crate) fn take() -> Overlay {
    OVERLAY.with(|o| std::mem::take(&mut *o.borrow_mut()))
}

/// A variable as the configuration read so far leaves it, over `base`.
pub(crate) fn lookup(name: &str, base: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    OVERLAY.with(|o| o.borrow().lookup(name, base))
}

/// A variable as the configuration read so far leaves it, over the
/// process's environment.
pub(crate) fn get(name: &str) -> Option<String> {
    lookup(name, &|n| std::env::var(n).ok())
}

fn valid_name(kw: &str, n: &str) -> Result<(), String> {
    if n.is_empty() || n.contains('=') || n.contains('\0') {
        return Err(format!("'{kw}': '{n}' is not a valid variable name"));
    }
    Ok(())
}

/// One of the four keywords (`w[0]`), over `base` for `presetenv` and
/// `resetenv`.
pub(crate) fn keyword(w: &[String], base: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    let kw = w[0].as_str();
    match kw {
        "setenv" | "presetenv" => {
            let [_, name, value] = w else {
                return Err(format!("'{kw}' expects a name and a value"));
            };
            valid_name(kw, name)?;
            if value.contains('\0') {
                return Err(format!("'{kw}': a value cannot hold a NUL byte"));
            }
            OVERLAY.with(|o| {
                let mut o = o.borrow_mut();
                if kw == "presetenv" && o.lookup(name, base).is_some() {
                    return;
                }
                o.vars.insert(name.clone(), Some(value.clone()));
            });
        }
        "unsetenv" => {
            if w.len() < 2 {
                return Err("'unsetenv' expects at least one variable name".to_string());
            }
            for n in &w[1..] {
                valid_name(kw, n)?;
            }
            OVERLAY.with(|o| {
                let mut o = o.borrow_mut();
                for n in &w[1..] {
                    o.vars.insert(n.clone(), None);
                }
            });
        }
        "resetenv" => {
            for n in &w[1..] {
                valid_name(kw, n)?;
            }
            OVERLAY.with(|o| {
                let mut o = o.borrow_mut();
                let kept: HashMap<String, Option<String>> = w[1..]
                    .iter()
                    .filter_map(|n| o.lookup(n, base).map(|v| (n.clone(), Some(v))))
                    .collect();
                o.cleared = true;
                o.vars = kept;
            });
        }
        _ => return Err(format!("'{kw}' is not an environment keyword")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn the_four_keywords_over_a_base() {
        reset();
        let base = |n: &str| match n {
            "A" => Some("a".to_string()),
            "B" => Some("b".to_string()),
            _ => None,
        };
        keyword(&w("setenv X 1"), &base).unwrap();
        keyword(&w("presetenv A no"), &base).unwrap();
        keyword(&w("presetenv Y 2"), &base).unwrap();
        keyword(&w("presetenv Y 3"), &base).unwrap();
        assert_eq!(lookup("X", &base).as_deref(), Some("1"));
        assert_eq!(lookup("A", &base).as_deref(), Some("a"));
        assert_eq!(lookup("Y", &base).as_deref(), Some("2"));
        keyword(&w("unsetenv B X"), &base).unwrap();
        assert_eq!(lookup("B", &base), None);
        assert_eq!(lookup("X", &base), None);
        keyword(&w("resetenv A Y Z"), &base).unwrap();
        assert_eq!(lookup("A", &base).as_deref(), Some("a"));
        assert_eq!(lookup("Y", &base).as_deref(), Some("2"));
        assert_eq!(lookup("Z", &base), None);
        keyword(&w("setenv B again"), &base).unwrap();
        assert_eq!(lookup("B", &base).as_deref(), Some("again"));
        let o = take();
        assert!(o.cleared);
        assert_eq!(o.vars.len(), 3);
        assert!(keyword(&w("setenv X"), &base).is_err());
        assert!(keyword(&w("setenv A=B 1"), &base).is_err());
        assert!(keyword(&w("unsetenv"), &base).is_err());
        assert!(take().is_empty());
    }
}
