//! The `ebb` command.
//!
//! ```text
//! ebb                          serve the current directory on port 8080
//! ebb --root DIR --bind A:P    serve DIR on A:P
//! ebb -f FILE [-f FILE ...]    run from a configuration (HAProxy grammar)
//! ebb -c -f FILE               check a configuration, exit 0 or 1
//! ebb -D -f FILE [-p PIDFILE]  run in the background (HAProxy's -D)
//! ebb -cc 'EXPR'               evaluate a condition (version_atleast(2.4))
//! ebb -v                       version
//! ebb cli SOCKET "COMMAND"     run a command on a running ebb's stats socket
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser, Subcommand};

use ebb::server::{default_config_text, run, RunOptions};

#[derive(Parser, Debug)]
#[command(
    name = "ebb",
    version,
    about = "ebb: a web server and load balancer on its own task scheduler",
    disable_version_flag = true
)]
struct Args {
    /// Configuration file (HAProxy grammar), or a directory whose `*.cfg`
    /// files are read in name order; several are read in order.
    #[arg(short = 'f', value_name = "FILE", action = ArgAction::Append)]
    files: Vec<PathBuf>,
    /// Check the configuration and exit: 0 if valid, 1 with every error.
    #[arg(short = 'c')]
    check: bool,
    /// Print the version and exit.
    #[arg(short = 'v', long = "version", action = ArgAction::Version)]
    version: Option<bool>,
    /// Write the process id to this file.
    #[arg(short = 'p', value_name = "PIDFILE")]
    pidfile: Option<PathBuf>,
    /// Stay in the foreground and print debug messages.
    #[arg(short = 'd')]
    debug: bool,
    /// Run in the background (as the global `daemon` keyword); `-d` and
    /// `-db` win.
    #[arg(short = 'D')]
    daemon: bool,
    /// Quiet: print nothing while starting (not even configuration errors;
    /// the exit status tells), as HAProxy's `-q`.
    #[arg(short = 'q')]
    quiet: bool,
    /// Verbose: cancels `-q`.
    #[arg(short = 'V')]
    verbose: bool,
    /// Change to this directory before reading the configuration.
    #[arg(short = 'C', value_name = "DIR")]
    chdir: Option<PathBuf>,
    /// Master-worker mode: a master process runs the workers and reloads
    /// on SIGUSR2 without closing a listening socket.
    #[arg(short = 'W')]
    master_worker: bool,
    /// Master CLI socket (with -W): ADDR[,OPTION,VALUE]... (mode, user, group,
    /// uid, gid, level, expose-fd); several allowed.
    #[arg(short = 'S', value_name = "SOCKET", action = ArgAction::Append)]
    master_cli: Vec<String>,
    /// The local peer name (HAProxy's `-L`): which `peer` of a `peers`
    /// section is this process (default: `localpeer`, else the host
    /// name); also set as `HAPROXY_LOCALPEER`.
    #[arg(short = 'L', value_name = "NAME")]
    local_peer: Option<String>,
    /// Take the listening sockets of a running process from its stats
    /// socket (`expose-fd listeners`) before binding.
    #[arg(short = 'x', value_name = "SOCKET")]
    transfer: Option<PathBuf>,
    /// Without -f: the directory to serve (default: the current one).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Without -f: the address to listen on (default: 0.0.0.0:8080).
    #[arg(long, value_name = "ADDR:PORT")]
    bind: Option<String>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run CLI commands on a running ebb's `stats socket` and print the
    /// answer (`;` separates several commands).
    Cli {
        /// The socket's path.
        socket: PathBuf,
        /// The command, e.g. "show info" (several words are joined).
        #[arg(required = true, num_args = 1..)]
        command: Vec<String>,
    },
}

/// `ebb cli SOCKET COMMAND`: sends one line, prints what comes back until
/// the server closes (it does after one line in non-interactive mode).
fn cli(socket: &std::path::Path, command: &[String]) -> ExitCode {
    use std::io::{Read, Write};
    let line = command.join(" ");
    let mut s = match std::os::unix::net::UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ebb: cannot connect to {}: {e}", socket.display());
            return ExitCode::from(1);
        }
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(60)));
    if let Err(e) = s.write_all(format!("{line}\n").as_bytes()) {
        eprintln!("ebb: cannot send the command: {e}");
        return ExitCode::from(1);
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    if let Err(e) = s.read_to_end(&mut out) {
        eprintln!("ebb: reading the answer: {e}");
        return ExitCode::from(1);
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&out);
    let _ = stdout.flush();
    ExitCode::SUCCESS
}

