//! Email alerts (`mailers` sections, `email-alert` in proxies): a mail to
//! each mailer of the section when a server of the backend changes state,
//! as HAProxy 2.6 sends them.
//!
//! # What is sent, and when
//!
//! HAProxy mails the text of the log line of the event (without its final
//! `.`), at the event's own level, when that level is at or above
//! `email-alert level` (default `alert`):
//!
//! | event                                        | level  |
//! |----------------------------------------------|--------|
//! | `Server B/S is DOWN...` (checks, agent, track) | alert  |
//! | `Server B/S is UP...`                        | notice |
//! | `Health check for ...`, `Agent check for ...` (`option log-health-checks`) | info |
//!
//! Maintenance (`going DOWN for maintenance`, `UP/READY`) and "no server
//! available" lines are logged, not mailed (HAProxy 2.6 does the same).
//! The events reach [`wrap`]'s closure through the backend's check log
//! (every such line goes through it), which classifies each line by its
//! text ([`level_of`]).
//!
//! # The exchange
//!
//! HAProxy builds a tcp-check per alert: connect; expect `220 `; `HELO
//! <myhostname>`; expect `250 `; `MAIL FROM:<from>`; expect `250 `; `RCPT
//! TO:<to>`; expect `250 `; `DATA`; expect `354 `; the message (`From`,
//! `To`, `Date` in local time as `%a, %d %b %Y %T %z (%Z)`, `Subject:
//! [HAProxy Alert] <msg>`, a blank line, the text, a blank line, `.`);
//! expect `250 `; `QUIT`; expect `221 `. Each expect looks for its string
//! anywhere in what the server said since the last send, and waits for
//! more until it is there or the connection ends (a failure: the alert is
//! dropped, without a log, as HAProxy does). ebb sends the same bytes.
//!
//! Alerts to one mailer go one at a time, in order (HAProxy's queue per
//! mailer and proxy): [`Queue`]. The exchange is a task on the scheduler
//! ([`Smtp`]), non-blocking, bounded as a whole by the section's
//! `timeout mail` (10 s by default); a soft stop ends it.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sched::{ticks, Ctx, Reasons, RuntimeHandle, Status, TaskFn, TaskId, TaskletId};

use crate::backend::check::LogFn;
use crate::config::EmailAlert;

/// The syslog levels HAProxy mails its events at.
const LOG_ALERT: u8 = 1;
const LOG_NOTICE: u8 = 5;
const LOG_INFO: u8 = 6;

/// A backend's alerts: what each mail says, and a queue per mailer.
pub struct Alerts {
    from: String,
    to: String,
    hostname: String,
    level: u8,
    queues: Vec<Arc<Queue>>,
    handle: RuntimeHandle,
}

/// The alerts waiting for one mailer, sent one at a time.
struct Queue {
    addr: SocketAddr,
    timeout: Duration,
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    /// Each alert's dialogue.
    pending: VecDeque<Vec<Step>>,
    /// A task is sending (it takes what is added meanwhile).
    busy: bool,
}

/// One step of an alert's dialogue.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// Wait until the server said this (since the last send).
    Expect(&'static [u8]),
    Send(Vec<u8>),
}

impl Alerts {
    /// A backend's alerts, if its `email-alert` settings are complete and
    /// name mailers.
    pub fn new(e: &EmailAlert, handle: &RuntimeHandle) -> Option<Arc<Alerts>> {
        let (Some(from), Some(to)) = (&e.from, &e.to) else {
            return None;
        };
        if e.mailers.is_none() || e.targets.is_empty() {
            return None;
        }
        let hostname = match &e.myhostname {
            Some(h) => h.clone(),
            None => crate::sample::hostname().to_string(),
        };
        Some(Arc::new(Alerts {
            from: from.clone(),
            to: to.clone(),
            hostname,
            level: e.level,
            queues: e
                .targets
                .iter()
                .map(|a| {
                    Arc::new(Queue {
                        addr: *a,
                        timeout: e.timeout,
                        state: Mutex::new(QueueState::default()),
                    })
                })
                .collect(),
            handle: handle.clone(),
        }))
    }

    /// Mails `line` (a check log line) if its event is mailed at this
    /// level.
    pub fn note(&self, at: Option<u8>, line: &str) {
        // (`at`: the level HAProxy gives the event, when not its words'.)
        let Some(level) = level_of(line).map(|l| at.unwrap_or(l)) else {
            return;
        };
        if level > self.level {
            return;
        }
        let msg = line.strip_suffix('.').unwrap_or(line);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let steps = dialogue(&self.hostname, &self.from, &self.to, &date(now), msg);
        for q in &self.queues {
            let start = {
                let Ok(mut st) = q.state.lock() else {
                    continue;
                };
                st.pending.push_back(steps.clone());
                !std::mem::replace(&mut st.busy, true)
            };
            if start {
                // A shared task starts the exchange on the thread that
                // runs it (its socket is registered with that thread).
                let q = Arc::clone(q);
                let mut once = Some(q);
                let id = self.handle.new_shared_task(
                    "email_alert_start",
                    u64::MAX,
                    move |ctx: &mut Ctx, _me, _why| {
                        if let Some(q) = once.take() {
                            let t = ctx.new_task_obj("email_alert", Smtp { q, cur: None });
                            ctx.on_stop(t);
                            ctx.wakeup(t, Reasons::INIT);
                        }
                        Status::Done
                    },
                );
                self.handle.wake_task(id, Reasons::INIT);
            }
        }
    }
}

