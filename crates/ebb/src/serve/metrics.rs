//! The Prometheus exporter (`http-request use-service prometheus-exporter`):
//! process, frontend, backend, server and scheduler metrics in the text
//! exposition format (version 0.0.4), which every Prometheus scrapes.
//!
//! Every metric is written as one `# HELP`, one `# TYPE` and its samples,
//! grouped (the format requires a metric's samples to be contiguous).
//! Names follow Prometheus' conventions: a unit suffix (`_seconds`,
//! `_bytes`), and `_total` on counters. Values come from the same atomics
//! as `show stat` ([`super::stats`]) and the scheduler's counters.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::proxy::BackendKind;
use crate::registry::Process;
use crate::serve::{plain, Answer};

/// The Content-Type of the exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

struct Metric {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, f64)>,
}

struct Out {
    metrics: Vec<Metric>,
}

impl Out {
    fn add(
        &mut self,
        name: &'static str,
        kind: &'static str,
        help: &'static str,
        labels: String,
        v: f64,
    ) {
        if let Some(m) = self.metrics.iter_mut().find(|m| m.name == name) {
            m.samples.push((labels, v));
            return;
        }
        self.metrics.push(Metric {
            name,
            help,
            kind,
            samples: vec![(labels, v)],
        });
    }
    fn gauge(&mut self, name: &'static str, help: &'static str, labels: String, v: f64) {
        self.add(name, "gauge", help, labels, v);
    }
    fn counter(&mut self, name: &'static str, help: &'static str, labels: String, v: f64) {
        self.add(name, "counter", help, labels, v);
    }
}

/// Escapes a label value: backslash, double quote and newline.
fn lv(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

fn labels(kv: &[(&str, &str)]) -> String {
    if kv.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = kv
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", lv(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn ld(a: &std::sync::atomic::AtomicU64) -> f64 {
    a.load(Ordering::Relaxed) as f64
}

const CODES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];

