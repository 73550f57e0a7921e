//! Task and tasklet lifecycle: wakeup while running, kill while queued or
//! running, stale ids, freeing the next entry from another callback.

use sched::{Config, Ctx, Reasons, Runtime, Status, TaskId, TaskletId};
use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;

fn runtime() -> io::Result<Runtime> {
    let mut c = Config::new(1);
    c.watchdog = None;
    Runtime::new(c)
}

/// Sets its flag when dropped: observes that a task's state was freed.
struct DropFlag(Rc<Cell<bool>>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

#[test]
fn wakeup_while_running_requeues_after_return() -> io::Result<()> {
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let log = Rc::new(RefCell::new(Vec::<String>::new()));
    let l = log.clone();
    let other: Rc<Cell<Option<TaskId>>> = Rc::default();
    let o2 = other.clone();
    let mut runs = 0;
    let t = ctx.new_task("selfwaker", move |ctx: &mut Ctx, me, why| {
        runs += 1;
        l.borrow_mut().push(format!("t{runs}:{why:?}"));
        if runs == 1 {
            ctx.wakeup(me, Reasons::MSG);
            ctx.wakeup(me, Reasons::RES);
            if let Some(o) = o2.get() {
                ctx.wakeup(o, Reasons::MSG);
            }
        }
        Status::Continue
    });
    let l = log.clone();
    let u = ctx.new_task("other", move |_: &mut Ctx, _, _| {
        l.borrow_mut().push("u".into());
        Status::Continue
    });
    other.set(Some(u));
    ctx.wakeup(t, Reasons::INIT);
    ctx.run_until_idle(10)?;
    // The second run comes after u (woken during the first run, but t's
    // requeue happens only when its callback returns) and carries both
    // reasons.
    assert_eq!(*log.borrow(), ["t1:INIT", "u", "t2:MSG|RES"]);
    Ok(())
}

#[test]
fn kill_queued_and_running() -> io::Result<()> {
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let ran = Rc::new(Cell::new(0));
    let dropped = Rc::new(Cell::new(false));
    let (r2, d) = (ran.clone(), DropFlag(dropped.clone()));
    let t = ctx.new_task("victim", move |_: &mut Ctx, _, _| {
        let _ = &d;
        r2.set(r2.get() + 1);
        Status::Continue
    });
    ctx.wakeup(t, Reasons::INIT);
    ctx.set_expire(t, sched::ticks::add(ctx.now(), 5));
    let live = ctx.live();
    ctx.kill(t);
    assert!(dropped.get(), "killed while queued: freed at once");
    assert_eq!(ctx.live(), live - 1);
    assert!(!ctx.task_alive(t));
    ctx.run_until_idle(5)?;
    assert_eq!(ran.get(), 0);

    // Killed by itself while running, returning Continue: freed on return.
    let dropped = Rc::new(Cell::new(false));
    let (d, seen) = (DropFlag(dropped.clone()), dropped.clone());
    let t = ctx.new_task("suicide", move |ctx: &mut Ctx, me, _| {
        let _ = &d;
        ctx.kill(me);
        assert!(!seen.get(), "not freed while running");
        assert!(!ctx.task_alive(me));
        Status::Continue
    });
    ctx.wakeup(t, Reasons::INIT);
    ctx.run_until_idle(5)?;
    assert!(dropped.get());
    assert!(!ctx.task_alive(t));

    // A tasklet returning Done is freed too.
    let dropped = Rc::new(Cell::new(false));
    let d = DropFlag(dropped.clone());
    let tl = ctx.new_tasklet("once", move |_: &mut Ctx, _, _| {
        let _ = &d;
        Status::Done
    });
    ctx.tasklet_wakeup(tl);
    ctx.run_until_idle(5)?;
    assert!(dropped.get());
    assert!(!ctx.tasklet_alive(tl));
    assert_eq!(ctx.live(), 0);
    Ok(())
}

#[test]
fn stale_ids_are_no_ops() -> io::Result<()> {
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let hits = Rc::new(Cell::new(0));
    let old = ctx.new_tasklet("old", |_: &mut Ctx, _, _| Status::Done);
    ctx.kill_tasklet(old);
    let h = hits.clone();
    let new = ctx.new_tasklet("new", move |_: &mut Ctx, _, _| {
        h.set(h.get() + 1);
        Status::Continue
    });
    assert_eq!(
        format!("{old:?}").split('#').next(),
        format!("{new:?}").split('#').next(),
        "slot reused"
    );
    ctx.tasklet_wakeup(old);
    ctx.tasklet_wakeup_instant(old);
    ctx.kill_tasklet(old);
    ctx.set_heavy(old, true);
    assert!(ctx.take_events(old).is_empty());
    rt.handle().wake_tasklet(old);
    ctx.run_until_idle(5)?;
    assert_eq!(
        hits.get(),
        0,
        "the new tasklet in the old slot is untouched"
    );
    assert!(ctx.tasklet_alive(new));

    let t = ctx.new_task("t", |_: &mut Ctx, _, _| Status::Done);
    ctx.wakeup(t, Reasons::INIT);
    ctx.run_until_idle(5)?;
    ctx.wakeup(t, Reasons::INIT);
    ctx.schedule(t, 5);
    ctx.set_nice(t, 3);
    ctx.kill(t);
    rt.handle().wake_task(t, Reasons::MSG);
    assert_eq!(ctx.run_until_idle(5)?, 0);
    Ok(())
}

#[test]
fn free_next_entry_from_another_callback() -> io::Result<()> {
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let log = Rc::new(RefCell::new(Vec::<&str>::new()));
    let victim: Rc<Cell<Option<TaskletId>>> = Rc::default();
    let victim_task: Rc<Cell<Option<TaskId>>> = Rc::default();
    let (l, v, vt) = (log.clone(), victim.clone(), victim_task.clone());
    let a = ctx.new_tasklet("killer", move |ctx: &mut Ctx, _, _| {
        l.borrow_mut().push("a");
        if let Some(b) = v.get() {
            ctx.kill_tasklet(b);
        }
        if let Some(t) = vt.get() {
            ctx.kill(t);
        }
        // The freed slots are reused at once: neither may run.
        let l2 = l.clone();
        ctx.new_tasklet("fresh", move |_: &mut Ctx, _, _| {
            l2.borrow_mut().push("fresh");
            Status::Done
        });
        Status::Done
    });
    let l = log.clone();
    let b = ctx.new_tasklet("next", move |_: &mut Ctx, _, _| {
        l.borrow_mut().push("b");
        Status::Done
    });
    let l = log.clone();
    let c = ctx.new_tasklet("after", move |_: &mut Ctx, _, _| {
        l.borrow_mut().push("c");
        Status::Done
    });
    let l = log.clone();
    let t = ctx.new_task("queued_task", move |_: &mut Ctx, _, _| {
        l.borrow_mut().push("t");
        Status::Done
    });
    victim.set(Some(b));
    victim_task.set(Some(t));
    ctx.wakeup(t, Reasons::INIT);
    ctx.tasklet_wakeup(a);
    ctx.tasklet_wakeup(b);
    ctx.tasklet_wakeup(c);
    ctx.run_until_idle(5)?;
    assert_eq!(*log.borrow(), ["a", "c"]);
    assert_eq!(ctx.live(), 1, "only the never-woken fresh tasklet is left");
    Ok(())
}

#[test]
fn fd_readiness_wakes_the_tasklet() -> io::Result<()> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let (mut a, b) = UnixStream::pair()?;
    b.set_nonblocking(true)?;
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    let fd = b.as_raw_fd();
    let b = RefCell::new(b);
    let conn = ctx.new_tasklet("conn", move |ctx: &mut Ctx, me, why| {
        let ev = ctx.take_events(me);
        let mut buf = [0u8; 16];
        let n = b.borrow_mut().read(&mut buf).unwrap_or(0);
        s2.borrow_mut()
            .push((why, ev.readable(), ev.hup_or_err(), n));
        if ev.hup_or_err() {
            let _ = ctx.deregister_fd(fd);
            return Status::Done;
        }
        Status::Continue
    });
    ctx.register_fd(fd, conn, true)?;
    ctx.turn(false)?; // initial writability
    ctx.run_until_idle(3)?;
    seen.borrow_mut().clear();
    a.write_all(b"hello")?;
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert_eq!(seen.borrow().len(), 1);
    assert_eq!(seen.borrow()[0].0, Reasons::IO);
    assert!(seen.borrow()[0].1);
    assert_eq!(seen.borrow()[0].3, 5);
    drop(a);
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert!(seen.borrow().last().is_some_and(|e| e.2), "hang-up seen");
    assert!(!ctx.tasklet_alive(conn));
    assert!(
        ctx.register_fd(fd, conn, false).is_err(),
        "stale tasklet refused"
    );
    Ok(())
}

