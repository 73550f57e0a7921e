use super::*;
use std::fs;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ebb-files-{}-{}", name, std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn normalize_decodes_once_and_resolves_dots() {
    assert_eq!(normalize_path(b"/").unwrap(), "/");
    assert_eq!(normalize_path(b"/a/./b//c").unwrap(), "/a/b/c");
    assert_eq!(normalize_path(b"/a/b/../c?x=../..").unwrap(), "/a/c");
    assert_eq!(normalize_path(b"/dir/").unwrap(), "/dir/");
    assert_eq!(normalize_path(b"/a%20b").unwrap(), "/a b");
    // Decoded once: %252e stays a literal "%2e" segment, not "..".
    assert_eq!(normalize_path(b"/%252e%252e/x").unwrap(), "/%2e%2e/x");
    assert_eq!(normalize_path(b"/a/..").unwrap(), "/");
    // A last `.` or `..` segment names a directory: the slash stays (so
    // `/a.txt/.` is not the file `/a.txt`).
    assert_eq!(normalize_path(b"/a.txt/.").unwrap(), "/a.txt/");
    assert_eq!(normalize_path(b"/a/%2e").unwrap(), "/a/");
    assert_eq!(normalize_path(b"/a/b/..").unwrap(), "/a/");
    assert_eq!(normalize_path(b"/a/./b").unwrap(), "/a/b");
}

#[test]
fn a_clean_path_is_copied_as_the_decoding_would_write_it() {
    // Every path the one-pass check takes is what the segment-by-segment
    // decoding makes of it; those it sends the long way are not all so.
    let paths: [&[u8]; 16] = [
        b"/",
        b"/a",
        b"/a/",
        b"/100b",
        b"/a/b.c/d",
        b"/a-b_c~d!$&'()*+,;=:@",
        b"/a.",
        b"/a..b",
        b"//",
        b"/a//b",
        b"/./a",
        b"/a/..",
        b"/.well-known/x",
        b"/.h",
        b"/a%20b",
        b"/\x80",
    ];
    for p in paths {
        let mut slow = Vec::new();
        let decoded = normalize_into(p, &mut slow);
        if is_clean(p) {
            assert_eq!(decoded, Ok(()), "{p:?}");
            assert_eq!(slow, p, "{p:?}");
        }
        assert_eq!(
            normalize_path(p).ok().map(String::into_bytes),
            decoded.ok().map(|_| slow)
        );
    }
    assert!(is_clean(b"/a/b.c/") && !is_clean(b"/a/.b") && !is_clean(b"/a//"));
}

#[test]
fn normalize_ranks_refusals_as_decoding_first_and_reuses_its_string() {
    // A bad escape anywhere outranks a `..` above the root or bad text.
    assert_eq!(normalize_path(b"/../%zz"), Err(Refusal::NotFound));
    assert_eq!(normalize_path(b"/%ff/%2f"), Err(Refusal::NotFound));
    // Text that is not UTF-8 counts even in a segment `..` removes.
    assert_eq!(normalize_path(b"/%ff/../a"), Err(Refusal::NotFound));
    assert_eq!(normalize_path(b"/../%ff"), Err(Refusal::NotFound));
    // The string given back is the next one, cleared.
    let a = normalize_path(b"/a/long/path/name.html").unwrap();
    let cap = a.capacity();
    recycle_path(a);
    let b = normalize_path(b"/b").unwrap();
    assert_eq!(b, "/b");
    assert_eq!(b.capacity(), cap);
}

#[test]
fn normalize_refuses_escapes() {
    assert_eq!(normalize_path(b"/../etc/passwd"), Err(Refusal::Forbidden));
    assert_eq!(normalize_path(b"/a/../../x"), Err(Refusal::Forbidden));
    assert_eq!(
        normalize_path(b"/%2e%2e/etc/passwd"),
        Err(Refusal::Forbidden)
    );
    assert_eq!(
        normalize_path(b"/a%2f..%2f..%2fetc"),
        Err(Refusal::NotFound)
    );
    assert_eq!(normalize_path(b"/a%2F"), Err(Refusal::NotFound));
    assert_eq!(normalize_path(b"/a%00.html"), Err(Refusal::NotFound));
    assert_eq!(normalize_path(b"/%zz"), Err(Refusal::NotFound));
    assert_eq!(normalize_path(b"/%4"), Err(Refusal::NotFound));
    assert_eq!(normalize_path(b"relative"), Err(Refusal::BadRequest));
    assert_eq!(normalize_path(b"/%ff%fe"), Err(Refusal::NotFound));
}

