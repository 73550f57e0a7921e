//! The configuration compiled for serving: what every thread reads on the
//! request path, built once at start (and again on reload) and shared
//! read-only through an `Arc`.
//!
//! Compiling checks what the parser cannot know: regular expressions and
//! `lf-string` formats build, server names resolve, what ebb does not
//! support is refused (an error with `file:line`, never a silent no-op),
//! and every backend reference resolves to an index.
//!
//! The parts: [`Compiled`] and the pass that makes it (`compile`), a
//! frontend's side (`frontend`), a backend's (`backends`) and its servers
//! (`servers`), the rules (`rules`), the counters (`counters`), what the
//! state fetches read (`state`) and the stats page (`stats`).

mod backends;
mod compile;
mod counters;
pub mod errors;
mod fcgi;
mod frontend;
mod rules;
mod servers;
pub mod state;
mod stats;

pub use backends::{
    BackendKind, BackendRt, BeTimeouts, FilesConfig, ServersRt, DEFAULT_CONNECT_MS,
    DEFAULT_SERVER_MS,
};
pub use compile::{compile, compile_keeping, merged_compression, proxy_uuid, Compiled};

/// HAProxy's words when `zero-warning` (or `-dW`) refuses a configuration
/// that gave warnings.
pub const ZERO_WARNING_ABORT: &str =
    "Some warnings were found and 'zero-warning' is set. Aborting.";
pub use counters::{
    count_compressed, count_denied_req, count_denied_resp, count_request, status_class, H2Counters,
    HttpCounters, PerRequest, RuleCounts,
};
pub use fcgi::FcgiRt;
pub use frontend::{
    abnormal, FeTimeouts, FrontendRt, UseBackendRt, DEFAULT_CLIENT_MS, DEFAULT_KEEPALIVE_MS,
};
pub use rules::{
    redirect_location, return_body, Evaluated, Prepared, PreparedFields, ReqRule, RespRule,
};
pub use servers::server_tls;
pub use stats::StatsRt;