/// `-f DIR`: the directory's `*.cfg` files in name order, as HAProxy
/// reads them (not recursive; other files are skipped).
fn expand_dirs(files: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for f in files {
        if !f.is_dir() {
            out.push(f.clone());
            continue;
        }
        let rd = std::fs::read_dir(f)
            .map_err(|e| format!("ebb: cannot read directory {}: {e}", f.display()))?;
        let mut v: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "cfg") && p.is_file())
            .collect();
        v.sort();
        out.extend(v);
    }
    Ok(out)
}

/// `ebb -cc EXPR`: HAProxy's condition check (exit 0 true, 1 false, 2
/// on a malformed expression), used by test scripts to ask what the
/// program supports.
fn check_condition(expr: &str) -> ExitCode {
    match ebb::config::cond::eval(expr, &|k| std::env::var(k).ok()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ebb: -cc '{expr}': {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints errors with one `write` for all, so a reader of the pipe (a
/// test harness) never sees a message cut in pieces.
fn report<'a>(errs: impl Iterator<Item = &'a ebb::config::ConfigError>) {
    use std::io::Write;
    let mut out = String::new();
    for e in errs {
        out.push_str(&e.to_string());
        out.push('\n');
    }
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// Removes `-sf PID...` / `-st PID...` from the arguments: (the rest, the
/// pids, the signal: SIGUSR1 for -sf, SIGTERM for -st).
fn take_old_pids(argv: &[String]) -> Result<(Vec<String>, Vec<u32>, i32), String> {
    let mut rest = Vec::new();
    let mut pids = Vec::new();
    let mut sig = libc::SIGUSR1;
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        if a == "-sf" || a == "-st" {
            sig = if a == "-sf" {
                libc::SIGUSR1
            } else {
                libc::SIGTERM
            };
            i += 1;
            while let Some(p) = argv.get(i).and_then(|x| x.parse::<u32>().ok()) {
                if p == 0 {
                    return Err(format!("{a}: 0 is not a process id"));
                }
                pids.push(p);
                i += 1;
            }
            continue;
        }
        rest.push(a.clone());
        i += 1;
    }
    Ok((rest, pids, sig))
}

fn master_opts(args: &Args, files: Vec<PathBuf>, argv: Vec<String>) -> ebb::mworker::MasterOptions {
    ebb::mworker::MasterOptions {
        argv,
        mcli: args.master_cli.clone(),
        run: RunOptions {
            debug: args.debug,
            quiet: (args.quiet || ebb::config::quiet_seen()) && !args.verbose,
            files,
            pidfile: args.pidfile.clone(),
            daemon: false,
            worker: true,
            old_pids: Vec::new(),
            old_signal: 0,
            ..RunOptions::default()
        },
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(i) = argv.iter().position(|a| a == "-cc") {
        return match argv.get(i + 1) {
            Some(e) => check_condition(e),
            None => {
                eprintln!("ebb: -cc expects a condition");
                ExitCode::from(2)
            }
        };
    }
    // `-sf PID...` / `-st PID...` (two-letter flags clap cannot take):
    // the old processes to signal once this one is ready.
    let (argv_rest, old_pids, old_signal) = match take_old_pids(&argv) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("ebb: {e}");
            return ExitCode::from(2);
        }
    };
    // HAProxy's two-letter flags: `-Ws` (master-worker for systemd's
    // `Type=notify`: ebb notifies whenever $NOTIFY_SOCKET is set) and `-db`
    // (stay in the foreground whatever `daemon`/`-D` say).
    let mut foreground = false;
    let argv_rest: Vec<String> = argv_rest
        .into_iter()
        .filter_map(|a| match a.as_str() {
            "-Ws" => Some("-W".to_string()),
            "-db" => {
                foreground = true;
                None
            }
            // `ssl-server-verify none` unless the configuration says.
            "-dV" => {
                ebb::config::set_dash_dv();
                None
            }
            // `zero-warning` whatever the configuration says.
            "-dW" => {
                ebb::config::set_dash_dw();
                None
            }
            _ => Some(a),
        })
        .collect();
    let args = Args::parse_from(&argv_rest);
    let quiet = args.quiet && !args.verbose;
    if let Some(d) = &args.chdir {
        if let Err(e) = std::env::set_current_dir(d) {
            if !quiet {
                eprintln!("ebb: -C {}: {e}", d.display());
            }
            return ExitCode::from(1);
        }
    }
    if let Some(Cmd::Cli { socket, command }) = &args.cmd {
        return cli(socket, command);
    }
    // The local peer: -L, else `localpeer`, else the host name (HAProxy's
    // order); $HAPROXY_LOCALPEER names it in the configuration.
    if let Some(p) = &args.local_peer {
        ebb::config::set_local_peer_arg(p);
    }
    let peer = ebb::config::local_peer_name(None);
    // Single-threaded still: nothing reads the environment concurrently.
    std::env::set_var("HAPROXY_LOCALPEER", peer);
    let files = match expand_dirs(&args.files) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let parsed = if args.files.is_empty() {
        let root = match args.root.clone().map_or_else(std::env::current_dir, Ok) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("ebb: cannot find the current directory: {e}");
                return ExitCode::from(1);
            }
        };
        if !root.is_dir() {
            eprintln!("ebb: --root {}: not a directory", root.display());
            return ExitCode::from(1);
        }
        let bind = args.bind.clone().unwrap_or_else(|| "0.0.0.0:8080".into());
        let text = default_config_text(&root, &bind);
        ebb::config::parse_str("<command line>", &text)
    } else {
        if args.root.is_some() || args.bind.is_some() {
            eprintln!("ebb: --root and --bind apply only without -f");
            return ExitCode::from(1);
        }
        ebb::config::parse_files(&files)
    };
    // `quiet` in the configuration is `-q` (read even when the rest is
    // refused: HAProxy then reports nothing either).
    let quiet = (args.quiet || ebb::config::quiet_seen()) && !args.verbose;
    let master = args.master_worker
        || parsed.as_ref().is_ok_and(|c| c.global.master_worker)
        || ebb::mworker::is_reexec();
    if !args.master_cli.is_empty() && !master {
        eprintln!("ebb: -S (master CLI) needs master-worker mode (-W)");
        return ExitCode::from(1);
    }
    if master && !args.check && (args.transfer.is_some() || !old_pids.is_empty()) {
        eprintln!("ebb: -x, -sf and -st do not apply in master-worker mode: the master passes the sockets itself");
        return ExitCode::from(1);
    }
    let cfg = match parsed {
        Ok(c) => c,
        Err(errs) => {
            if !quiet {
                report(errs.iter());
            }
            if master && !args.check && ebb::mworker::is_reexec() {
                // A reload whose configuration does not load: the master
                // goes on with its running workers.
                return ExitCode::from(
                    ebb::mworker::run(None, master_opts(&args, files, argv)) as u8
                );
            }
            return ExitCode::from(1);
        }
    };
    // HAProxy: "Can't use a 'program' section without master worker mode".
    if let (false, Some(p)) = (master, cfg.programs.first()) {
        if quiet {
            return ExitCode::from(1);
        }
        eprintln!(
            "{}: 'program' section '{}' needs master-worker mode (-W or global 'master-worker')",
            p.loc, p.name
        );
        return ExitCode::from(1);
    }
    if args.check {
        // The same compile step the server runs, so -c finds what start-up
        // would refuse.
        // Certificates and keys are loaded too, as start-up would.
        let tls_errs = ebb::tls::check_config(&cfg);
        if !tls_errs.is_empty() {
            if !quiet {
                for e in &tls_errs {
                    eprintln!("{e}");
                }
            }
            return ExitCode::from(1);
        }
        return match ebb::proxy::compile(&cfg) {
            Ok(c) => {
                if !quiet {
                    for w in &c.warnings {
                        eprintln!("ebb: warning: {w}");
                    }
                }
                if cfg.global.zero_warning && !c.warnings.is_empty() {
                    if !quiet {
                        eprintln!("ebb: {}", ebb::proxy::ZERO_WARNING_ABORT);
                    }
                    return ExitCode::from(1);
                }
                if !quiet {
                    println!("Configuration file is valid");
                }
                ExitCode::SUCCESS
            }
            Err(errs) => {
                if !quiet {
                    report(errs.iter());
                }
                ExitCode::from(1)
            }
        };
    }
    // `setenv` and its kin: the process's environment, for what it starts
    // (`program` sections) and what reads it later, while no other thread
    // exists yet.
    cfg.global.environ.apply_to_process();
    let daemon = (args.daemon || cfg.global.daemon) && !args.debug && !foreground;
    if master {
        let mut o = master_opts(&args, files, argv);
        o.run.daemon = daemon;
        return ExitCode::from(ebb::mworker::run(Some(cfg), o) as u8);
    }
    if let Some(x) = &args.transfer {
        match ebb::handover::fetch(x) {
            Ok(n) => {
                if args.debug {
                    eprintln!("ebb: -x: {n} listening sockets from {}", x.display());
                }
            }
            Err(e) => {
                // HAProxy goes on and binds (a first start has no old process).
                if !quiet {
                    eprintln!("ebb: warning: -x {}: {e}; binding anew", x.display());
                }
            }
        }
    }
    let code = run(
        cfg,
        RunOptions {
            debug: args.debug,
            quiet,
            files,
            pidfile: args.pidfile,
            // -d keeps ebb in the foreground even with `daemon` (HAProxy).
            daemon,
            worker: false,
            old_pids,
            old_signal,
            ..RunOptions::default()
        },
    );
    ExitCode::from(code as u8)
}