#[test]
fn resolve_files_dirs_and_index() {
    let d = tmpdir("resolve");
    fs::write(d.join("a.txt"), "hello").unwrap();
    fs::create_dir(d.join("sub")).unwrap();
    fs::write(d.join("sub/index.html"), "<p>").unwrap();
    fs::create_dir(d.join("empty")).unwrap();
    let mut cfg = FilesConfig::new(&d);
    match resolve(&cfg, "/a.txt").unwrap() {
        Resolved::File { path } => assert_eq!(std::fs::metadata(path).unwrap().len(), 5),
        r => panic!("{:?}", r),
    }
    match resolve(&cfg, "/sub/").unwrap() {
        Resolved::File { path, .. } => assert!(path.ends_with("sub/index.html")),
        r => panic!("{:?}", r),
    }
    match resolve(&cfg, "/sub").unwrap() {
        Resolved::AddSlash { location } => assert_eq!(location, "/sub/"),
        r => panic!("{:?}", r),
    }
    assert_eq!(resolve(&cfg, "/empty/").unwrap_err(), Refusal::Forbidden);
    assert_eq!(resolve(&cfg, "/missing").unwrap_err(), Refusal::NotFound);
    cfg.listing = true;
    assert!(matches!(
        resolve(&cfg, "/empty/").unwrap(),
        Resolved::Listing { .. }
    ));
    let _ = fs::remove_dir_all(&d);
}

#[test]
fn symlinks_out_of_root_are_refused_unless_allowed() {
    let d = tmpdir("links");
    let outside = tmpdir("links-outside");
    fs::write(outside.join("secret"), "s").unwrap();
    fs::write(d.join("inner"), "i").unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), d.join("out")).unwrap();
    std::os::unix::fs::symlink(d.join("inner"), d.join("in")).unwrap();
    let mut cfg = FilesConfig::new(&d);
    assert_eq!(resolve(&cfg, "/out").unwrap_err(), Refusal::Forbidden);
    assert!(matches!(
        resolve(&cfg, "/in").unwrap(),
        Resolved::File { .. }
    ));
    cfg.follow_symlinks = true;
    assert!(matches!(
        resolve(&cfg, "/out").unwrap(),
        Resolved::File { .. }
    ));
    let _ = fs::remove_dir_all(&d);
    let _ = fs::remove_dir_all(&outside);
}

#[test]
fn listing_escapes_names() {
    let d = tmpdir("listing");
    fs::write(d.join("<b>.txt"), "x").unwrap();
    fs::create_dir(d.join("dir one")).unwrap();
    fs::write(d.join(".hidden"), "x").unwrap();
    let html = read_dir_listing(&d, "/").unwrap();
    assert!(html.contains("&lt;b&gt;.txt"));
    assert!(html.contains("href=\"dir%20one/\""));
    assert!(!html.contains(".hidden"));
    assert!(!html.contains("<b>"));
    let _ = fs::remove_dir_all(&d);
}

#[test]
fn content_types() {
    assert_eq!(
        content_type(Path::new("a.html")),
        "text/html; charset=utf-8"
    );
    assert_eq!(content_type(Path::new("a.png")), "image/png");
    assert_eq!(
        content_type(Path::new("a.unknownext")),
        "application/octet-stream"
    );
}

fn v() -> Validators {
    Validators {
        etag: "\"5f5e100-64\"".into(),
        last_modified: "Sat, 03 Mar 1973 09:46:40 GMT".into(),
        mtime: UNIX_EPOCH + Duration::from_secs(100_000_000),
        len: 100,
    }
}

