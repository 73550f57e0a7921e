//! The one place in `ebb` that calls the C library directly. Everything else
//! in the crate is `unsafe`-free; each call here is a thin wrapper that turns
//! `-1` into an `io::Error`, with a `SAFETY:` note on what it relies on.
//!
//! - signals: block the process's stop/reload signals in every thread and
//!   take them synchronously in one thread with `sigwait` (no async-signal
//!   handler, so no restriction on what the reaction may do);
//! - `sendfile` for static files;
//! - the open-files limit, raised to what `maxconn` needs;
//! - inherited descriptors (`fd@N`, systemd), `daemon` (fork, setsid) and
//!   `user`/`group` (name lookups, dropping privileges after binding).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

/// The signals ebb reacts to: stop (TERM, INT, USR1), reload (HUP).
pub const SIGNALS: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGUSR1, libc::SIGHUP];

fn sigset(sigs: &[i32]) -> io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset_t.
    if unsafe { libc::sigemptyset(&mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    for &s in sigs {
        // SAFETY: `set` was initialised by sigemptyset; `s` is a signal number
        // (an invalid one is reported as EINVAL, not undefined behaviour).
        if unsafe { libc::sigaddset(&mut set, s) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(set)
}

/// Blocks `sigs` in the calling thread. Threads spawned afterwards inherit
/// the mask, so call it first thing in `main`.
pub fn block_signals(sigs: &[i32]) -> io::Result<()> {
    let set = sigset(sigs)?;
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Waits for one of `sigs` (which must be blocked) and returns its number.
pub fn wait_signal(sigs: &[i32]) -> io::Result<i32> {
    let set = sigset(sigs)?;
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is initialised and `sig` is a valid out-pointer.
    let rc = unsafe { libc::sigwait(&set, &mut sig) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(sig)
}

/// Copies up to `count` bytes of `in_fd` from `*offset` to the socket
/// `out_fd` in the kernel; advances `*offset` by what was sent.
pub fn sendfile(out_fd: RawFd, in_fd: RawFd, offset: &mut u64, count: usize) -> io::Result<usize> {
    let mut off =
        i64::try_from(*offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both fds are owned by the caller and open for the call's
    // duration; `off` is a valid in/out pointer.
    let n = unsafe { libc::sendfile(out_fd, in_fd, &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off as u64;
    Ok(n as usize)
}

/// Raises the soft limit on open files towards `want` (capped by the hard
/// limit) and returns the soft limit now in force.
pub fn raise_nofile(want: u64) -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur >= want {
        return Ok(lim.rlim_cur);
    }
    lim.rlim_cur = want.min(lim.rlim_max);
    // SAFETY: `lim` is initialised and valid.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim.rlim_cur)
}

/// This process's id.
pub fn pid() -> u32 {
    std::process::id()
}

/// Descriptors already taken by [`take_inherited_fd`]: each may be owned
/// once, or two owners would close it twice.
static TAKEN_FDS: std::sync::Mutex<Vec<RawFd>> = std::sync::Mutex::new(Vec::new());

/// Takes ownership of a descriptor this process inherited open (`fd@N`,
/// systemd's `LISTEN_FDS`). Checks that it is open, marks it close-on-exec
/// and refuses to hand out the same number twice.
pub fn take_inherited_fd(fd: RawFd) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    let mut taken = TAKEN_FDS.lock().unwrap_or_else(|e| e.into_inner());
    if taken.contains(&fd) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "this descriptor is already used by another line",
        ));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; an unused number
    // gives EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sets FD_CLOEXEC on an open descriptor (checked just above).
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    taken.push(fd);
    // SAFETY: the descriptor is open (F_GETFD succeeded), nothing else in
    // this process owns it: it was inherited, and TAKEN_FDS guarantees it
    // is wrapped only once.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Forks: the parent gets `Some(child pid)`, the child `None`. Call it
/// only while the process has a single thread (before the scheduler and
/// pools start), as `daemon` / `-D` do.
pub fn fork() -> io::Result<Option<u32>> {
    // SAFETY: called while the process is single-threaded, so the child
    // holds no lock another thread had taken; both sides go on normally.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid as u32)),
    }
}

/// Starts a new session (detaches from the controlling terminal).
pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no pointer; failure is reported by -1.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Looks up a user name: `(uid, primary gid)`, `None` if unknown.
pub fn user_by_name(name: &str) -> io::Result<Option<(u32, u32)>> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in user name"))?;
    let mut buf = vec![0u8; 16384];
    // SAFETY: passwd is plain data, filled in by getpwnam_r.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf's length is passed.
    let rc = unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut res,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok((!res.is_null()).then_some((pw.pw_uid, pw.pw_gid)))
}

/// Looks up a group name, `None` if unknown.
pub fn group_by_name(name: &str) -> io::Result<Option<u32>> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in group name"))?;
    let mut buf = vec![0u8; 65536];
    // SAFETY: group is plain data, filled in by getgrnam_r.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf's length is passed.
    let rc = unsafe {
        libc::getgrnam_r(
            c.as_ptr(),
            &mut gr,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut res,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok((!res.is_null()).then_some(gr.gr_gid))
}

/// Drops privileges for good: supplementary groups to none, then the
/// group, then the user (in that order: after setuid, setgid is denied).
pub fn drop_privileges(uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    if let Some(g) = gid {
        // SAFETY: a zero-length list with a null pointer is allowed.
        if unsafe { libc::setgroups(0, std::ptr::null()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: setgid takes no pointer.
        if unsafe { libc::setgid(g) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    if let Some(u) = uid {
        // SAFETY: setuid takes no pointer.
        if unsafe { libc::setuid(u) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The local time zone's offset from UTC, in seconds, at `t` (seconds
/// since the epoch): what syslog headers stamp, as HAProxy's do.
pub fn utc_offset(t: i64) -> i32 {
    let tt = t as libc::time_t;
    // SAFETY: tm is plain data filled in by localtime_r.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is the
    // thread-safe variant.
    let r = unsafe { libc::localtime_r(&tt, &mut tm) };
    if r.is_null() {
        return 0;
    }
    tm.tm_gmtoff as i32
}

/// Points standard input, output and error at `/dev/null`, as a daemon
/// does once detached: a caller reading ebb's output through a pipe sees
/// its end, and a closed terminal cannot fail a write.
pub fn stdio_to_devnull() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in 0..=2 {
        // SAFETY: dup2 onto 0..2 replaces those descriptors atomically;
        // `null` stays open for the duration of the call.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sets the open-files limit to exactly `n` (soft and hard, as HAProxy's
/// `ulimit-n`; raising the hard limit needs privileges).
pub fn set_nofile(n: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: `lim` is initialised and valid.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