/// Renders every metric.
pub fn render(p: &Process) -> String {
    let mut o = Out {
        metrics: Vec::new(),
    };
    let c = p.live.compiled();
    let start = p
        .start
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let up = p.start.elapsed().map(|d| d.as_secs_f64()).unwrap_or(0.0);
    let none = String::new();
    o.gauge(
        "ebb_process_start_time_seconds",
        "Start time of the process since the Unix epoch.",
        none.clone(),
        start,
    );
    o.gauge(
        "ebb_process_uptime_seconds",
        "Seconds since the process started.",
        none.clone(),
        up,
    );
    o.gauge(
        "ebb_process_nbthread",
        "Number of scheduler threads.",
        none.clone(),
        p.nbthread as f64,
    );
    o.gauge(
        "ebb_process_current_connections",
        "Client connections open now.",
        none.clone(),
        f64::from(p.shared.actconn.load(Ordering::Relaxed)),
    );
    o.counter(
        "ebb_process_connections_total",
        "Client connections accepted since start.",
        none.clone(),
        p.sessions.epoch().saturating_sub(1) as f64,
    );
    if p.shared.maxconn != u32::MAX {
        o.gauge(
            "ebb_process_max_connections",
            "Global maxconn.",
            none.clone(),
            f64::from(p.shared.maxconn),
        );
    }

    for fe in &c.frontends {
        let l = labels(&[("proxy", &fe.name)]);
        o.gauge(
            "ebb_frontend_current_sessions",
            "Client connections open on the frontend.",
            l.clone(),
            f64::from(fe.cur_conns()),
        );
        if let Some(m) = fe.maxconn {
            o.gauge(
                "ebb_frontend_limit_sessions",
                "The frontend's maxconn.",
                l.clone(),
                f64::from(m),
            );
        }
        o.counter(
            "ebb_frontend_sessions_total",
            "Client connections accepted by the frontend.",
            l.clone(),
            ld(&fe.sessions),
        );
        o.counter(
            "ebb_frontend_http_requests_total",
            "HTTP requests answered by the frontend.",
            l.clone(),
            ld(&fe.http.requests),
        );
        o.counter(
            "ebb_frontend_bytes_in_total",
            "Request head bytes received.",
            l.clone(),
            ld(&fe.http.bytes_in),
        );
        o.counter(
            "ebb_frontend_bytes_out_total",
            "Response bytes sent.",
            l.clone(),
            ld(&fe.http.bytes_out),
        );
        o.counter(
            "ebb_frontend_requests_denied_total",
            "Requests refused by a deny rule.",
            l.clone(),
            ld(&fe.http.denied),
        );
        for (i, code) in CODES.iter().enumerate() {
            o.counter(
                "ebb_frontend_http_responses_total",
                "HTTP responses by status class.",
                labels(&[("proxy", &fe.name), ("code", code)]),
                ld(&fe.http.hrsp[i]),
            );
        }
        // HAProxy's h2 statistics module (its field names).
        o.gauge(
            "ebb_frontend_h2_open_connections",
            "HTTP/2 client connections open now.",
            l.clone(),
            f64::from(fe.h2_conns.load(Ordering::Relaxed)),
        );
        o.counter(
            "ebb_frontend_h2_total_connections",
            "HTTP/2 client connections since start.",
            l.clone(),
            ld(&fe.h2_conns_total),
        );
        o.counter(
            "ebb_frontend_h2_backend_total_streams",
            "HTTP/2 streams clients opened since start.",
            l.clone(),
            ld(&fe.h2_streams),
        );
    }

    for be in &c.backends {
        let l = labels(&[("proxy", &be.name)]);
        o.counter(
            "ebb_backend_http_requests_total",
            "HTTP requests answered by the backend.",
            l.clone(),
            ld(&be.http.requests),
        );
        o.counter(
            "ebb_backend_bytes_out_total",
            "Response bytes sent for the backend.",
            l.clone(),
            ld(&be.http.bytes_out),
        );
        for (i, code) in CODES.iter().enumerate() {
            o.counter(
                "ebb_backend_http_responses_total",
                "HTTP responses by status class.",
                labels(&[("proxy", &be.name), ("code", code)]),
                ld(&be.http.hrsp[i]),
            );
        }
        let h = &be.h2;
        o.gauge(
            "ebb_backend_h2_open_connections",
            "HTTP/2 connections to the backend's servers open now.",
            l.clone(),
            ld(&h.open_conns),
        );
        o.counter(
            "ebb_backend_h2_total_connections",
            "HTTP/2 connections to the backend's servers since start.",
            l.clone(),
            ld(&h.total_conns),
        );
        o.gauge(
            "ebb_backend_h2_backend_open_streams",
            "HTTP/2 streams to the backend's servers open now.",
            l.clone(),
            ld(&h.open_streams),
        );
        o.counter(
            "ebb_backend_h2_backend_total_streams",
            "HTTP/2 streams to the backend's servers since start.",
            l.clone(),
            ld(&h.total_streams),
        );
        let BackendKind::Servers(sv) = &be.kind else {
            o.gauge(
                "ebb_backend_status",
                "1 when the backend can serve (a usable server, or files).",
                l.clone(),
                1.0,
            );
            continue;
        };
        let f = &sv.farm;
        let (mut act, mut bck, mut cur, mut tot, mut w) = (0.0, 0.0, 0.0, 0.0, 0.0);
        let (mut econ, mut eresp, mut retr, mut redis) = (0.0, 0.0, 0.0, 0.0);
        for s in &f.servers {
            let sl = labels(&[("proxy", &be.name), ("server", &s.name)]);
            let sc = &s.counters;
            let state = crate::backend::server_status(s);
            for st in [
                "UP",
                "DOWN",
                "MAINT",
                "MAINT (resolution)",
                "DRAIN",
                "no check",
            ] {
                o.gauge(
                    "ebb_server_status",
                    "The server's state: 1 for the state it is in.",
                    labels(&[("proxy", &be.name), ("server", &s.name), ("state", st)]),
                    if st == state { 1.0 } else { 0.0 },
                );
            }
            let scur = f64::from(s.cur.load(Ordering::Relaxed));
            o.gauge(
                "ebb_server_current_sessions",
                "Slots of the server in use.",
                sl.clone(),
                scur,
            );
            let m = s.maxconn.load(Ordering::Relaxed);
            if m > 0 {
                o.gauge(
                    "ebb_server_limit_sessions",
                    "The server's maxconn.",
                    sl.clone(),
                    f64::from(m),
                );
            }
            o.gauge(
                "ebb_server_current_queue",
                "Streams waiting in the server's own queue.",
                sl.clone(),
                s.queue.lock().map(|q| q.len()).unwrap_or(0) as f64,
            );
            o.gauge(
                "ebb_server_weight",
                "The server's weight in force.",
                sl.clone(),
                f64::from(s.weight.load(Ordering::Relaxed)),
            );
            o.counter(
                "ebb_server_sessions_total",
                "Streams sent to the server.",
                sl.clone(),
                ld(&sc.sessions),
            );
            o.counter(
                "ebb_server_bytes_in_total",
                "Request bytes sent to the server.",
                sl.clone(),
                ld(&sc.bytes_in),
            );
            o.counter(
                "ebb_server_bytes_out_total",
                "Response bytes received from the server.",
                sl.clone(),
                ld(&sc.bytes_out),
            );
            o.counter(
                "ebb_server_connection_errors_total",
                "Failed connection attempts.",
                sl.clone(),
                ld(&sc.conn_errors),
            );
            o.counter(
                "ebb_server_response_errors_total",
                "Broken or invalid responses.",
                sl.clone(),
                ld(&sc.resp_errors),
            );
            o.counter(
                "ebb_server_retry_warnings_total",
                "Connection retries.",
                sl.clone(),
                ld(&sc.retries),
            );
            o.counter(
                "ebb_server_redispatch_warnings_total",
                "Redispatches to another server.",
                sl.clone(),
                ld(&sc.redispatches),
            );
            o.counter(
                "ebb_server_queued_total",
                "Streams that had to wait in the server's queue.",
                sl.clone(),
                ld(&sc.queued_total),
            );
            o.counter(
                "ebb_server_queue_timeouts_total",
                "Streams that gave up waiting in a queue.",
                sl.clone(),
                ld(&sc.queue_timeouts),
            );
            if s.usable() {
                if s.opts.backup {
                    bck += 1.0;
                } else {
                    act += 1.0;
                    w += f64::from(s.weight.load(Ordering::Relaxed));
                }
            }
            cur += scur;
            tot += ld(&sc.sessions);
            econ += ld(&sc.conn_errors);
            eresp += ld(&sc.resp_errors);
            retr += ld(&sc.retries);
            redis += ld(&sc.redispatches);
        }
        o.gauge(
            "ebb_backend_status",
            "1 when the backend can serve (a usable server, or files).",
            l.clone(),
            if act + bck > 0.0 { 1.0 } else { 0.0 },
        );
        o.gauge(
            "ebb_backend_active_servers",
            "Usable active servers.",
            l.clone(),
            act,
        );
        o.gauge(
            "ebb_backend_backup_servers",
            "Usable backup servers.",
            l.clone(),
            bck,
        );
        o.gauge(
            "ebb_backend_weight",
            "Total weight of the usable active servers.",
            l.clone(),
            w,
        );
        o.gauge(
            "ebb_backend_current_sessions",
            "Server slots in use, all servers together.",
            l.clone(),
            cur,
        );
        o.gauge(
            "ebb_backend_current_queue",
            "Streams waiting, all queues together.",
            l.clone(),
            f.queued() as f64,
        );
        o.counter(
            "ebb_backend_sessions_total",
            "Streams sent to a server of the backend.",
            l.clone(),
            tot,
        );
        o.counter(
            "ebb_backend_connection_errors_total",
            "Failed connection attempts.",
            l.clone(),
            econ,
        );
        o.counter(
            "ebb_backend_response_errors_total",
            "Broken or invalid responses.",
            l.clone(),
            eresp,
        );
        o.counter(
            "ebb_backend_retry_warnings_total",
            "Connection retries.",
            l.clone(),
            retr,
        );
        o.counter(
            "ebb_backend_redispatch_warnings_total",
            "Redispatches to another server.",
            l.clone(),
            redis,
        );
    }

    // `resolvers` sections: each nameserver's counters (`show resolvers`).
    for sec in crate::resolvers::sections() {
        for (ns, c) in sec.cfg.nameservers.iter().zip(&sec.ns) {
            let l = labels(&[("resolvers", &sec.cfg.name), ("nameserver", &ns.name)]);
            for (field, v) in c.fields() {
                let (name, help) = resolver_metric(field);
                o.counter(name, help, l.clone(), v as f64);
            }
        }
    }

    for (t, a) in p.handle.activity().iter().enumerate() {
        let ts = t.to_string();
        let l = labels(&[("thread", &ts)]);
        o.counter(
            "ebb_sched_loops_total",
            "Scheduler loop turns.",
            l.clone(),
            a.loops as f64,
        );
        o.counter(
            "ebb_sched_context_switches_total",
            "Task and tasklet callbacks run.",
            l.clone(),
            a.ctxsw as f64,
        );
        o.counter(
            "ebb_sched_tasks_run_total",
            "Task callbacks run.",
            l.clone(),
            a.tasksw as f64,
        );
        o.counter(
            "ebb_sched_timer_wakeups_total",
            "Tasks woken by their timer.",
            l.clone(),
            a.wake_tasks as f64,
        );
        o.counter(
            "ebb_sched_poll_events_total",
            "fd events dispatched.",
            l.clone(),
            a.poll_events as f64,
        );
        o.counter(
            "ebb_sched_cross_thread_wakeups_total",
            "Wakeups received from other threads.",
            l.clone(),
            a.xthr_wake as f64,
        );
        o.counter(
            "ebb_sched_accepts_total",
            "Connections accepted by the thread.",
            l.clone(),
            a.accepts as f64,
        );
        o.counter(
            "ebb_sched_idle_seconds_total",
            "Time spent sleeping in the poller.",
            l.clone(),
            a.idle_ns as f64 / 1e9,
        );
        o.gauge(
            "ebb_sched_avg_loop_seconds",
            "Sliding average of the loop time, excluding sleep.",
            l.clone(),
            a.avg_loop_us as f64 / 1e6,
        );
        o.gauge(
            "ebb_sched_cpu_use_ratio",
            "Share of time not spent sleeping (0..1).",
            l.clone(),
            a.cpu_use_pct() as f64 / 100.0,
        );
    }
    for r in p.handle.profiling_rows() {
        let l = labels(&[("function", r.name)]);
        o.counter(
            "ebb_sched_profile_calls_total",
            "Calls per callback (while profiling is on).",
            l.clone(),
            r.calls as f64,
        );
        o.counter(
            "ebb_sched_profile_cpu_seconds_total",
            "CPU time per callback (while profiling is on).",
            l.clone(),
            r.cpu_ns as f64 / 1e9,
        );
        o.counter(
            "ebb_sched_profile_latency_seconds_total",
            "Wakeup-to-run latency per callback (while profiling is on).",
            l,
            r.lat_ns as f64 / 1e9,
        );
    }

    let mut s = String::with_capacity(32 * 1024);
    for m in &o.metrics {
        let _ = writeln!(s, "# HELP {} {}", m.name, m.help);
        let _ = writeln!(s, "# TYPE {} {}", m.name, m.kind);
        for (l, v) in &m.samples {
            let _ = writeln!(s, "{}{} {}", m.name, l, fmt_value(*v));
        }
    }
    s
}

