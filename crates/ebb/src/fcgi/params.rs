//! The PARAMS of a request (the CGI/1.1 variables, RFC 3875 §4.1, and
//! the request's fields), socket-free, as HAProxy 2.6's FCGI mux writes
//! them (`fcgi_strm_send_params`):
//!
//! 1. each field of the request head in order, but those the
//!    application hides ([`Meta::hide`]): `Content-Length` as
//!    `CONTENT_LENGTH`, `Content-Type` as `CONTENT_TYPE`, any other as
//!    `HTTP_` and its name (`TE` only as `trailers`, when it says so);
//! 2. the `set-param` values of the stream ([`Meta::set`]), names in
//!    order; one that names a standard variable replaces its default
//!    (HAProxy's mask: the exact names it compares, so that
//!    `REQUEST_METHOD` does not replace the default, which HAProxy
//!    compares as `request_meth`);
//! 3. `http-send-name-header`'s field;
//! 4. the defaults not replaced, in HAProxy's order: GATEWAY_INTERFACE,
//!    DOCUMENT_ROOT, SCRIPT_NAME, PATH_INFO, REQUEST_URI, REQUEST_METHOD,
//!    QUERY_STRING, SERVER_NAME, SERVER_PORT, SERVER_PROTOCOL,
//!    REMOTE_ADDR, REMOTE_PORT, SCRIPT_FILENAME, PATH_TRANSLATED,
//!    CONTENT_LENGTH, SERVER_SOFTWARE, HTTPS.
//!
//! A name goes with its letters and digits upper-cased, any other byte
//! as `_`. A parameter whose value is empty is not sent.
//!
//! SCRIPT_NAME is the URL-decoded path (`%XX`; a `%` without two hex
//! digits is an error); with `path-info`, the regex's first capture, and
//! PATH_INFO its second (when it captured); a SCRIPT_NAME ending in `/`
//! gets the `index` appended. SCRIPT_FILENAME is DOCUMENT_ROOT and
//! SCRIPT_NAME, PATH_TRANSLATED DOCUMENT_ROOT and PATH_INFO. With
//! `path-info`, a decoded path holding LF or NUL is an error (the regex
//! could not be trusted on it), as is a request without a path.

use std::net::SocketAddr;

/// What the application's section says of each request's variables (the
/// part its connections need; its rules run in the stream).
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) name: String,
    pub(crate) docroot: Vec<u8>,
    pub(crate) index: Option<Vec<u8>>,
    pub(crate) path_info: Option<regex::bytes::Regex>,
    /// `option keep-conn` (on by default): BEGIN_REQUEST asks the
    /// application to keep the connection.
    pub(crate) keep_conn: bool,
    /// `option get-values`: GET_VALUES opens each connection.
    pub(crate) get_values: bool,
    /// `option mpxs-conns`: requests share a connection.
    pub(crate) mpxs_conns: bool,
    /// `option max-reqs N` (1 unless `mpxs-conns` or `get-values`).
    pub(crate) max_reqs: u32,
}

/// What the stream says of its request beyond the head it writes: its
/// `fcgi-app` rules' outcome and its connection's addresses.
#[derive(Debug, Default, Clone)]
pub(crate) struct Meta {
    /// The `set-param` values that apply, by name (lower-cased, bytes
    /// other than letters and digits as `_`), in name order, no empty one.
    pub(crate) set: Pairs,
    /// Field names (lower-case) not passed: the hop-by-hop ones,
    /// `Authorization` and the others HAProxy hides, less those a
    /// `pass-header` rule passes.
    pub(crate) hide: Vec<Vec<u8>>,
    /// `http-send-name-header`'s field name (lower-case): it goes after
    /// the `set-param` values, as HAProxy adds it.
    pub(crate) send_name: Option<Vec<u8>>,
    /// The client's address (REMOTE_ADDR, REMOTE_PORT).
    pub(crate) src: Option<SocketAddr>,
    /// The address the client reached (SERVER_PORT; SERVER_NAME without
    /// `Host`).
    pub(crate) dst: Option<SocketAddr>,
    /// The client's connection is TLS (HTTPS=on).
    pub(crate) https: bool,
    /// The client spoke HTTP/2 (SERVER_PROTOCOL HTTP/2.0).
    pub(crate) h2: bool,
}