/// Wraps a backend's check log so that its events are also mailed.
pub fn wrap(log: LogFn, alerts: Option<Arc<Alerts>>) -> LogFn {
    match alerts {
        None => log,
        Some(a) => Arc::new(move |level: Option<u8>, line: String| {
            a.note(level, &line);
            log(level, line)
        }),
    }
}

/// The level HAProxy mails a check log line's event at, if it mails it.
pub fn level_of(line: &str) -> Option<u8> {
    if line.starts_with("Health check for ") || line.starts_with("Agent check for ") {
        return Some(LOG_INFO);
    }
    let rest = line
        .strip_prefix("Backup Server ")
        .or_else(|| line.strip_prefix("Server "))?;
    // "B/S is DOWN" then ", reason...", " via B/S" or ".".
    let follows = |s: &str| s.starts_with(',') || s.starts_with('.') || s.starts_with(" via ");
    if let Some((_, after)) = rest.split_once(" is DOWN") {
        return follows(after).then_some(LOG_ALERT);
    }
    if let Some((_, after)) = rest.split_once(" is UP") {
        return follows(after).then_some(LOG_NOTICE);
    }
    None
}

/// `Date:` as HAProxy writes it: local time, `%a, %d %b %Y %T %z (%Z)`.
fn date(secs: i64) -> String {
    let off = crate::sys::utc_offset(secs);
    let local = secs + i64::from(off);
    let days = local.div_euclid(86_400);
    let (y, m, d) = crate::calendar::civil_from_days(days);
    let sod = local.rem_euclid(86_400);
    let a = off.unsigned_abs();
    format!(
        "{}, {d:02} {} {y} {:02}:{:02}:{:02} {}{:02}{:02} ({})",
        crate::calendar::weekday_abbr(days),
        crate::calendar::month_abbr(m),
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        if off < 0 { '-' } else { '+' },
        a / 3600,
        a / 60 % 60,
        crate::sys::zone_name(secs),
    )
}

/// An alert's dialogue, as HAProxy's tcp-check for it.
fn dialogue(host: &str, from: &str, to: &str, date: &str, msg: &str) -> Vec<Step> {
    let body = format!(
        "From: {from}\r\nTo: {to}\r\nDate: {date}\r\nSubject: [HAProxy Alert] {msg}\r\n\r\n{msg}\r\n\r\n.\r\n"
    );
    vec![
        Step::Expect(b"220 "),
        Step::Send(format!("HELO {host}\r\n").into_bytes()),
        Step::Expect(b"250 "),
        Step::Send(format!("MAIL FROM:<{from}>\r\n").into_bytes()),
        Step::Expect(b"250 "),
        Step::Send(format!("RCPT TO:<{to}>\r\n").into_bytes()),
        Step::Expect(b"250 "),
        Step::Send(b"DATA\r\n".to_vec()),
        Step::Expect(b"354 "),
        Step::Send(body.into_bytes()),
        Step::Expect(b"250 "),
        Step::Send(b"QUIT\r\n".to_vec()),
        Step::Expect(b"221 "),
    ]
}

/// One alert's exchange under way.
struct Exchange {
    sock: TcpStream,
    io: TaskletId,
    steps: Vec<Step>,
    next: usize,
    connected: bool,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    eof: bool,
}

/// The end of a turn of an exchange.
enum Turn {
    Wait,
    Done,
    Failed,
}

impl Exchange {
    fn start(ctx: &mut Ctx, me: TaskId, addr: SocketAddr, steps: Vec<Step>) -> io::Result<Self> {
        let sock = crate::backend::connect_nb(addr)?;
        let io = ctx.new_tasklet_obj("email_alert_io", crate::net::WakeTask { task: me });
        if let Err(e) = ctx.register_fd(sock.as_raw_fd(), io, true) {
            ctx.kill_tasklet(io);
            return Err(e);
        }
        Ok(Exchange {
            sock,
            io,
            steps,
            next: 0,
            connected: false,
            inbuf: Vec::new(),
            out: Vec::new(),
            eof: false,
        })
    }

    fn close(self, ctx: &mut Ctx) {
        let _ = ctx.deregister_fd(self.sock.as_raw_fd());
        ctx.kill_tasklet(self.io);
    }

