//! A backend's FastCGI application (`use-fcgi-app`), compiled: what its
//! connections need ([`App`], shared with them) and what each request's
//! stream evaluates once its rules ran (HAProxy's `fcgi-app` filter on
//! the request's headers): the `set-param` values and which fields the
//! application does not see.
//!
//! The rules are HAProxy's: among the rules whose condition holds, the
//! last one of a name decides. `set-param` values are log-format strings
//! of the backend (parsed here, once per backend that uses the
//! application), sent in name order, an empty one not at all; a field is
//! hidden when its last rule is an implicit hide rule, passed when it is
//! a `pass-header`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{ConfigError, FcgiApp, FcgiRuleKind};
use crate::fcgi::params::{App, Meta};
use crate::rules::{Cond, Matcher};
use crate::sample::{Ctx, LogFormat, Scope};

/// A rule, compiled.
enum Rule {
    Set(Vec<u8>, LogFormat),
    /// A field name (lower-case): passed (`pass-header`) or hidden.
    Field(Vec<u8>, bool),
}

/// The application of a backend.
pub struct FcgiRt {
    pub(crate) app: Arc<App>,
    matcher: Matcher,
    rules: Vec<(Rule, Option<Cond>)>,
}

impl FcgiRt {
    /// Compiles `a` for a backend (its log-format strings parsed in the
    /// backend's scope).
    pub fn compile(a: &FcgiApp) -> Result<FcgiRt, ConfigError> {
        let matcher = Matcher::new(&a.acls)?;
        let mut rules = Vec::with_capacity(a.rules.len());
        for r in &a.rules {
            let rule = match &r.kind {
                FcgiRuleKind::SetParam { name, value } => {
                    let f = LogFormat::parse_http(value, Scope::Request { backend: true })
                        .map_err(|e| ConfigError {
                            loc: r.loc.clone(),
                            message: format!("fcgi-app '{}': set-param '{name}': {e}", a.name),
                        })?;
                    Rule::Set(name.as_bytes().to_vec(), f)
                }
                FcgiRuleKind::PassHeader(n) => Rule::Field(n.as_bytes().to_vec(), true),
                FcgiRuleKind::HideHeader(n) => Rule::Field(n.as_bytes().to_vec(), false),
            };
            rules.push((rule, matcher.opt_cond(r.cond.as_ref())?));
        }
        let path_info = match &a.path_info {
            Some(re) => Some(regex::bytes::Regex::new(re).map_err(|e| ConfigError {
                loc: a.loc.clone(),
                message: format!("fcgi-app '{}': invalid path-info '{re}': {e}", a.name),
            })?),
            None => None,
        };
        let app = App {
            name: a.name.clone(),
            docroot: a.docroot.clone().unwrap_or_default().into_bytes(),
            index: a.index.clone().map(String::into_bytes),
            path_info,
            keep_conn: a.keep_conn,
            get_values: a.get_values,
            mpxs_conns: a.mpxs_conns,
            max_reqs: a.max_reqs.max(1),
        };
        Ok(FcgiRt {
            app: Arc::new(app),
            matcher,
            rules,
        })
    }

    /// The application's name, document root and index (the
    /// `fcgi.docroot` and `fcgi.index` fetches).
    pub fn name(&self) -> &str {
        &self.app.name
    }
    pub fn docroot(&self) -> &[u8] {
        &self.app.docroot
    }
    pub fn index(&self) -> Option<&[u8]> {
        self.app.index.as_deref()
    }

    /// The rules' outcome for the request of `ctx` (see the module doc).
    pub(crate) fn meta(&self, ctx: &Ctx<'_>) -> Meta {
        let mut set: BTreeMap<&[u8], &LogFormat> = BTreeMap::new();
        let mut fields: BTreeMap<&[u8], bool> = BTreeMap::new();
        for (r, cond) in &self.rules {
            if !self.matcher.holds(cond.as_ref(), ctx) {
                continue;
            }
            match r {
                Rule::Set(n, f) => {
                    set.insert(n, f);
                }
                Rule::Field(n, pass) => {
                    fields.insert(n, *pass);
                }
            }
        }
        let mut m = Meta::default();
        for (n, f) in set {
            let mut v = Vec::new();
            f.render(ctx, &mut v);
            if !v.is_empty() {
                m.set.push((n.to_vec(), v));
            }
        }
        m.hide = fields
            .into_iter()
            .filter(|(_, pass)| !pass)
            .map(|(n, _)| n.to_vec())
            .collect();
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(text: &str) -> FcgiRt {
        let cfg = crate::config::parse_str("t.cfg", &format!(
            "defaults\n    mode http\nbackend b\n    use-fcgi-app a\n    server s 127.0.0.1:9000 proto fcgi\nfcgi-app a\n    docroot /d\n{text}"
        ))
        .unwrap_or_else(|e| panic!("{e:?}"));
        FcgiRt::compile(&cfg.fcgi_apps[0]).unwrap_or_else(|e| panic!("{e}"))
    }

    fn meta(rt: &FcgiRt, req: &str) -> Meta {
        let buf = req.as_bytes();
        let Ok(crate::http1::Status::Complete(head)) =
            crate::http1::parse_request(buf, &Default::default())
        else {
            panic!("bad request in test");
        };
        let dst = || None;
        let ctx = Ctx {
            req: Some(crate::sample::Req {
                buf,
                head: &head,
                body: b"",
            }),
            be: Some("b"),
            ..Ctx::detached(&dst, None)
        };
        rt.meta(&ctx)
    }

    #[test]
    fn set_params_last_rule_wins_in_name_order_and_empty_ones_go() {
        let r = rt("    set-param Z.last 1\n    set-param my-p first\n    set-param MY_P %[req.hdr(x-a)] if { req.hdr(x-a) -m found }\n    set-param empty %[req.hdr(nope)]\n");
        let m = meta(
            &r,
            "GET / HTTP/1.1\r\nHost: h\r\nX-A: hello\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n",
        );
        let show: Vec<String> = m
            .set
            .iter()
            .map(|(n, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                )
            })
            .collect();
        assert_eq!(
            show,
            [
                "auth_type=Basic",
                "my_p=hello",
                "remote_user=user",
                "z_last=1"
            ]
        );
        let m = meta(&r, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let names: Vec<&[u8]> = m.set.iter().map(|(n, _)| &n[..]).collect();
        assert_eq!(names, [&b"my_p"[..], b"z_last"]);
        let (_, v) = &m.set[0];
        assert_eq!(v, b"first");
    }

    #[test]
    fn pass_header_overrides_the_implicit_hiding() {
        let r = rt("    acl auth req.hdr(x-pass) -m found\n    pass-header Authorization if auth\n    pass-header X-Other\n");
        let m = meta(&r, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(m.hide.contains(&b"authorization".to_vec()));
        assert!(m.hide.contains(&b"transfer-encoding".to_vec()));
        assert!(!m.hide.contains(&b"x-other".to_vec()));
        let m = meta(&r, "GET / HTTP/1.1\r\nHost: h\r\nX-Pass: 1\r\n\r\n");
        assert!(!m.hide.contains(&b"authorization".to_vec()));
        assert_eq!(m.hide.len(), 9);
    }
}
