//! The `ebb` command.
//!
//! ```text
//! ebb                          serve the current directory on port 8080
//! ebb --root DIR --bind A:P    serve DIR on A:P
//! ebb -f FILE [-f FILE ...]    run from a configuration (HAProxy grammar)
//! ebb -c -f FILE               check a configuration, exit 0 or 1
//! ebb -v                       version
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser};

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
}

fn main() -> ExitCode {
    let args = Args::parse();
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
