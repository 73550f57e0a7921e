//! The stats page compiled (`stats uri|refresh|auth|admin|realm|show-*`)
//! for the frontend or backend that serves it.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{ConfigError, Proxy};
use crate::rules::{Cond, Matcher};

/// A compiled stats page (`stats uri|refresh|auth|admin|realm`).
pub struct StatsRt {
    pub uri: String,
    pub refresh: Option<Duration>,
    /// `(user, password)` pairs; empty: no authentication.
    pub auth: Vec<(String, String)>,
    pub realm: String,
    pub hide_version: bool,
    /// `stats admin if|unless COND` conditions (any holding allows).
    pub admin: Vec<Cond>,
    /// `stats show-node`, `show-desc` (`Some(None)`: the global value),
    /// `show-legends`.
    pub show_node: Option<Option<String>>,
    pub show_desc: Option<Option<String>>,
    pub show_legends: bool,
}

pub(super) fn compile_stats(p: &Proxy, m: &Matcher) -> Result<Option<Arc<StatsRt>>, ConfigError> {
    let Some(uri) = p.stats.effective_uri() else {
        return Ok(None);
    };
    let mut admin = Vec::new();
    for c in &p.stats.admin {
        admin.push(m.cond(c)?);
    }
    Ok(Some(Arc::new(StatsRt {
        show_node: p.stats.show_node.clone(),
        show_desc: p.stats.show_desc.clone(),
        show_legends: p.stats.show_legends,
        uri: uri.to_string(),
        refresh: p.stats.refresh,
        auth: p
            .stats
            .auth
            .iter()
            .map(|u| (u.user.clone(), u.password.clone()))
            .collect(),
        realm: p
            .stats
            .realm
            .clone()
            .unwrap_or_else(|| "ebb statistics".to_string()),
        hide_version: p.stats.hide_version,
        admin,
    })))
}
