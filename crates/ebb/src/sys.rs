//! The one place in `ebb` that calls the C library directly. Everything else
//! in the crate is `unsafe`-free; each call here is a thin wrapper that turns
//! `-1` into an `io::Error`, with a `SAFETY:` note on what it relies on.
//!
//! - signals: block the process's stop/reload signals in every thread and
//!   take them synchronously in one thread with `sigwait` (no async-signal
//!   handler, so no restriction on what the reaction may do);
//! - `TCP_DEFER_ACCEPT`, `TCP_FASTOPEN`, `TCP_FASTOPEN_CONNECT` and
//!   `TCP_REPAIR`, which socket2 does not set;
//! - `setns`, to make a listener's socket in another network namespace
//!   (`bind ... namespace`);
//! - `sendfile` for static files, `pipe2` and `splice` for tcp-mode
//!   forwarding (`option splice-*`);
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

/// A pipe for `splice`: (read end, write end), both non-blocking and
/// closed on exec.
pub fn pipe_nb() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds: [libc::c_int; 2] = [-1, -1];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors that nothing
    // else owns; each is wrapped once.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// Pipes the process holds for splicing (`show info`'s `PipesUsed`).
static PIPES_USED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts a splice pipe taken (`true`) or closed (`false`).
pub fn count_pipe(open: bool) {
    if open {
        PIPES_USED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    } else {
        PIPES_USED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How many splice pipes are open now.
pub fn pipes_used() -> u64 {
    PIPES_USED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Moves up to `len` bytes from `from` to `to` in the kernel, one of them
/// a pipe (`splice(2)`, non-blocking, pages moved rather than copied where
/// the kernel can). `Ok(0)`: the source is at its end.
pub fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: no pointers are passed (null offsets: both ends are streams);
    // the descriptors are the caller's and open for the call, and a bad one
    // is reported as EBADF/EINVAL, not undefined behaviour.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The open-files limit (soft, hard) the process had before ebb first
/// changed it (HAProxy's `rlim_fd_cur_at_boot`, `rlim_fd_max_at_boot`:
/// an unlimited hard limit is noted as the soft one): `ulimit-n` keeps
/// the hard limit at least there (see [`set_nofile`]).
static NOFILE_AT_BOOT: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

/// Notes the open-files limit before its first change.
fn note_boot_nofile() {
    NOFILE_AT_BOOT.get_or_init(|| match nofile() {
        Ok((cur, max)) if max == libc::RLIM_INFINITY => (cur, cur),
        Ok(l) => l,
        Err(_) => (0, 0),
    });
}

/// Raises the soft limit on open files towards `want` (capped by the hard
/// limit) and returns the soft limit now in force.
pub fn raise_nofile(want: u64) -> io::Result<u64> {
    note_boot_nofile();
    let (cur, max) = nofile()?;
    if cur >= want {
        return Ok(cur);
    }
    let lim = libc::rlimit {
        rlim_cur: want.min(max),
        rlim_max: max,
    };
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

/// A stop signal came (set before a `grace` delay): see
/// `drain::announce`.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks the process as stopping (`drain::announce`).
pub fn set_stopping() {
    STOPPING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the process is stopping (HAProxy's `stopping`).
pub fn stopping() -> bool {
    STOPPING.load(std::sync::atomic::Ordering::Relaxed)
}

/// This process's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no argument and cannot fail.
    unsafe { libc::geteuid() }
}

/// A descriptor that becomes readable when child `pid` exits (Linux's
/// `pidfd_open`), to wait for it with a time limit ([`poll_readable`]).
pub fn pidfd_open(pid: u32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: pidfd_open takes a pid and flags, no pointer; it returns a
    // new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as RawFd) })
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

/// The local time zone's abbreviation at `t` (seconds since the epoch),
/// as `strftime`'s `%Z` writes it ("UTC", "CET"...): email alerts' `Date`.
pub fn zone_name(t: i64) -> String {
    let tt = t as libc::time_t;
    // SAFETY: tm is plain data filled in by localtime_r.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is the
    // thread-safe variant.
    let r = unsafe { libc::localtime_r(&tt, &mut tm) };
    if r.is_null() || tm.tm_zone.is_null() {
        return String::new();
    }
    // SAFETY: a non-null tm_zone points at a NUL-terminated name in the
    // C library's time zone data, which lives as long as the process.
    unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }
        .to_string_lossy()
        .into_owned()
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

/// `ulimit-n N`, as HAProxy 2.6.12: the soft limit becomes N and the
/// hard one the larger of N and the one ebb started with, but only when
/// that raises either (a limit already higher is kept: nothing is ever
/// lowered). An error is HAProxy's "Cannot raise FD limit" (its default
/// `strict-limits` then refuses to start); returns the soft limit in
/// force.
pub fn set_nofile(n: u64) -> io::Result<u64> {
    note_boot_nofile();
    let (cur, max) = nofile()?;
    let boot_max = NOFILE_AT_BOOT.get().map_or(0, |&(_, m)| m);
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n.max(boot_max),
    };
    if cur >= lim.rlim_cur && max >= lim.rlim_max {
        return Ok(cur);
    }
    // SAFETY: `lim` is initialised and valid.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n)
}

/// The open-files limit in force (soft, hard).
pub fn nofile() -> io::Result<(u64, u64)> {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `now` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((now.rlim_cur, now.rlim_max))
}

/// Without `insecure-setuid-wanted`: this thread and those it starts
/// after (and the processes they run) may gain no privilege by `execve`
/// (`PR_SET_NO_NEW_PRIVS`), as HAProxy 2.6's workers.
pub fn no_new_privs() -> io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `set-dumpable`: the file-size and core-size limits raised to unlimited
/// (soft and hard) and the process marked dumpable again (setuid cleared
/// the flag), as HAProxy does after dropping privileges. Returns what
/// failed, each a warning.
pub fn make_dumpable() -> Vec<String> {
    let mut failed = Vec::new();
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    for (res, what) in [
        (libc::RLIMIT_FSIZE, "cannot raise the maximum file size"),
        (libc::RLIMIT_CORE, "cannot raise the core dump size"),
    ] {
        // SAFETY: `lim` is initialised and valid.
        if unsafe { libc::setrlimit(res, &lim) } != 0 {
            failed.push(format!("{what}: {}", io::Error::last_os_error()));
        }
    }
    // SAFETY: PR_SET_DUMPABLE takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        failed.push(format!(
            "cannot set the dumpable flag, no core will be dumped: {}",
            io::Error::last_os_error()
        ));
    }
    failed
}

/// Master-worker: the master's signals (stop, reload, a worker's exit).
pub const MASTER_SIGNALS: [i32; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGHUP,
    libc::SIGCHLD,
];

/// A non-blocking, close-on-exec `signalfd` for `sigs` (which must be
/// blocked): the master polls it beside its sockets.
pub fn signalfd(sigs: &[i32]) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let set = sigset(sigs)?;
    // SAFETY: `set` is initialised; -1 asks for a new descriptor.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Reads one signal from a [`signalfd`]; `None` when none is pending.
pub fn read_signal(fd: RawFd) -> io::Result<Option<i32>> {
    // SAFETY: signalfd_siginfo is plain data.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let len = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: `info` is a writable buffer of `len` bytes.
    let n = unsafe { libc::read(fd, (&mut info as *mut libc::signalfd_siginfo).cast(), len) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok((n as usize == len).then_some(info.ssi_signo as i32))
}

/// Waits until one of `fds` is readable (or hung up), at most `timeout_ms`
/// (-1: no limit). Returns which are.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let fds: Vec<(RawFd, bool)> = fds.iter().map(|&fd| (fd, false)).collect();
    poll_fds(&fds, timeout_ms)
}

/// Waits until one of `fds` is ready, at most `timeout_ms` (-1: no
/// limit): each `(fd, write)` waits to be writable when `write`, readable
/// otherwise (a hang-up or an error counts as ready). Returns which are.
pub fn poll_fds(fds: &[(RawFd, bool)], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let fds: Vec<(RawFd, i16)> = fds
        .iter()
        .map(|&(fd, write)| (fd, if write { libc::POLLOUT } else { libc::POLLIN }))
        .collect();
    poll_events(&fds, timeout_ms)
}

/// As [`poll_fds`], each descriptor with the events it waits for
/// (`0`: only its hang-up or an error; a negative descriptor is left
/// out).
pub fn poll_events(fds: &[(RawFd, i16)], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of `p.len()` pollfd structures.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents != 0).collect())
}