/// `io_mark` tells whether an fd event reached a tasklet since the mark
/// was taken: unchanged while nothing happens, `None` while an event waits
/// to be taken, another mark once it was.
#[test]
fn io_mark_changes_with_each_fd_event() -> io::Result<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let (mut a, b) = UnixStream::pair()?;
    b.set_nonblocking(true)?;
    let conn = ctx.new_tasklet("conn", |ctx: &mut Ctx, me, _why| {
        let _ = ctx.take_events(me);
        Status::Continue
    });
    ctx.register_fd(b.as_raw_fd(), conn, false)?;
    let m0 = ctx.io_mark(conn).expect("a live tasklet without events");
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert_eq!(ctx.io_mark(conn), Some(m0), "no event, the same mark");
    a.write_all(b"x")?;
    ctx.turn(false)?;
    assert_eq!(ctx.io_mark(conn), None, "an event not taken yet");
    ctx.run_until_idle(3)?;
    let m1 = ctx.io_mark(conn).expect("taken");
    assert_ne!(m1, m0);
    drop(a);
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert_ne!(ctx.io_mark(conn), Some(m1), "the close is an event too");
    ctx.kill_tasklet(conn);
    assert_eq!(ctx.io_mark(conn), None, "not a live tasklet");
    Ok(())
}

