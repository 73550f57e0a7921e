//! Serving a directory with no configuration (`ebb` in a checkout): the
//! repository's `.git/` and other dot-files are not served or listed.

mod common;

use common::*;

#[test]
fn default_mode_hides_dotfiles_and_a_config_may_allow_them() {
    let d = scratch("dotfiles");
    std::fs::create_dir_all(d.join(".git")).unwrap();
    std::fs::write(d.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(d.join(".env"), "SECRET=1\n").unwrap();
    std::fs::write(d.join("README"), "readme\n").unwrap();
    std::fs::create_dir_all(d.join(".well-known")).unwrap();
    std::fs::write(d.join(".well-known/security.txt"), "Contact: x\n").unwrap();
    let e = Ebb::start_args(&["--bind", "127.0.0.1:0"], d.clone());
    for p in [
        "/.git/config",
        "/.git/",
        "/.env",
        "/%2egit/config",
        "/a/../.env",
    ] {
        assert_eq!(get(e.addr(), p).status, 404, "{p}");
    }
    assert_eq!(get(e.addr(), "/README").text(), "readme\n");
    assert_eq!(
        get(e.addr(), "/.well-known/security.txt").text(),
        "Contact: x\n"
    );
    let listing = get(e.addr(), "/");
    assert_eq!(listing.status, 200);
    let body = listing.text();
    assert!(body.contains("README"), "{body}");
    assert!(!body.contains(".git") && !body.contains(".env"), "{body}");
    // A configuration may serve them.
    let d2 = scratch("dotfiles-allow");
    std::fs::write(d2.join(".env"), "SECRET=1\n").unwrap();
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n\
         frontend fe\n    bind 127.0.0.1:0\n    default_backend files\n\
         backend files\n    serve-files {} dotfiles allow\n",
        d2.display()
    );
    let e2 = Ebb::start(&cfg);
    assert_eq!(get(e2.addr(), "/.env").text(), "SECRET=1\n");
    drop(e);
}