/// Reaps one exited child without waiting: (pid, exit code, or 128 +
/// the signal that killed it).
pub fn reap_child() -> Option<(u32, i32)> {
    let mut st: libc::c_int = 0;
    // SAFETY: `st` is a valid out-pointer; WNOHANG never blocks.
    let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
    if pid <= 0 {
        return None;
    }
    let code = if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else if libc::WIFSIGNALED(st) {
        128 + libc::WTERMSIG(st)
    } else {
        0
    };
    Some((pid as u32, code))
}

/// Sends `sig` to process `pid`.
pub fn kill(pid: u32, sig: i32) -> io::Result<()> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if pid <= 0 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill(2) takes no pointer; a positive pid names one process.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets or clears close-on-exec on a descriptor this process owns.
pub fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFD only reads the flags of `fd`.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let new = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    // SAFETY: F_SETFD sets the flags of an open descriptor.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, new) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to send `sig` to this process when its parent dies (a
/// worker whose master is gone stops).
pub fn parent_death_signal(sig: i32) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number, no pointer.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unblocks `sigs` in the calling thread (a worker forked by the master
/// takes back the signals only the master waits for).
pub fn unblock_signals(sigs: &[i32]) -> io::Result<()> {
    let set = sigset(sigs)?;
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Sends `data` with descriptors `fds` (SCM_RIGHTS) on the UNIX stream
/// socket `sock`, blocking until sent.
pub fn send_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    let space = if fds.is_empty() {
        0
    } else {
        // SAFETY: CMSG_SPACE is arithmetic on a length.
        unsafe { libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) as usize }
    };
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below stays valid
    // for the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds one header of `space` bytes.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(c),
                std::mem::size_of_val(fds),
            );
        }
    }
    loop {
        // SAFETY: `msg` and what it points to are valid for the call.
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives bytes into `buf` and up to `max_fds` descriptors (SCM_RIGHTS)
/// from the UNIX stream socket `sock`; the descriptors are close-on-exec.
pub fn recv_fds(
    sock: RawFd,
    buf: &mut [u8],
    max_fds: usize,
) -> io::Result<(usize, Vec<std::os::fd::OwnedFd>)> {
    use std::os::fd::FromRawFd;
    // SAFETY: CMSG_SPACE is arithmetic on a length.
    let space = unsafe { libc::CMSG_SPACE((max_fds * std::mem::size_of::<RawFd>()) as u32) };
    let mut cbuf = vec![0u64; (space as usize).div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; its pointers stay valid for the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: `msg` and its buffers are valid and writable.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg`'s control part; CMSG_FIRSTHDR and
    // CMSG_NXTHDR walk it within msg_controllen, and each SCM_RIGHTS
    // payload holds whole descriptors this process now owns.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let count = len / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c);
                for i in 0..count {
                    let mut fd: RawFd = -1;
                    std::ptr::copy_nonoverlapping(
                        data.add(i * std::mem::size_of::<RawFd>()),
                        (&mut fd as *mut RawFd).cast::<u8>(),
                        std::mem::size_of::<RawFd>(),
                    );
                    fds.push(std::os::fd::OwnedFd::from_raw_fd(fd));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, fds))
}

/// The address a client connected to, as HAProxy reads it: the socket's
/// own address, or for IPv4 the destination before netfilter's
/// REDIRECT/DNAT or TPROXY changed it (`SO_ORIGINAL_DST`, which fails
/// without a NAT entry: the socket's address stands then).
pub fn original_dst(s: &std::net::TcpStream) -> Option<std::net::SocketAddr> {
    let local = s.local_addr().ok()?;
    if !local.is_ipv4() {
        return Some(local);
    }
    let orig = socket2::SockRef::from(s)
        .original_dst_v4()
        .ok()
        .and_then(|a| a.as_socket());
    Some(orig.unwrap_or(local))
}

/// Binds the calling thread to the CPUs whose bits are set in `cpus`
/// (bit `n % 64` of word `n / 64`: CPU `n`), as `cpu-map` asks.
pub fn bind_thread_to_cpus(cpus: &[u64; 16]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO initialises it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t.
    unsafe { libc::CPU_ZERO(&mut set) };
    for cpu in (0..1024).filter(|c| cpus[c / 64] & (1u64 << (c % 64)) != 0) {
        // SAFETY: `cpu` is below 1024, inside cpu_set_t's 1024 bits.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 names the calling thread; `set` is initialised and its
    // size is passed with it.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How many connections wait in a listening TCP socket's accept queue
/// (`TCP_INFO` of a listener reports it in `tcpi_unacked`); `None` when
/// `fd` is no TCP listener (a UNIX socket, or a kernel that does not say).
///
/// A listener asks before accepting so that it never calls `accept4` on
/// an empty queue: the kernel allocates a socket, a file and a dentry for
/// every `accept4` before it looks at the queue, and frees them again
/// (through RCU) when it finds it empty, which costs more than the
/// connection's own `accept4`. The listener branch of `tcp_get_info`
/// takes no lock.
pub fn accept_queue_len(fd: RawFd) -> Option<u32> {
    // The kernel's TCP_LISTEN state (include/net/tcp_states.h), which the
    // libc crate does not name.
    const TCP_STATE_LISTEN: u8 = 10;
    let info = tcp_info(fd)?;
    (info.tcpi_state == TCP_STATE_LISTEN).then_some(info.tcpi_unacked)
}

/// `TCP_INFO` of a TCP socket, when the kernel's answer reaches
/// `tcpi_reordering` (every field up to it); `None` for another socket.
fn tcp_info(fd: RawFd) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain data, filled in by getsockopt.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a writable buffer of `len` bytes and `len` a valid
    // in/out pointer; a descriptor that is not a TCP socket gives an error.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    // The fields' end: a shorter answer (an old kernel) does not hold them.
    let need = std::mem::offset_of!(libc::tcp_info, tcpi_reordering) + 4;
    (rc == 0 && (len as usize) >= need).then_some(info)
}

/// What HAProxy's `fc_rtt`, `fc_rttvar`, `fc_unacked`, `fc_sacked`,
/// `fc_lost`, `fc_retrans`, `fc_fackets` and `fc_reordering` read of a
/// connection's `TCP_INFO` (times in microseconds).
#[derive(Clone, Copy, Debug)]
pub struct TcpInfo {
    pub rtt: u32,
    pub rttvar: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub reordering: u32,
}

/// The [`TcpInfo`] of a connected TCP socket; `None` for another one.
pub fn conn_tcp_info(fd: RawFd) -> Option<TcpInfo> {
    let i = tcp_info(fd)?;
    Some(TcpInfo {
        rtt: i.tcpi_rtt,
        rttvar: i.tcpi_rttvar,
        unacked: i.tcpi_unacked,
        sacked: i.tcpi_sacked,
        lost: i.tcpi_lost,
        retrans: i.tcpi_retrans,
        fackets: i.tcpi_fackets,
        reordering: i.tcpi_reordering,
    })
}

/// `bind ... defer-accept`: the kernel hands a connection to `accept`
/// only once its first bytes arrived, or after about `secs` seconds
/// (`TCP_DEFER_ACCEPT`; 0 turns it off).
pub fn set_defer_accept(fd: RawFd, secs: i32) -> io::Result<()> {
    set_tcp_int(fd, libc::TCP_DEFER_ACCEPT, secs)
}

/// `silent-drop`: puts the socket in repair mode (`TCP_REPAIR`, needs
/// `CAP_NET_ADMIN`), so that its close sends nothing, neither FIN nor
/// reset (HAProxy's trick; writes fail in that mode).
pub fn set_tcp_repair(fd: RawFd) -> io::Result<()> {
    set_tcp_int(fd, libc::TCP_REPAIR, 1)
}

/// An `IPPROTO_TCP` option of `fd` whose value is an int.
fn set_tcp_int(fd: RawFd, opt: libc::c_int, v: i32) -> io::Result<()> {
    // SAFETY: the option value is a valid c_int for the call's duration.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An `IPPROTO_TCP` option of `fd` whose value is an int, read.
fn get_tcp_int(fd: RawFd, opt: libc::c_int) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` is a writable c_int and `len` its size, both valid for
    // the call's duration.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            opt,
            (&mut v as *mut i32).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// `bind ... tfo`: TCP fast open on a listener (`TCP_FASTOPEN`), with a
/// queue of `qlen` pending fast-open requests (0 turns it off).
pub fn set_tcp_fastopen(fd: RawFd, qlen: i32) -> io::Result<()> {
    set_tcp_int(fd, libc::TCP_FASTOPEN, qlen)
}

/// A listener's fast-open queue length (0: fast open is off).
pub fn tcp_fastopen(fd: RawFd) -> io::Result<i32> {
    get_tcp_int(fd, libc::TCP_FASTOPEN)
}

/// `bind ... namespace NAME`: a socket made in the network namespace
/// whose file is `ns` (`/var/run/netns/NAME`), as HAProxy's
/// `my_socketat`: the calling thread enters it for the `socket` call
/// only and goes back to its own (a socket stays in the namespace it was
/// made in; its bind and listen then happen there).
pub fn socket_in_netns(
    ns: &std::path::Path,
    domain: libc::c_int,
    ty: libc::c_int,
    proto: libc::c_int,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let target = std::fs::File::open(ns).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot open namespace {}: {e}", ns.display()),
        )
    })?;
    let own = std::fs::File::open("/proc/thread-self/ns/net")?;
    // SAFETY: setns takes an open descriptor and a namespace type.
    if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("cannot enter namespace {}: {e}", ns.display()),
        ));
    }
    // SAFETY: socket takes plain integers.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    let made = if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: `fd` was just returned by socket and nothing else owns it.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    };
    // SAFETY: as above, with the thread's own namespace.
    if unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        // The thread would make every later socket in the wrong
        // namespace: that must stop the start.
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("cannot leave namespace {}: {e}", ns.display()),
        ));
    }
    made
}