#[test]
fn conditionals() {
    let v = v();
    let lm = httpdate::fmt_http_date(v.mtime);
    assert_eq!(lm, v.last_modified);
    let c = |inm, ims| Conditions {
        if_none_match: inm,
        if_modified_since: ims,
        ..Default::default()
    };
    assert_eq!(
        decide(&c(Some("\"5f5e100-64\""), None), &v),
        Decision::NotModified
    );
    assert_eq!(
        decide(&c(Some("W/\"5f5e100-64\""), None), &v),
        Decision::NotModified
    );
    assert_eq!(
        decide(&c(Some("\"x\", \"5f5e100-64\""), None), &v),
        Decision::NotModified
    );
    assert_eq!(decide(&c(Some("*"), None), &v), Decision::NotModified);
    assert_eq!(decide(&c(Some("\"other\""), None), &v), Decision::Full);
    assert_eq!(decide(&c(None, Some(&lm)), &v), Decision::NotModified);
    // If-None-Match wins over If-Modified-Since.
    assert_eq!(decide(&c(Some("\"other\""), Some(&lm)), &v), Decision::Full);
    let earlier = httpdate::fmt_http_date(v.mtime - Duration::from_secs(1));
    assert_eq!(decide(&c(None, Some(&earlier)), &v), Decision::Full);
    assert_eq!(decide(&c(None, Some("garbage")), &v), Decision::Full);
}

#[test]
fn ranges() {
    assert_eq!(
        parse_range("bytes=0-9", 100),
        Decision::Partial { start: 0, end: 9 }
    );
    assert_eq!(
        parse_range("bytes=90-", 100),
        Decision::Partial { start: 90, end: 99 }
    );
    assert_eq!(
        parse_range("bytes=-10", 100),
        Decision::Partial { start: 90, end: 99 }
    );
    assert_eq!(
        parse_range("bytes=-1000", 100),
        Decision::Partial { start: 0, end: 99 }
    );
    assert_eq!(
        parse_range("bytes=50-1000", 100),
        Decision::Partial { start: 50, end: 99 }
    );
    assert_eq!(parse_range("bytes=100-", 100), Decision::Unsatisfiable);
    assert_eq!(parse_range("bytes=-0", 100), Decision::Unsatisfiable);
    assert_eq!(parse_range("bytes=0-0", 0), Decision::Unsatisfiable);
    assert_eq!(parse_range("bytes=0-1,5-6", 100), Decision::Full);
    assert_eq!(parse_range("items=0-1", 100), Decision::Full);
    assert_eq!(parse_range("bytes=9-3", 100), Decision::Full);
    assert_eq!(parse_range("bytes=x-3", 100), Decision::Full);
    assert_eq!(
        parse_range("bytes=99999999999999999999999-", 100),
        Decision::Unsatisfiable
    );
    let v = v();
    let r = |ir| Conditions {
        range: Some("bytes=0-0"),
        if_range: ir,
        ..Default::default()
    };
    assert_eq!(decide(&r(None), &v), Decision::Partial { start: 0, end: 0 });
    assert_eq!(
        decide(&r(Some("\"5f5e100-64\"")), &v),
        Decision::Partial { start: 0, end: 0 }
    );
    assert_eq!(decide(&r(Some("\"stale\"")), &v), Decision::Full);
    let lm = httpdate::fmt_http_date(v.mtime);
    assert_eq!(
        decide(&r(Some(&lm)), &v),
        Decision::Partial { start: 0, end: 0 }
    );
}

#[test]
fn dotfiles_are_404_unless_allowed_but_well_known_is_served() {
    let d = tmpdir("dot");
    fs::create_dir_all(d.join(".git")).unwrap();
    fs::write(d.join(".git/config"), "[core]").unwrap();
    fs::write(d.join(".env"), "SECRET=1").unwrap();
    fs::create_dir_all(d.join("sub/.hidden")).unwrap();
    fs::write(d.join("sub/.hidden/x"), "x").unwrap();
    fs::create_dir_all(d.join(".well-known/acme-challenge")).unwrap();
    fs::write(d.join(".well-known/acme-challenge/tok"), "tok").unwrap();
    fs::write(d.join("visible"), "v").unwrap();
    let mut cfg = FilesConfig::new(&d);
    cfg.listing = true;
    for p in [
        "/.git/config",
        "/.git/",
        "/.env",
        "/sub/.hidden/x",
        "/sub/.hidden/",
    ] {
        assert_eq!(resolve(&cfg, p).unwrap_err(), Refusal::NotFound, "{p}");
    }
    assert!(matches!(
        resolve(&cfg, "/.well-known/acme-challenge/tok").unwrap(),
        Resolved::File { .. }
    ));
    // Only a top-level .well-known is exempt.
    assert!(resolve(&cfg, "/sub/.well-known").is_err());
    let list = read_dir_listing(&d, "/").unwrap();
    assert!(list.contains("visible") && !list.contains(".git") && !list.contains(".env"));
    cfg.dotfiles = true;
    assert!(matches!(
        resolve(&cfg, "/.git/config").unwrap(),
        Resolved::File { .. }
    ));
    assert!(matches!(
        resolve(&cfg, "/.env").unwrap(),
        Resolved::File { .. }
    ));
    let _ = fs::remove_dir_all(&d);
}

