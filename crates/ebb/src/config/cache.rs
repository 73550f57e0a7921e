//! `cache NAME` sections (HAProxy 2.6 configuration.txt section 6.2) and
//! the checks of the `cache-use` / `cache-store` rules naming them.

use super::values::parse_u32_range;
use super::{
    CacheSection, Compression, ConfigError, HttpRequestAction, HttpResponseAction, Loc, Proxy,
};

/// HAProxy's limit of a cache's name (it truncates longer ones with a
/// warning; ebb refuses them).
const NAME_MAX: usize = 32;

/// Opens a `cache NAME` section.
pub(super) fn open(
    caches: &[CacheSection],
    words: &[String],
    loc: &Loc,
) -> Result<CacheSection, String> {
    let name = match words {
        [_, n] => n,
        [_] => return Err("'cache' expects a <name> argument".to_string()),
        _ => return Err("'cache' takes one name".to_string()),
    };
    if name.len() > NAME_MAX {
        return Err(format!(
            "cache name '{name}' is longer than {NAME_MAX} characters (HAProxy would truncate it)"
        ));
    }
    if let Some(c) = caches.iter().find(|c| &c.name == name) {
        return Err(format!(
            "Duplicate cache name '{name}' (first at {})",
            c.loc
        ));
    }
    Ok(CacheSection {
        name: name.clone(),
        total_max_size_mb: 0,
        max_age: 60,
        max_object_size: 0,
        process_vary: false,
        max_secondary_entries: 10,
        loc: loc.clone(),
    })
}

/// One keyword of a `cache` section.
pub(super) fn cache_kw(c: &mut CacheSection, words: &[String]) -> Result<(), String> {
    let kw = words[0].as_str();
    let [_, v] = words else {
        return Err(format!("'{kw}' expects one value"));
    };
    match kw {
        // Megabytes; HAProxy's bound keeps the byte count in 32 bits.
        "total-max-size" => c.total_max_size_mb = parse_u32_range(kw, v, 1, u32::MAX >> 20)?,
        "max-age" => c.max_age = parse_u32_range(kw, v, 0, i32::MAX as u32)?,
        "max-object-size" => c.max_object_size = parse_u32_range(kw, v, 0, u32::MAX)?,
        "process-vary" => {
            c.process_vary = match v.as_str() {
                "on" => true,
                "off" => false,
                o => return Err(format!("'process-vary' expects \"on\" or \"off\", got '{o}'")),
            }
        }
        "max-secondary-entries" => {
            c.max_secondary_entries = parse_u32_range(kw, v, 1, u32::MAX)?;
        }
        o => return Err(format!("unknown keyword '{o}' in 'cache' section (supported: total-max-size, max-age, max-object-size, process-vary, max-secondary-entries)")),
    }
    Ok(())
}

/// The checks HAProxy makes once a section is read, and the rules'
/// references to caches.
pub(super) fn check(caches: &[CacheSection], proxies: &[Proxy]) -> Vec<ConfigError> {
    let mut out = Vec::new();
    let mut err = |loc: &Loc, m: String| {
        out.push(ConfigError {
            loc: loc.clone(),
            message: m,
        })
    };
    for c in caches {
        if c.total_max_size_mb == 0 {
            err(
                &c.loc,
                format!("Size not specified for cache '{}' (total-max-size)", c.name),
            );
            continue;
        }
        let half = u64::from(c.total_max_size_mb) * 1024 * 1024 / 2;
        if u64::from(c.max_object_size) > half {
            err(
                &c.loc,
                format!(
                    "cache '{}': \"max-object-size\" is limited to half of \"total-max-size\" => {half}",
                    c.name
                ),
            );
        }
    }
    let known = |n: &str| caches.iter().any(|c| c.name == n);
    for p in proxies {
        for r in &p.http_request {
            if let HttpRequestAction::CacheUse(n) = &r.action {
                if !known(n) {
                    err(
                        &r.loc,
                        format!("'http-request cache-use': unable to find the cache '{n}'"),
                    );
                }
            }
        }
        for r in &p.http_response {
            if let HttpResponseAction::CacheStore(n) = &r.action {
                if !known(n) {
                    err(
                        &r.loc,
                        format!("'http-response cache-store': unable to find the cache '{n}'"),
                    );
                }
            }
        }
        for (loc, m) in check_filters(p, &known) {
            err(&loc, m);
        }
    }
    out
}

/// A proxy's filters in HAProxy's order: its `filter` lines, and one
/// implicit cache filter per cache its `cache-use`/`cache-store` rules
/// name without a `filter cache` line, placed at the first such rule (a
/// later `filter cache` line for it takes its place). Each: the cache's
/// name (`None`: the compression), the line, explicit or not.
fn filter_order(p: &Proxy) -> Vec<(Option<&str>, &Loc, bool)> {
    let mut out: Vec<(Option<&str>, &Loc, bool)> = p
        .filters
        .iter()
        .map(|f| (f.cache.as_deref(), &f.loc, true))
        .collect();
    // Rules inherited from a named defaults section are not this
    // proxy's lines (HAProxy attaches their filter to the defaults).
    let own = |l: &Loc| l.file == p.loc.file && l.line > p.loc.line;
    let req = p.http_request.iter().filter_map(|r| match &r.action {
        HttpRequestAction::CacheUse(n) => Some((n, &r.loc)),
        _ => None,
    });
    let res = p.http_response.iter().filter_map(|r| match &r.action {
        HttpResponseAction::CacheStore(n) => Some((n, &r.loc)),
        _ => None,
    });
    for (n, loc) in req.chain(res).filter(|(_, l)| own(l)) {
        match out.iter_mut().find(|(c, _, _)| *c == Some(n.as_str())) {
            Some((_, l, false)) if loc.line < l.line => *l = loc,
            Some(_) => {}
            None => out.push((Some(n), loc, false)),
        }
    }
    out.sort_by_key(|(_, l, _)| l.line);
    out
}

/// HAProxy 2.6's checks of a proxy's filters (`check_implicit_http_comp_flt`
/// and `cache_store_check`): the compression never runs before a cache,
/// and a `filter cache` names a cache section.
fn check_filters(p: &Proxy, known: &dyn Fn(&str) -> bool) -> Vec<(Loc, String)> {
    let who = format!("{} '{}'", p.kind.type_str(), p.name);
    let mut out = Vec::new();
    let order = filter_order(p);
    let comp = order.iter().position(|(c, _, _)| c.is_none());
    // Only a proxy that compresses adds the implicit filter's check.
    if let Some(i) = comp.filter(|_| p.compression != Compression::default()) {
        if order[i..].iter().any(|(c, _, _)| c.is_some()) {
            out.push((
                order[i].1.clone(),
                format!("{who}: unable to enable the compression filter before any cache filter."),
            ));
        }
    }
    for (k, (c, loc, explicit)) in order.iter().enumerate() {
        let Some(c) = c else { continue };
        if !known(c) {
            // A rule's unknown cache is reported at the rule.
            if *explicit {
                out.push((
                    (*loc).clone(),
                    format!(
                        "{who}: unable to find the cache '{c}' referenced by the filter 'cache'."
                    ),
                ));
            }
        } else if comp.is_some_and(|i| i < k) {
            out.push((
                (*loc).clone(),
                format!("{who}: unable to enable the compression filter before the cache '{c}'."),
            ));
        }
    }
    out
}
