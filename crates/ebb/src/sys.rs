//! The one place in `ebb` that calls the C library directly. Everything else
//! in the crate is `unsafe`-free; each call here is a thin wrapper that turns
//! `-1` into an `io::Error`, with a `SAFETY:` note on what it relies on.
//!
//! - signals: block the process's stop/reload signals in every thread and
//!   take them synchronously in one thread with `sigwait` (no async-signal
//!   handler, so no restriction on what the reaction may do);
//! - `sendfile` for static files;
//! - the open-files limit, raised to what `maxconn` needs.
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

/// Sends a signal to this process (tests and the CLI's `shutdown`).
pub fn signal_self(sig: i32) -> io::Result<()> {
    // SAFETY: kill(2) with our own pid has no memory-safety preconditions.
    if unsafe { libc::kill(libc::getpid(), sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
