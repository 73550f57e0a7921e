//! An echo server on sched's I/O API, with no HTTP: a listener tasklet per
//! thread (SO_REUSEPORT is left out for brevity: one thread listens), one
//! tasklet per connection registered once with epoll (edge-triggered), a
//! stop hook that closes the listener, and an idle timeout task per
//! connection. A client thread sends a few lines, then asks for a graceful
//! stop. Run: `cargo run -p sched --example echo`

use sched::{ticks, Config, Ctx, Reasons, Runtime, Status, TaskId};
use std::cell::RefCell;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::rc::Rc;

/// Closes idle connections after this long (ms).
const IDLE_MS: u32 = 5_000;

struct Conn {
    sock: TcpStream,
    timeout: Option<TaskId>,
    echoed: usize,
}

fn on_conn(ctx: &mut Ctx, conn: &Rc<RefCell<Conn>>, me: sched::TaskletId, why: Reasons) -> Status {
    let ev = ctx.take_events(me);
    let mut c = conn.borrow_mut();
    let fd = c.sock.as_raw_fd();
    let mut buf = [0u8; 4096];
    let mut close = why.contains(Reasons::SIGNAL) || ev.hup_or_err();
    // Edge-triggered: read until the socket would block.
    loop {
        match c.sock.read(&mut buf) {
            Ok(0) => {
                close = true;
                break;
            }
            Ok(n) => {
                if c.sock.write_all(&buf[..n]).is_err() {
                    close = true;
                    break;
                }
                c.echoed += n;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(_) => {
                close = true;
                break;
            }
        }
    }
    let timeout = c.timeout;
    if close {
        println!("connection closed after echoing {} bytes", c.echoed);
        let _ = ctx.deregister_fd(fd);
        if let Some(t) = timeout {
            ctx.kill(t);
        }
        return Status::Done;
    }
    // Activity: push the idle timeout back (a lazy move in the wait queue).
    if let Some(t) = timeout {
        let when = ticks::add(ctx.now(), IDLE_MS);
        ctx.set_expire(t, when);
    }
    Status::Continue
}

fn main() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let rt = Runtime::new(Config::new(1))?;
    let h = rt.handle();
    let client = std::thread::spawn(move || -> io::Result<()> {
        let mut s = TcpStream::connect(addr)?;
        for line in ["hello\n", "from\n", "sched\n"] {
            s.write_all(line.as_bytes())?;
            let mut back = vec![0u8; line.len()];
            s.read_exact(&mut back)?;
            print!("client got back: {}", String::from_utf8_lossy(&back));
        }
        h.stop();
        Ok(())
    });
    let listener = std::sync::Mutex::new(Some(listener));
    rt.run(move |ctx| {
        let Some(l) = listener.lock().ok().and_then(|mut g| g.take()) else {
            return;
        };
        let lfd = l.as_raw_fd();
        let l = RefCell::new(Some(l));
        let acceptor = ctx.new_tasklet("accept", move |ctx: &mut Ctx, me, why| {
            if why.contains(Reasons::SIGNAL) {
                // Graceful stop: close the listener first.
                let _ = ctx.deregister_fd(lfd);
                l.borrow_mut().take();
                return Status::Done;
            }
            ctx.take_events(me);
            let guard = l.borrow();
            let Some(l) = guard.as_ref() else {
                return Status::Done;
            };
            while let Ok((sock, _)) = l.accept() {
                ctx.count_accepts(1);
                if sock.set_nonblocking(true).is_err() {
                    continue;
                }
                let fd = sock.as_raw_fd();
                let conn = Rc::new(RefCell::new(Conn {
                    sock,
                    timeout: None,
                    echoed: 0,
                }));
                let c2 = conn.clone();
                let t = ctx.new_tasklet("echo_conn", move |ctx: &mut Ctx, me, why| {
                    on_conn(ctx, &c2, me, why)
                });
                if ctx.register_fd(fd, t, false).is_err() {
                    ctx.kill_tasklet(t);
                    continue;
                }
                ctx.on_stop_tasklet(t);
                // The idle timeout wakes the connection, which then closes.
                let idle = ctx.new_task("idle_timeout", move |ctx: &mut Ctx, _, _| {
                    ctx.tasklet_wakeup_why(t, Reasons::SIGNAL);
                    Status::Done
                });
                conn.borrow_mut().timeout = Some(idle);
                let when = ticks::add(ctx.now(), IDLE_MS);
                ctx.set_expire(idle, when);
            }
            Status::Continue
        });
        if let Err(e) = ctx.register_fd(lfd, acceptor, false) {
            eprintln!("register listener: {e}");
            return;
        }
        ctx.on_stop_tasklet(acceptor);
    })?;
    client
        .join()
        .map_err(|_| io::Error::other("client panicked"))??;
    println!(
        "{}",
        rt.handle()
            .activity_report()
            .lines()
            .find(|l| l.starts_with("accepts"))
            .unwrap_or("")
    );
    Ok(())
}