/// The request head as the mux reads it from the stream.
pub(crate) struct Head<'a> {
    pub(crate) method: &'a [u8],
    /// The request target as on the request line.
    pub(crate) uri: &'a [u8],
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub(crate) version: &'a [u8],
    pub(crate) fields: Vec<(&'a [u8], &'a [u8])>,
}

/// Name-value pairs, names encoded.
pub(crate) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The request cannot be turned into parameters (HAProxy's processing
/// error): the stream answers it with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid;

/// HAProxy's encoding of a parameter name: letters and digits
/// upper-cased, any other byte `_`.
pub(crate) fn param_name(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut n = Vec::with_capacity(prefix.len() + name.len());
    n.extend_from_slice(prefix);
    n.extend(name.iter().map(|&b| {
        if b.is_ascii_alphanumeric() {
            b.to_ascii_uppercase()
        } else {
            b'_'
        }
    }));
    n
}

/// The standard variables a `set-param` may replace, each by the exact
/// name HAProxy compares.
#[derive(Default)]
struct Set<'a> {
    gateway: bool,
    docroot: Option<&'a [u8]>,
    script_name: Option<&'a [u8]>,
    path_info: Option<&'a [u8]>,
    uri: Option<&'a [u8]>,
    meth: bool,
    qs: bool,
    srv_name: bool,
    srv_port: bool,
    srv_proto: bool,
    rem_addr: bool,
    rem_port: bool,
    script_file: bool,
    path_trans: bool,
    https: bool,
    srv_soft: bool,
    cont_len: bool,
}

/// The request's parameters, names encoded, in order. `body_len`: the
/// body's length when the head gives none (a chunked body, gathered).
pub(crate) fn build(
    app: &App,
    meta: &Meta,
    head: &Head<'_>,
    body_len: u64,
) -> Result<Pairs, Invalid> {
    let mut out: Pairs = Vec::with_capacity(head.fields.len() + 24);
    let mut set = Set::default();
    let mut host: Option<&[u8]> = None;
    let hidden = |n: &[u8]| meta.hide.iter().any(|h| n.eq_ignore_ascii_case(h));
    let is_send_name = |n: &[u8]| {
        meta.send_name
            .as_deref()
            .is_some_and(|s| n.eq_ignore_ascii_case(s))
    };
    let mut send_name = None;
    for &(n, v) in &head.fields {
        if hidden(n) {
            continue;
        }
        if n.eq_ignore_ascii_case(b"content-length") {
            set.cont_len = true;
            out.push((b"CONTENT_LENGTH".to_vec(), v.to_vec()));
            continue;
        }
        if n.eq_ignore_ascii_case(b"content-type") {
            out.push((b"CONTENT_TYPE".to_vec(), v.to_vec()));
            continue;
        }
        if is_send_name(n) {
            send_name = Some((n, v));
            continue;
        }
        let mut v = v;
        if n.eq_ignore_ascii_case(b"host") {
            host = Some(v);
        } else if n.eq_ignore_ascii_case(b"te") {
            // Only `trailers` goes, when it is a member.
            let lower = v.to_ascii_lowercase();
            let Some(at) = lower.windows(8).position(|w| w == b"trailers") else {
                continue;
            };
            if lower.get(at + 8).is_some_and(|&b| b != b',') {
                continue;
            }
            v = b"trailers";
        }
        out.push((param_name(b"HTTP_", n), v.to_vec()));
    }
    for (n, v) in &meta.set {
        let v = &v[..];
        match &n[..] {
            b"gateway_interface" => set.gateway = true,
            b"document_root" => set.docroot = Some(v),
            b"script_name" => set.script_name = Some(v),
            b"path_info" => set.path_info = Some(v),
            b"request_uri" => set.uri = Some(v),
            b"request_meth" => set.meth = true,
            b"query_string" => set.qs = true,
            b"server_name" => set.srv_name = true,
            b"server_port" => set.srv_port = true,
            b"server_protocol" => set.srv_proto = true,
            b"remote_addr" => set.rem_addr = true,
            b"remote_port" => set.rem_port = true,
            b"script_filename" => set.script_file = true,
            b"path_translated" => set.path_trans = true,
            b"https" => set.https = true,
            b"server_software" => set.srv_soft = true,
            _ => {}
        }
        if !v.is_empty() {
            out.push((param_name(b"", n), v.to_vec()));
        }
    }
    if let Some((n, v)) = send_name {
        out.push((param_name(b"HTTP_", n), v.to_vec()));
    }
    defaults(app, meta, head, body_len, &set, host, &mut out)?;
    out.retain(|(_, v)| !v.is_empty());
    Ok(out)
}