/// `server ... tfo`: TCP fast open on this socket's coming `connect`
/// (`TCP_FASTOPEN_CONNECT`, Linux 4.11): with a cookie of the server at
/// hand the kernel holds the SYN back until the first write, which it
/// carries; without one it asks the server for one on a plain SYN.
pub fn set_tcp_fastopen_connect(fd: RawFd) -> io::Result<()> {
    set_tcp_int(fd, libc::TCP_FASTOPEN_CONNECT, 1)
}

/// A system call made directly with the `syscall` instruction, without
/// the C library's wrapper: glibc's `recv` and `send` are cancellation
/// points, and their wrappers switch the thread's cancellation state on
/// and off around every call (about 45 instructions each, measured under
/// callgrind, for a thread that is never cancelled). Returns the kernel's
/// result: a count, or `-errno`.
///
/// # Safety
///
/// `nr` and `a` must make a call whose contract holds (pointers valid
/// for what the call does with them, for its duration).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[inline(always)]
unsafe fn raw_syscall6(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 Linux system-call convention (number in rax,
    // arguments in rdi, rsi, rdx, r10, r8, r9; rcx and r11 clobbered,
    // result in rax); the caller vouches for the arguments. The kernel
    // touches no memory but what they point at, and neither this
    // thread's stack nor other registers.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The result of a raw call as the standard library gives it.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[inline(always)]
fn raw_result(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::from_raw_os_error(-r as i32))
    } else {
        Ok(r as usize)
    }
}

/// `recv(fd, buf, 0)`: what `TcpStream::read` does, without glibc's
/// cancellation wrapper (see [`raw_syscall6`]).
#[inline]
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        let a = [fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0];
        // SAFETY: recvfrom(fd, buf, len, 0, NULL, NULL): `buf` is valid
        // for `len` bytes of writing for the call's duration.
        raw_result(unsafe { raw_syscall6(libc::SYS_recvfrom, a) })
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        // SAFETY: `buf` is valid for `len` bytes of writing.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// `send(fd, buf, MSG_NOSIGNAL)`: what `TcpStream::write` does, without
/// glibc's cancellation wrapper (see [`raw_syscall6`]).
#[inline]
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        let flags = libc::MSG_NOSIGNAL as usize;
        let a = [fd as usize, buf.as_ptr() as usize, buf.len(), flags, 0, 0];
        // SAFETY: sendto(fd, buf, len, flags, NULL, 0): `buf` is valid for
        // `len` bytes of reading for the call's duration.
        raw_result(unsafe { raw_syscall6(libc::SYS_sendto, a) })
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        // SAFETY: `buf` is valid for `len` bytes of reading.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}