#[test]
fn conditions_take_the_first_field_of_each_name_in_one_pass() {
    let raw = b"GET /f HTTP/1.1\r\nHost: a\r\nRANGE: bytes=0-1\r\nIf-None-Match: \"x\"\r\n\
        If-Range: \xff\r\nrange: bytes=5-6\r\nIf-Range: \"y\"\r\nX-Range: no\r\n\r\n";
    let limits = crate::http1::Limits::default();
    let Ok(crate::http1::Status::Complete(head)) = crate::http1::parse_request(raw, &limits) else {
        panic!("not parsed");
    };
    let c = Conditions::of_request(raw, &head.headers);
    // What a lookup by name finds: the first field of each name, and
    // none when that one is not UTF-8.
    let by_name = |n: &str| {
        head.header(raw, n)
            .and_then(|v| std::str::from_utf8(v).ok())
    };
    assert_eq!(c.range, Some("bytes=0-1"));
    assert_eq!(c.range, by_name("range"));
    assert_eq!(c.if_none_match, Some("\"x\""));
    assert_eq!(c.if_range, None);
    assert_eq!(c.if_range, by_name("if-range"));
    assert_eq!(c.if_modified_since, None);
}

proptest::proptest! {
    /// `clean_len` is `is_clean` over `path_of`, in one pass, and a path
    /// it calls clean is what the decoding makes of it, byte for byte.
    #[test]
    fn clean_len_agrees_with_normalize_path(t in proptest::collection::vec(
        proptest::prop_oneof![
            proptest::strategy::Just(b'/'),
            proptest::strategy::Just(b'.'),
            proptest::strategy::Just(b'%'),
            proptest::strategy::Just(b'?'),
            proptest::strategy::Just(b'#'),
            proptest::strategy::Just(b'a'),
            proptest::strategy::Just(b'2'),
            proptest::strategy::Just(b'F'),
            proptest::arbitrary::any::<u8>(),
        ],
        0..40,
    )) {
        let path = path_of(&t);
        let old = (path.first() == Some(&b'/') && is_clean(path)).then_some(path.len());
        let got = clean_len(&t);
        proptest::prop_assert_eq!(got, old, "{:?}", t);
        if let Some(n) = got {
            let mut out = Vec::new();
            proptest::prop_assert_eq!(normalize_into(path, &mut out), Ok(()));
            proptest::prop_assert_eq!(&out[..], &t[..n]);
            let made = normalize_path(&t);
            proptest::prop_assert_eq!(made.as_deref().map(str::as_bytes), Ok(&t[..n]));
        }
    }
}

#[test]
fn clean_len_stops_at_the_query_and_refuses_what_decoding_changes() {
    assert_eq!(clean_len(b"/100b"), Some(5));
    assert_eq!(clean_len(b"/a/b.txt?x=/../%00#f"), Some(8));
    assert_eq!(clean_len(b"/a#x"), Some(2));
    assert_eq!(clean_len(b"/"), Some(1));
    for t in [
        &b""[..],
        b"?/a",
        b"a/b",
        b"/a//b",
        b"/a/./b",
        b"/a/../b",
        b"/.x",
        b"/a%20",
        b"/\xc3\xa9",
        b"/a\0",
    ] {
        assert_eq!(clean_len(t), None, "{:?}", String::from_utf8_lossy(t));
    }
}
