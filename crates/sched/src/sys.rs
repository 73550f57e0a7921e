//! # System calls
//!
//! The only module with `unsafe`: thin wrappers over libc's epoll, eventfd,
//! `read`/`write` on the eventfd and the CPU-time clocks. Every call goes
//! through [`syscall!`], which turns libc's `-1` into an [`io::Error`]
//! (mio's pattern), so nothing above this module sees errno or raw
//! results; but `epoll_wait`, once per loop turn, is made directly with
//! the `syscall` instruction on x86_64 Linux (no cancellation wrapper).
//! The wrappers own their fds and close them on drop.

use std::io;
use std::os::fd::RawFd;

/// Calls a libc function and maps `-1` to the thread's `errno`.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        // SAFETY: every use passes arguments that satisfy the call's
        // contract, as stated at the call site.
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}

/// Readiness bits as reported by the poller, in the scheduler's own terms.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Events(pub u8);

impl Events {
    /// Data (or a connection, or EOF) can be read.
    pub const READABLE: Events = Events(1);
    /// Room in the send buffer.
    pub const WRITABLE: Events = Events(2);
    /// The peer closed its side (`EPOLLRDHUP`) or the socket hung up.
    pub const HUP: Events = Events(4);
    /// An error is pending on the socket.
    pub const ERROR: Events = Events(8);
    /// No event.
    pub const NONE: Events = Events(0);

    /// Whether every bit of `o` is set.
    #[inline]
    pub fn contains(self, o: Events) -> bool {
        self.0 & o.0 == o.0
    }
    /// Whether no bit is set.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Readable.
    #[inline]
    pub fn readable(self) -> bool {
        self.contains(Self::READABLE)
    }
    /// Writable.
    #[inline]
    pub fn writable(self) -> bool {
        self.contains(Self::WRITABLE)
    }
    /// Hang-up or error.
    #[inline]
    pub fn hup_or_err(self) -> bool {
        self.0 & (Self::HUP.0 | Self::ERROR.0) != 0
    }

    pub(crate) fn from_epoll(e: u32) -> Events {
        let mut r = 0;
        if e & (libc::EPOLLIN as u32) != 0 {
            r |= Self::READABLE.0;
        }
        if e & (libc::EPOLLOUT as u32) != 0 {
            r |= Self::WRITABLE.0;
        }
        if e & ((libc::EPOLLRDHUP | libc::EPOLLHUP) as u32) != 0 {
            r |= Self::HUP.0;
        }
        if e & (libc::EPOLLERR as u32) != 0 {
            r |= Self::ERROR.0;
        }
        Events(r)
    }
}

impl std::ops::BitOr for Events {
    type Output = Events;
    fn bitor(self, o: Events) -> Events {
        Events(self.0 | o.0)
    }
}

impl std::ops::BitOrAssign for Events {
    fn bitor_assign(&mut self, o: Events) {
        self.0 |= o.0;
    }
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [(1, "R"), (2, "W"), (4, "HUP"), (8, "ERR")];
        let mut first = true;
        for (b, n) in names {
            if self.0 & b != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// An epoll instance.
pub(crate) struct Epoll {
    fd: RawFd,
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        let fd = syscall!(epoll_create1(libc::EPOLL_CLOEXEC))?;
        Ok(Epoll { fd })
    }

    /// Registers `fd` with `data`; `edge` selects edge-triggered mode,
    /// `rw` whether writability is watched too.
    pub(crate) fn add(&self, fd: RawFd, data: u64, edge: bool, rw: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, data, edge, rw)
    }