/// Step 4 of the module doc.
fn defaults(
    app: &App,
    meta: &Meta,
    head: &Head<'_>,
    body_len: u64,
    set: &Set<'_>,
    host: Option<&[u8]>,
    out: &mut Pairs,
) -> Result<(), Invalid> {
    let docroot = set.docroot.unwrap_or(&app.docroot);
    let uri = set.uri.unwrap_or(head.uri);
    let mut script: Option<Vec<u8>> = set.script_name.map(<[u8]>::to_vec);
    let mut path_info: Option<Vec<u8>> = set.path_info.map(<[u8]>::to_vec);
    let mut qs: &[u8] = b"";
    let mut soft = !set.srv_soft;
    if set.script_name.is_none() || set.path_info.is_none() || !set.qs {
        let mut path = uri_path(uri);
        if set.script_name.is_none() && path.is_empty() {
            return Err(Invalid);
        }
        if !set.qs {
            if let Some(q) = path.iter().position(|&b| b == b'?') {
                qs = &path[q + 1..];
                path = &path[..q];
            }
        }
        if set.script_name.is_some() {
            // The path info is not looked for then (nor is the
            // server's software said: HAProxy's early end).
            soft = false;
        } else {
            let decoded = url_decode(path).ok_or(Invalid)?;
            let mut name = decoded.clone();
            if let Some(re) = &app.path_info {
                if decoded.iter().any(|&b| b == b'\n' || b == 0) {
                    return Err(Invalid);
                }
                if let Some(c) = re.captures(&decoded) {
                    if let Some(m1) = c.get(1) {
                        name = m1.as_bytes().to_vec();
                        if path_info.is_none() {
                            path_info = c.get(2).map(|m| m.as_bytes().to_vec());
                        }
                    }
                }
            }
            if let (Some(index), Some(b'/')) = (&app.index, name.last()) {
                name.extend_from_slice(index);
            }
            script = Some(name);
        }
    }
    let script = script.unwrap_or_default();
    let path_info = path_info.unwrap_or_default();
    let mut push = |skip: bool, n: &[u8], v: Vec<u8>| {
        if !skip {
            out.push((n.to_vec(), v));
        }
    };
    let join = |a: &[u8], b: &[u8]| [a, b].concat();
    push(set.gateway, b"GATEWAY_INTERFACE", b"CGI/1.1".to_vec());
    push(set.docroot.is_some(), b"DOCUMENT_ROOT", docroot.to_vec());
    push(set.script_name.is_some(), b"SCRIPT_NAME", script.clone());
    push(set.path_info.is_some(), b"PATH_INFO", path_info.clone());
    push(set.uri.is_some(), b"REQUEST_URI", uri.to_vec());
    push(set.meth, b"REQUEST_METHOD", head.method.to_vec());
    push(set.qs, b"QUERY_STRING", qs.to_vec());
    let name = match host {
        Some(h) => h.to_vec(),
        None => meta
            .dst
            .map(|d| d.ip().to_string().into_bytes())
            .unwrap_or_default(),
    };
    push(set.srv_name, b"SERVER_NAME", name);
    let port = |a: Option<SocketAddr>| a.map_or(0, |a| a.port()).to_string().into_bytes();
    push(set.srv_port, b"SERVER_PORT", port(meta.dst));
    let proto = if meta.h2 {
        &b"HTTP/2.0"[..]
    } else {
        head.version
    };
    push(set.srv_proto, b"SERVER_PROTOCOL", proto.to_vec());
    let addr = meta
        .src
        .map(|a| a.ip().to_string().into_bytes())
        .unwrap_or_default();
    push(set.rem_addr, b"REMOTE_ADDR", addr);
    push(set.rem_port, b"REMOTE_PORT", port(meta.src));
    push(set.script_file, b"SCRIPT_FILENAME", join(docroot, &script));
    let trans = if path_info.is_empty() {
        Vec::new()
    } else {
        join(docroot, &path_info)
    };
    push(set.path_trans, b"PATH_TRANSLATED", trans);
    push(
        set.cont_len,
        b"CONTENT_LENGTH",
        body_len.to_string().into_bytes(),
    );
    let software = if soft {
        concat!("ebb ", env!("CARGO_PKG_VERSION"))
            .as_bytes()
            .to_vec()
    } else {
        Vec::new()
    };
    push(set.srv_soft, b"SERVER_SOFTWARE", software);
    push(
        set.https,
        b"HTTPS",
        if meta.https {
            b"on".to_vec()
        } else {
            Vec::new()
        },
    );
    Ok(())
}