    /// Moves the dialogue on as far as the socket allows.
    fn turn(&mut self) -> Turn {
        if !self.connected {
            match crate::backend::connect_outcome(&self.sock, &mut None, false, false) {
                None => return Turn::Wait,
                Some(false) => return Turn::Failed,
                Some(true) => self.connected = true,
            }
        }
        let mut tmp = [0u8; 4096];
        loop {
            match self.sock.read(&mut tmp) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                // A server that talks without end is cut short.
                Ok(_) if self.inbuf.len() > 64 * 1024 => return Turn::Failed,
                Ok(n) => self.inbuf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Turn::Failed,
            }
        }
        while let Some(step) = self.steps.get(self.next) {
            match step {
                Step::Send(b) => {
                    self.out.extend_from_slice(b);
                    self.inbuf.clear();
                }
                Step::Expect(s) => {
                    if !self.inbuf.windows(s.len()).any(|w| w == *s) {
                        if self.eof {
                            return Turn::Failed;
                        }
                        break;
                    }
                }
            }
            self.next += 1;
        }
        let mut done = 0;
        while done < self.out.len() {
            match self.sock.write(&self.out[done..]) {
                Ok(0) => return Turn::Failed,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Turn::Failed,
            }
        }
        self.out.drain(..done);
        if self.next == self.steps.len() && self.out.is_empty() {
            return Turn::Done;
        }
        if self.eof && self.next < self.steps.len() {
            return Turn::Failed;
        }
        Turn::Wait
    }
}

/// The task sending one mailer's alerts, one after the other.
struct Smtp {
    q: Arc<Queue>,
    cur: Option<Exchange>,
}

impl Smtp {
    /// The next alert, or none (the queue is then free for a new task).
    fn take(&self) -> Option<Vec<Step>> {
        let mut st = self.q.state.lock().ok()?;
        let next = st.pending.pop_front();
        if next.is_none() {
            st.busy = false;
        }
        next
    }
}

impl TaskFn for Smtp {
    fn run(&mut self, ctx: &mut Ctx, me: TaskId, why: Reasons) -> Status {
        if ctx.stopping() {
            if let Some(x) = self.cur.take() {
                x.close(ctx);
            }
            if let Ok(mut st) = self.q.state.lock() {
                st.pending.clear();
                st.busy = false;
            }
            return Status::Done;
        }
        loop {
            if self.cur.is_none() {
                let Some(steps) = self.take() else {
                    return Status::Done;
                };
                match Exchange::start(ctx, me, self.q.addr, steps) {
                    Ok(x) => {
                        self.cur = Some(x);
                        let ms = self.q.timeout.as_millis().min(i32::MAX as u128) as u32;
                        ctx.set_expire(me, ticks::add(ctx.now(), ms));
                    }
                    Err(_) => continue,
                }
            }
            let timed_out =
                why.intersects(Reasons::TIMER) && ticks::is_expired(ctx.expire(me), ctx.now());
            let Some(x) = self.cur.as_mut() else {
                continue;
            };
            match x.turn() {
                Turn::Wait if !timed_out => return Status::Continue,
                _ => {
                    if let Some(x) = self.cur.take() {
                        x.close(ctx);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_as_haproxy() {
        let l = |s: &str| level_of(s);
        assert_eq!(l("Server b/s1 is DOWN, reason: Layer4 connection problem, info: \"Connection refused\", check duration: 0ms. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."), Some(LOG_ALERT));
        assert_eq!(l("Server b/s1 is DOWN via b/s2. 0 active"), Some(LOG_ALERT));
        assert_eq!(
            l("Server b/s1 is UP, reason: Layer4 check passed"),
            Some(LOG_NOTICE)
        );
        assert_eq!(
            l("Health check for server b/s1 failed, reason: x"),
            Some(LOG_INFO)
        );
        assert_eq!(l("Agent check for server b/s1 failed"), Some(LOG_INFO));
        assert_eq!(
            l("Server b/s1 is going DOWN for maintenance. 0 active"),
            None
        );
        assert_eq!(
            l("Server b/s1 is UP/READY (leaving forced maintenance)."),
            None
        );
        assert_eq!(l("backend b has no server available!"), None);
    }

    #[test]
    fn date_as_strftime() {
        if crate::sys::utc_offset(0) != 0 {
            return; // the expected text below is UTC
        }
        // 2026-11-29 12:40:05 UTC was a Sunday.
        let d = date(1_795_956_005);
        assert!(d.starts_with("Sun, 29 Nov 2026 12:40:05 +0000 ("), "{d}");
        assert_eq!(&date(0)[..31], "Thu, 01 Jan 1970 00:00:00 +0000");
    }

    #[test]
    fn dialogue_as_haproxy() {
        let d = dialogue("h", "a@x", "b@y", "D", "Server b/s is UP");
        assert_eq!(d.len(), 13);
        assert_eq!(d[1], Step::Send(b"HELO h\r\n".to_vec()));
        assert_eq!(
            d[9],
            Step::Send(
                b"From: a@x\r\nTo: b@y\r\nDate: D\r\nSubject: [HAProxy Alert] Server b/s is UP\r\n\r\nServer b/s is UP\r\n\r\n.\r\n"
                    .to_vec()
            )
        );
    }
}