/// A tasklet that logs its fds learns which of its registrations fired:
/// the one written to, then the one closed, and nothing for a quiet one;
/// a tasklet that does not log them gets none.
#[test]
fn log_fds_names_the_fds_that_fired() -> io::Result<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let (mut a1, b1) = UnixStream::pair()?;
    let (_a2, b2) = UnixStream::pair()?;
    let (mut a3, b3) = UnixStream::pair()?;
    for b in [&b1, &b2, &b3] {
        b.set_nonblocking(true)?;
    }
    let idle = |ctx: &mut Ctx, me, _why| {
        let _ = ctx.take_events(me);
        Status::Continue
    };
    let watch = ctx.new_tasklet("watch", idle);
    let other = ctx.new_tasklet("other", idle);
    ctx.log_fds(watch);
    ctx.register_fd(b1.as_raw_fd(), watch, false)?;
    ctx.register_fd(b2.as_raw_fd(), watch, false)?;
    ctx.register_fd(b3.as_raw_fd(), other, false)?;
    a1.write_all(b"x")?;
    a3.write_all(b"x")?;
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    let mut fds = Vec::new();
    assert!(ctx.take_event_fds(watch, &mut fds));
    assert_eq!(fds, [b1.as_raw_fd()], "only the one that fired");
    fds.clear();
    assert!(ctx.take_event_fds(other, &mut fds));
    assert!(fds.is_empty(), "not logged: {fds:?}");
    drop(a1);
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert!(ctx.take_event_fds(watch, &mut fds));
    assert_eq!(fds, [b1.as_raw_fd()], "the close too");
    fds.clear();
    assert!(ctx.take_event_fds(watch, &mut fds));
    assert!(fds.is_empty(), "taken once");
    Ok(())
}