/// The path of a request target, with its query (HAProxy's
/// `http_parse_path`): an origin-form target whole, an absolute URI's
/// part after its authority (empty without one), nothing for `*` or an
/// authority.
fn uri_path(uri: &[u8]) -> &[u8] {
    if uri.first() == Some(&b'/') {
        return uri;
    }
    let Some(s) = uri.windows(3).position(|w| w == b"://") else {
        return b"";
    };
    let after = &uri[s + 3..];
    match after.iter().position(|&b| b == b'/') {
        Some(p) => &after[p..],
        None => b"",
    }
}

/// HAProxy's `url_decode(path, 0)`: `%XX` decoded (a `%` without two hex
/// digits fails), `+` kept until a `?`, a space after it; the string ends
/// at a NUL byte, as HAProxy's C string does.
pub(crate) fn url_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut form = false;
    let mut i = 0;
    while i < s.len() && s[i] != 0 {
        match s[i] {
            b'+' => out.push(if form { b' ' } else { b'+' }),
            b'%' => {
                let h = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
                let (a, b) = (h(s.get(i + 1))?, h(s.get(i + 2))?);
                out.push((a * 16 + b) as u8);
                i += 2;
            }
            b'?' => {
                form = true;
                out.push(b'?');
            }
            b => out.push(b),
        }
        i += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> App {
        App {
            name: "php".into(),
            docroot: b"/var/www".to_vec(),
            index: Some(b"index.php".to_vec()),
            path_info: Some(regex::bytes::Regex::new(r"^(/.+\.php)(/.*)?$").unwrap()),
            keep_conn: true,
            get_values: false,
            mpxs_conns: false,
            max_reqs: 1,
        }
    }

    fn meta() -> Meta {
        Meta {
            hide: ["connection", "authorization", "te", "transfer-encoding"]
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect(),
            src: Some("10.0.0.1:5555".parse().unwrap()),
            dst: Some("127.0.0.1:8080".parse().unwrap()),
            ..Meta::default()
        }
    }

    fn show(p: &Pairs) -> Vec<String> {
        p.iter()
            .map(|(n, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                )
            })
            .collect()
    }

    fn get(app: &App, meta: &Meta, uri: &str, fields: &[(&str, &str)]) -> Vec<String> {
        let head = Head {
            method: b"GET",
            uri: uri.as_bytes(),
            version: b"HTTP/1.1",
            fields: fields
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
                .collect(),
        };
        show(&build(app, meta, &head, 0).unwrap())
    }

    #[test]
    fn a_request_gets_its_fields_then_the_cgi_variables_in_haproxy_order() {
        let p = get(
            &app(),
            &meta(),
            "/blog/index.php/a%20b/c?x=1&y=2",
            &[
                ("Host", "example.com"),
                ("Connection", "close"),
                ("X-Custom-hdr.1", "v"),
                ("Authorization", "Basic eA=="),
                ("Content-Type", "text/plain"),
                ("TE", "trailers"),
            ],
        );
        let soft = concat!("SERVER_SOFTWARE=ebb ", env!("CARGO_PKG_VERSION"));
        assert_eq!(
            p,
            [
                "HTTP_HOST=example.com",
                "HTTP_X_CUSTOM_HDR_1=v",
                "CONTENT_TYPE=text/plain",
                "GATEWAY_INTERFACE=CGI/1.1",
                "DOCUMENT_ROOT=/var/www",
                "SCRIPT_NAME=/blog/index.php",
                "PATH_INFO=/a b/c",
                "REQUEST_URI=/blog/index.php/a%20b/c?x=1&y=2",
                "REQUEST_METHOD=GET",
                "QUERY_STRING=x=1&y=2",
                "SERVER_NAME=example.com",
                "SERVER_PORT=8080",
                "SERVER_PROTOCOL=HTTP/1.1",
                "REMOTE_ADDR=10.0.0.1",
                "REMOTE_PORT=5555",
                "SCRIPT_FILENAME=/var/www/blog/index.php",
                "PATH_TRANSLATED=/var/www/a b/c",
                "CONTENT_LENGTH=0",
                soft,
            ]
        );
    }

    #[test]
    fn index_host_fallback_https_and_h2() {
        let mut m = meta();
        m.https = true;
        m.h2 = true;
        let p = get(&app(), &m, "/dir/", &[]);
        assert!(
            p.contains(&"SCRIPT_NAME=/dir/index.php".to_string()),
            "{p:?}"
        );
        assert!(p.contains(&"SCRIPT_FILENAME=/var/www/dir/index.php".into()));
        assert!(p.contains(&"SERVER_NAME=127.0.0.1".into()));
        assert!(p.contains(&"SERVER_PROTOCOL=HTTP/2.0".into()));
        assert_eq!(p.last().unwrap(), "HTTPS=on");
        assert!(!p
            .iter()
            .any(|s| s.starts_with("PATH_INFO") || s.starts_with("QUERY")));
        // No regex: the whole decoded path.
        let mut a = app();
        a.path_info = None;
        let p = get(&a, &meta(), "/x.php/y?", &[]);
        assert!(p.contains(&"SCRIPT_NAME=/x.php/y".to_string()), "{p:?}");
        // An absolute URI's path.
        let p = get(&a, &meta(), "http://h:1/p%2Bq+r", &[]);
        assert!(p.contains(&"SCRIPT_NAME=/p+q+r".to_string()), "{p:?}");
        assert!(p.contains(&"REQUEST_URI=http://h:1/p%2Bq+r".to_string()));
    }

    #[test]
    fn set_param_replaces_only_the_names_haproxy_compares() {
        let mut m = meta();
        m.set = vec![
            (b"document_root".to_vec(), b"/srv".to_vec()),
            (b"my_param".to_vec(), b"v".to_vec()),
            (b"request_method".to_vec(), b"POST".to_vec()),
            (b"remote_addr".to_vec(), b"1.2.3.4".to_vec()),
        ];
        let p = get(&app(), &m, "/a.php", &[]);
        assert_eq!(
            &p[..4],
            [
                "DOCUMENT_ROOT=/srv",
                "MY_PARAM=v",
                "REQUEST_METHOD=POST",
                "REMOTE_ADDR=1.2.3.4"
            ]
        );
        assert!(p.contains(&"SCRIPT_FILENAME=/srv/a.php".to_string()));
        assert!(
            p.contains(&"REQUEST_METHOD=GET".to_string()),
            "not replaced"
        );
        assert_eq!(p.iter().filter(|s| s.starts_with("REMOTE_ADDR")).count(), 1);
        assert_eq!(
            p.iter().filter(|s| s.starts_with("DOCUMENT_ROOT")).count(),
            1
        );
        // SCRIPT_NAME set: no path info is looked for, no SERVER_SOFTWARE.
        m.set = vec![(b"script_name".to_vec(), b"/s.php".to_vec())];
        let p = get(&app(), &m, "/a.php/b?q", &[]);
        assert!(p.contains(&"SCRIPT_FILENAME=/var/www/s.php".to_string()));
        assert!(p.contains(&"QUERY_STRING=q".to_string()));
        assert!(!p
            .iter()
            .any(|s| s.starts_with("PATH_INFO") || s.starts_with("SERVER_SOFT")));
    }

    #[test]
    fn send_name_and_content_length_and_te() {
        let mut m = meta();
        m.send_name = Some(b"x-server".to_vec());
        m.set = vec![(b"p".to_vec(), b"1".to_vec())];
        m.hide.retain(|h| h != b"te");
        let head = Head {
            method: b"POST",
            uri: b"/a.php",
            version: b"HTTP/1.0",
            fields: vec![
                (b"X-Server", b"s1"),
                (b"Content-Length", b"12"),
                (b"te", b"gzip, trailers"),
                (b"X-A", b"1"),
            ],
        };
        let p = show(&build(&app(), &m, &head, 99).unwrap());
        assert_eq!(
            &p[..5],
            [
                "CONTENT_LENGTH=12",
                "HTTP_TE=trailers",
                "HTTP_X_A=1",
                "P=1",
                "HTTP_X_SERVER=s1"
            ]
        );
        assert_eq!(
            p.iter().filter(|s| s.starts_with("CONTENT_LENGTH")).count(),
            1
        );
        assert!(p.contains(&"SERVER_PROTOCOL=HTTP/1.0".to_string()));
        // A chunked body's gathered length.
        let head = Head {
            fields: vec![],
            ..head
        };
        let p = show(&build(&app(), &m, &head, 99).unwrap());
        assert!(p.contains(&"CONTENT_LENGTH=99".to_string()));
    }

    #[test]
    fn invalid_paths() {
        let h = |uri: &'static str| Head {
            method: b"GET",
            uri: uri.as_bytes(),
            version: b"HTTP/1.1",
            fields: vec![],
        };
        assert_eq!(build(&app(), &meta(), &h("/a%2"), 0), Err(Invalid));
        assert_eq!(build(&app(), &meta(), &h("/a%0Ab.php"), 0), Err(Invalid));
        assert_eq!(build(&app(), &meta(), &h("*"), 0), Err(Invalid));
        assert_eq!(build(&app(), &meta(), &h("http://a"), 0), Err(Invalid));
        let mut a = app();
        a.path_info = None;
        assert!(build(&a, &meta(), &h("/a%0Ab"), 0).is_ok());
        assert_eq!(url_decode(b"/a+b?c+d%41"), Some(b"/a+b?c dA".to_vec()));
        assert_eq!(url_decode(b"/a%00b"), Some(b"/a\0b".to_vec()));
        assert_eq!(url_decode(b"%zz"), None);
        assert_eq!(param_name(b"HTTP_", b"x-a.b"), b"HTTP_X_A_B");
    }
}