/// A sample value: integers without a fraction, others as Rust prints
/// them (both are valid Go `ParseFloat` input, which Prometheus uses).
fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Answers `http-request use-service prometheus-exporter`.
pub fn answer() -> Answer {
    let Some(p) = crate::registry::Process::global() else {
        return plain(503, "503 Service Unavailable: metrics are not ready yet.\n");
    };
    Answer {
        status: 200,
        headers: vec![("Content-Type", CONTENT_TYPE.into())],
        body: render(p).into_bytes(),
    }
}

/// The metric of a nameserver counter (`show resolvers` names).
fn resolver_metric(field: &str) -> (&'static str, &'static str) {
    match field {
        "sent" => ("ebb_resolver_sent_total", "DNS queries sent."),
        "snd_error" => (
            "ebb_resolver_send_errors_total",
            "DNS queries that could not be sent.",
        ),
        "valid" => ("ebb_resolver_valid_total", "Valid DNS answers."),
        "update" => (
            "ebb_resolver_updates_total",
            "Valid answers that changed a server.",
        ),
        "cname" => ("ebb_resolver_cname_total", "Valid answers through a CNAME."),
        "cname_error" => (
            "ebb_resolver_cname_errors_total",
            "CNAME chains that led nowhere.",
        ),
        "any_err" => (
            "ebb_resolver_errors_total",
            "NOERROR answers with an empty answer section.",
        ),
        "nx" => ("ebb_resolver_nx_total", "NXDOMAIN answers."),
        "timeout" => ("ebb_resolver_timeouts_total", "Queries left unanswered."),
        "refused" => ("ebb_resolver_refused_total", "REFUSED answers."),
        "other" => (
            "ebb_resolver_other_errors_total",
            "Other errors (SERVFAIL, no record of the type asked).",
        ),
        "invalid" => (
            "ebb_resolver_invalid_total",
            "Messages that are not DNS answers.",
        ),
        "too_big" => (
            "ebb_resolver_too_big_total",
            "Answers over the accepted payload size.",
        ),
        "truncated" => ("ebb_resolver_truncated_total", "Truncated answers."),
        _ => (
            "ebb_resolver_outdated_total",
            "Answers to no query in flight (late or foreign).",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_escaping_and_values() {
        assert_eq!(labels(&[("a", "x\"y\\z\n")]), "{a=\"x\\\"y\\\\z\\n\"}");
        assert_eq!(labels(&[]), "");
        assert_eq!(fmt_value(3.0), "3");
        assert_eq!(fmt_value(0.25), "0.25");
    }
}