pub use crate::listener_stats::{ListenerGuard, ListenerStats};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_str, Redirect, RedirectKind, ReturnAction, ReturnBody};
    use crate::sample::Scope;

    fn redirect(
        kind: RedirectKind,
        target: &str,
        drop_query: bool,
        append_slash: bool,
    ) -> Redirect {
        Redirect {
            kind,
            target: target.into(),
            fmt: None,
            code: 302,
            drop_query,
            append_slash,
            cookie: None,
            late: false,
            ignore_empty: false,
        }
    }

    #[test]
    fn a_prepared_answer_keeps_checked_fields_and_refuses_unsendable_ones() {
        let scope = Scope::Request { backend: false };
        let ret = |headers: &[(&str, &str)]| ReturnAction {
            status: 200,
            content_type: Some("text/plain".into()),
            body: ReturnBody::String("hi".into()),
            headers: headers
                .iter()
                .map(|(n, v)| {
                    let f = crate::sample::LogFormat::parse_http(v, scope).unwrap();
                    (n.to_string(), f)
                })
                .collect(),
            deny: false,
        };
        // All literal: built once; the type is kept apart (it follows the
        // `hdr` fields, and only with a body).
        let p = Prepared::of(&ret(&[("X-A", "1"), ("X-B", "")])).unwrap();
        let fields: Vec<_> = p.fields.fields().iter().collect();
        assert_eq!(fields, [(&b"X-A"[..], &b"1"[..])]);
        assert!(p.dyn_hdrs.is_empty());
        assert_eq!(p.content_type.as_deref(), Some(&b"text/plain"[..]));
        assert_eq!(p.body, b"hi");
        // One log-format value: every field is evaluated, in order.
        let p = Prepared::of(&ret(&[("X-A", "1"), ("X-Src", "%[src]")])).unwrap();
        assert!(p.fields.fields().is_empty());
        let names: Vec<_> = p.dyn_hdrs.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["X-A", "X-Src"]);
        // A name that is not a token could split the answer: refused at
        // start, whether its value is literal or a log-format string (the
        // latter used to be written as it was, per request).
        assert!(Prepared::of(&ret(&[("X A", "1")])).is_err());
        assert!(Prepared::of(&ret(&[("X A", "%[src]")])).is_err());
    }

    #[test]
    fn redirect_locations() {
        let loc = redirect(RedirectKind::Location, "https://x/", false, false);
        assert_eq!(redirect_location(&loc, b"/a?b", None, None), b"https://x/");
        let pre = redirect(RedirectKind::Prefix, "https://new.example", false, false);
        assert_eq!(
            redirect_location(&pre, b"/a?b=1", None, None),
            b"https://new.example/a?b=1"
        );
        let pre = redirect(RedirectKind::Prefix, "/v2/", true, true);
        assert_eq!(redirect_location(&pre, b"/a?b=1", None, None), b"/v2//a/");
        let root = redirect(RedirectKind::Prefix, "/", false, false);
        assert_eq!(redirect_location(&root, b"/a", None, None), b"/a");
        let sch = redirect(RedirectKind::Scheme, "https", false, false);
        assert_eq!(
            redirect_location(&sch, b"/p?q", Some(b"h.example:8080"), None),
            b"https://h.example:8080/p?q"
        );
        // HAProxy 2.6: the slash goes after the query; no Host, no host.
        let pre = redirect(RedirectKind::Prefix, "/pre", false, true);
        assert_eq!(
            redirect_location(&pre, b"/p?n=12", None, None),
            b"/pre/p?n=12/"
        );
        let sch = redirect(RedirectKind::Scheme, "https", false, true);
        assert_eq!(
            redirect_location(&sch, b"/p?n=1", None, None),
            b"https:///p?n=1/"
        );
        // The path of an absolute target (HAProxy's http_parse_path).
        let pre = redirect(RedirectKind::Prefix, "/pre", false, false);
        assert_eq!(
            redirect_location(&pre, b"http://u@n:81/x?y", None, None),
            b"/pre/x?y"
        );
        assert_eq!(redirect_location(&pre, b"http://n", None, None), b"/pre/");
        assert_eq!(redirect_location(&pre, b"foo/bar", None, None), b"/pre/");
    }

    #[test]
    fn compile_resolves_backends_and_refuses_what_is_not_supported() {
        let ok = "defaults\n mode http\nfrontend f\n bind :8080\n acl s path_beg /s\n use_backend b if s\n default_backend b\nbackend b\n serve-files /tmp\n";
        let c = compile(&parse_str("ok.cfg", ok).unwrap()).unwrap();
        assert_eq!(c.frontends.len(), 1);
        assert_eq!(c.frontends[0].default_backend, Some(0));
        assert_eq!(c.frontends[0].timeouts.client, DEFAULT_CLIENT_MS);

        let srv = "defaults\n mode http\nfrontend f\n bind :8080\n default_backend b\nbackend b\n server s1 127.0.0.1:9 ssl ca-file /nonexistent/ca.pem\n";
        let e = compile(&parse_str("srv.cfg", srv).unwrap()).err().unwrap();
        assert!(
            e[0].to_string().starts_with("srv.cfg:7: server s1:"),
            "{}",
            e[0]
        );

        let lf = "frontend f\n mode http\n bind :8080\n http-request return status 200 content-type text/plain lf-string \"%[path]\"\n";
        assert!(compile(&parse_str("lf.cfg", lf).unwrap()).is_ok());
        let lf = "frontend f\n mode http\n bind :8080\n http-request return status 200 content-type text/plain lf-string \"%[nope]\"\n";
        let e = parse_str("lf.cfg", lf).err().unwrap();
        assert!(e[0].to_string().starts_with("lf.cfg:4:"), "{}", e[0]);
    }

    #[test]
    fn timeouts_follow_haproxy_fallbacks() {
        let t = "defaults\n timeout client 5s\n timeout http-request 2s\nfrontend f\n bind :8080\n";
        let c = compile(&parse_str("t.cfg", t).unwrap()).unwrap();
        let to = c.frontends[0].timeouts;
        assert_eq!(
            (to.client, to.http_request, to.keep_alive),
            (5000, 2000, 2000)
        );
    }

    #[test]
    fn a_backend_list_wins_over_its_frontend() {
        use crate::compress::Coding::{self, *};
        use crate::config::Compression as C;
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let c = |algos: &[Coding], types: &[&str], offload, min: Option<u64>| C {
            algos: algos.to_vec(),
            types: t(types),
            offload,
            minsize_res: min,
            ..C::default()
        };
        let fe = c(&[Gzip], &["text/"], false, Some(9));
        let p = merged_compression(&fe, &c(&[Br], &[], false, None), 1).unwrap();
        assert_eq!(
            (p.algos, p.types, p.offload, p.min_size),
            (vec![Br], t(&["text/"]), false, 9)
        );
        let p = merged_compression(&fe, &c(&[], &["a/b"], true, Some(5)), 1).unwrap();
        assert_eq!(
            (p.algos, p.types, p.offload, p.min_size),
            (vec![Gzip], t(&["a/b"]), true, 5)
        );
        assert!(merged_compression(&c(&[], &["x"], false, None), &C::default(), 1).is_none());
    }

    #[test]
    fn directions_add_up_across_frontend_and_backend() {
        use crate::compress::Coding::*;
        use crate::config::Compression as C;
        let req_only = C {
            algos: vec![Gzip],
            algo_req: Some(Br),
            direction: Some((true, false)),
            offload: true,
            ..C::default()
        };
        // Requests only: no answer coding, no offload, the request coding.
        let p = merged_compression(&req_only, &C::default(), 1).unwrap();
        assert!(p.request_only && p.algos.is_empty() && !p.offload);
        assert_eq!(p.algo_req, Some(Br));
        // A backend with any compression line adds the response side
        // (HAProxy ORs the directions of both proxies).
        let be = C {
            types: vec!["text/".into()],
            ..C::default()
        };
        let p = merged_compression(&req_only, &be, 1).unwrap();
        assert!(!p.request_only && p.offload);
        assert_eq!((p.algos, p.algo_req), (vec![Gzip], Some(Br)));
        // `algo-req` without the request direction does nothing.
        let res_only = C {
            algo_req: Some(Gzip),
            ..C::default()
        };
        assert!(merged_compression(&res_only, &C::default(), 1).is_none());
    }
}