/// An fd moved to another tasklet of the same thread wakes only that one
/// from then on; one no longer registered cannot be moved.
#[test]
fn a_moved_fd_wakes_its_new_tasklet() -> io::Result<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let (mut a, b) = UnixStream::pair()?;
    b.set_nonblocking(true)?;
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut named = |name: &'static str| {
        let l = log.clone();
        ctx.new_tasklet(name, move |ctx: &mut Ctx, me, _why| {
            if !ctx.take_events(me).is_empty() {
                l.borrow_mut().push(name);
            }
            Status::Continue
        })
    };
    let (old, new) = (named("old"), named("new"));
    ctx.register_fd(b.as_raw_fd(), old, false)?;
    a.write_all(b"1")?;
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert_eq!(*log.borrow(), ["old"]);
    ctx.move_fd(0, b.as_raw_fd(), new, false)?;
    a.write_all(b"2")?;
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert_eq!(*log.borrow(), ["old", "new"]);
    ctx.deregister_fd(b.as_raw_fd())?;
    assert!(ctx.move_fd(0, b.as_raw_fd(), old, false).is_err());
    Ok(())
}

/// An fd registered for reading alone reports no writability, however
/// writable it is; once a write would block, `want_write` has its
/// writability watched, and readiness already there is reported at once.
/// An fd that is not registered is refused.
#[test]
fn want_write_adds_writability_to_a_read_registration() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let (_a, b) = UnixStream::pair()?;
    b.set_nonblocking(true)?;
    let seen = Rc::new(Cell::new(sched::Events::NONE));
    let s = seen.clone();
    let conn = ctx.new_tasklet("conn", move |ctx: &mut Ctx, me, _why| {
        s.set(s.get() | ctx.take_events(me));
        Status::Continue
    });
    ctx.register_fd(b.as_raw_fd(), conn, false)?;
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert!(!seen.get().writable(), "{:?}", seen.get());
    ctx.want_write(b.as_raw_fd())?;
    ctx.want_write(b.as_raw_fd())?;
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert!(seen.get().writable(), "{:?}", seen.get());
    ctx.deregister_fd(b.as_raw_fd())?;
    assert!(ctx.want_write(b.as_raw_fd()).is_err());
    Ok(())
}

/// An fd moved for reading keeps the writability it watched: the next
/// blocked write's edge still reaches the new tasklet.
#[test]
fn a_moved_fd_keeps_its_write_interest() -> io::Result<()> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let (mut a, mut b) = UnixStream::pair()?;
    b.set_nonblocking(true)?;
    let seen = Rc::new(Cell::new(sched::Events::NONE));
    let mut named = |s: Rc<Cell<sched::Events>>| {
        ctx.new_tasklet("conn", move |ctx: &mut Ctx, me, _why| {
            s.set(s.get() | ctx.take_events(me));
            Status::Continue
        })
    };
    let old = named(Rc::new(Cell::new(sched::Events::NONE)));
    let new = named(seen.clone());
    ctx.register_fd(b.as_raw_fd(), old, false)?;
    ctx.want_write(b.as_raw_fd())?;
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    ctx.move_fd(0, b.as_raw_fd(), new, false)?;
    // Fill b's side until a write would block, then let `a` drain it.
    let chunk = [0u8; 4096];
    while b.write(&chunk).is_ok() {}
    let mut sink = vec![0u8; 1 << 20];
    a.set_nonblocking(true)?;
    while a.read(&mut sink).is_ok_and(|n| n > 0) {}
    ctx.turn(false)?;
    ctx.run_until_idle(3)?;
    assert!(seen.get().writable(), "{:?}", seen.get());
    Ok(())
}

/// A tasklet woken through the runtime's handle by a callback of its own
/// thread (the server queue's hand-over wakes so) runs in the same turn,
/// not after another poll.
#[test]
fn a_handle_wakeup_from_the_same_thread_runs_in_the_same_turn() -> io::Result<()> {
    let rt = runtime()?;
    let mut ctx = rt.context(0)?;
    let ran = Rc::new(Cell::new(0));
    let r = ran.clone();
    let woken = ctx.new_tasklet("woken", move |_ctx: &mut Ctx, _me, _why| {
        r.set(r.get() + 1);
        Status::Continue
    });
    let h = ctx.handle();
    let waker = ctx.new_tasklet("waker", move |_ctx: &mut Ctx, _me, _why| {
        h.wake_tasklet_instant(woken);
        Status::Continue
    });
    ctx.tasklet_wakeup(waker);
    ctx.turn(false)?;
    assert_eq!(ran.get(), 1, "woken in the waker's turn");
    Ok(())
}
