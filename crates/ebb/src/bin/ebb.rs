//! The `ebb` command.
//!
//! ```text
//! ebb                          serve the current directory on port 8080
//! ebb --root DIR --bind A:P    serve DIR on A:P
//! ebb -f FILE [-f FILE ...]    run from a configuration (HAProxy grammar)
//! ebb -c -f FILE               check a configuration, exit 0 or 1
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
    /// Configuration file (HAProxy grammar); several are read in order.
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

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Cmd::Cli { socket, command }) = &args.cmd {
        return cli(socket, command);
    }
    let cfg = if args.files.is_empty() {
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
        match ebb::config::parse_str("<command line>", &text) {
            Ok(c) => c,
            Err(errs) => {
                for e in errs {
                    eprintln!("{e}");
                }
                return ExitCode::from(1);
            }
        }
    } else {
        if args.root.is_some() || args.bind.is_some() {
            eprintln!("ebb: --root and --bind apply only without -f");
            return ExitCode::from(1);
        }
        match ebb::config::parse_files(&args.files) {
            Ok(c) => c,
            Err(errs) => {
                for e in &errs {
                    eprintln!("{e}");
                }
                return ExitCode::from(1);
            }
        }
    };
    if args.check {
        // The same compile step the server runs, so -c finds what start-up
        // would refuse.
        // Certificates and keys are loaded too, as start-up would.
        let tls_errs = ebb::tls::check_config(&cfg);
        if !tls_errs.is_empty() {
            for e in tls_errs {
                eprintln!("{e}");
            }
            return ExitCode::from(1);
        }
        return match ebb::proxy::compile(&cfg) {
            Ok(_) => {
                println!("Configuration file is valid");
                ExitCode::SUCCESS
            }
            Err(errs) => {
                for e in errs {
                    eprintln!("{e}");
                }
                ExitCode::from(1)
            }
        };
    }
    let code = run(
        cfg,
        RunOptions {
            debug: args.debug,
            files: args.files,
            pidfile: args.pidfile,
        },
    );
    ExitCode::from(code as u8)
}