    /// Points the registration of `fd` at `data` (the same flags as
    /// [`Epoll::add`]), in one call where a delete and an add take two.
    /// Readiness already pending is reported with the new data.
    pub(crate) fn modify(&self, fd: RawFd, data: u64, edge: bool, rw: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, data, edge, rw)
    }

    /// `epoll_ctl` `op` (add or modify) for `fd`: input and peer shutdown,
    /// output if `rw`, edge-triggered if `edge`.
    fn ctl(&self, op: i32, fd: RawFd, data: u64, edge: bool, rw: bool) -> io::Result<()> {
        let mut flags = libc::EPOLLIN | libc::EPOLLRDHUP;
        if rw {
            flags |= libc::EPOLLOUT;
        }
        if edge {
            flags |= libc::EPOLLET;
        }
        let mut ev = libc::epoll_event {
            events: flags as u32,
            u64: data,
        };
        syscall!(epoll_ctl(self.fd, op, fd, &mut ev))?;
        Ok(())
    }

    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        epoll_delete(self.fd, fd)
    }

    /// The instance's own fd.
    pub(crate) fn raw(&self) -> RawFd {
        self.fd
    }

    /// Waits up to `timeout_ms` (-1: forever) and fills `buf`; returns the
    /// number of events. EINTR reports 0 events.
    pub(crate) fn wait(&self, buf: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        let max = buf.len().min(i32::MAX as usize) as i32;
        match epoll_wait_raw(self.fd, buf, max, timeout_ms) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// `epoll_wait` made with the `syscall` instruction, without the C
/// library's wrapper: glibc's is a cancellation point that switches the
/// thread's cancellation state on and off around the call (about 45
/// instructions per loop turn under callgrind, for threads never
/// cancelled). Other targets call libc.
#[inline]
fn epoll_wait_raw(
    epfd: RawFd,
    buf: &mut [libc::epoll_event],
    max: i32,
    timeout_ms: i32,
) -> io::Result<usize> {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        let ret: isize;
        // SAFETY: the x86_64 Linux system-call convention (number in rax,
        // arguments in rdi, rsi, rdx, r10; rcx and r11 clobbered, result
        // in rax). epoll_wait(epfd, events, max, timeout): `buf` holds at
        // least `max` events, valid for writing for the call's duration;
        // the kernel touches no other memory.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") libc::SYS_epoll_wait as isize => ret,
                in("rdi") epfd as isize,
                in("rsi") buf.as_mut_ptr(),
                in("rdx") max as isize,
                in("r10") timeout_ms as isize,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        if ret < 0 {
            Err(io::Error::from_raw_os_error(-ret as i32))
        } else {
            Ok(ret as usize)
        }
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        syscall!(epoll_wait(epfd, buf.as_mut_ptr(), max, timeout_ms)).map(|n| n as usize)
    }
}

/// Removes `fd` from the epoll instance `epfd` (this thread's, or another
/// thread's: the kernel serialises the two).
pub(crate) fn epoll_delete(epfd: RawFd, fd: RawFd) -> io::Result<()> {
    // A non-null event pointer keeps pre-2.6.9 kernels happy.
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    syscall!(epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, &mut ev))?;
    Ok(())
}

impl Drop for Epoll {
    fn drop(&mut self) {
        let _ = syscall!(close(self.fd));
    }
}

/// An eventfd used to wake a thread sleeping in `epoll_wait`.
#[derive(Debug)]
pub(crate) struct EventFd {
    fd: RawFd,
}

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        let fd = syscall!(eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK))?;
        Ok(EventFd { fd })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    /// Adds 1 to the counter, making the fd readable. A full counter
    /// (EAGAIN) already means readable, so it counts as success.
    pub(crate) fn write(&self) -> io::Result<()> {
        let one: u64 = 1;
        let p = (&one as *const u64).cast::<libc::c_void>();
        match syscall!(write(self.fd, p, 8)) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Resets the counter to zero (nothing to read is fine).
    pub(crate) fn drain(&self) -> io::Result<()> {
        let mut v: u64 = 0;
        let p = (&mut v as *mut u64).cast::<libc::c_void>();
        match syscall!(read(self.fd, p, 8)) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        let _ = syscall!(close(self.fd));
    }
}

/// Reads a clock in nanoseconds.
fn clock_ns(id: libc::clockid_t) -> io::Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    syscall!(clock_gettime(id, &mut ts))?;
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC in nanoseconds (the clock `Instant` reads), straight
/// from the vDSO: no `Instant` subtraction with its checks per reading.
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// CPU time consumed by the calling thread, in ns (0 if unavailable).
#[cfg(test)]
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// The CPU-time clock of the calling thread, readable from other threads
/// (the watchdog reads it).
pub(crate) fn own_cpu_clock() -> io::Result<libc::clockid_t> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: pthread_self() is always valid for the calling thread and
    // `id` is a valid place to write the result.
    let r = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(id)
}

/// CPU time of the thread whose clock is `id`, in ns.
pub(crate) fn cpu_clock_ns(id: libc::clockid_t) -> io::Result<u64> {
    clock_ns(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventfd_wakes_epoll() -> io::Result<()> {
        let ep = Epoll::new()?;
        let ev = EventFd::new()?;
        ep.add(ev.fd(), 7, false, false)?;
        let mut buf = [libc::epoll_event { events: 0, u64: 0 }; 4];
        assert_eq!(ep.wait(&mut buf, 0)?, 0);
        ev.write()?;
        ev.write()?;
        assert_eq!(ep.wait(&mut buf, 0)?, 1);
        let data = buf[0].u64;
        assert_eq!(data, 7);
        ev.drain()?;
        assert_eq!(ep.wait(&mut buf, 0)?, 0);
        ep.delete(ev.fd())?;
        assert!(thread_cpu_ns() > 0);
        Ok(())
    }
}
