//! `fencelock-node`: parse the command line, run it on a tokio runtime, and
//! turn any failure into one line on stderr and an exit code.

use clap::Parser;
use fencelock_node::cli::{self, Cli};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Worker threads: the event loop, connection tasks and the blocking fsync
/// share two, the size of the machine this runs on.
const WORKER_THREADS: usize = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // clap's first line names the problem; the usage lines after it are noise in a log.
            let text = e.render().to_string();
            let line = text.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ");
            eprintln!("fencelock-node: {line}");
            return ExitCode::from(2);
        }
    };
    // A server logs its life at info; a one-shot command keeps stderr for
    // its one error line unless RUST_LOG asks for more.
    let level = if cli.is_serve() { "info" } else { "warn" };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(WORKER_THREADS).enable_all().build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fencelock-node: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("fencelock-node: {}", failure.message());
            ExitCode::from(failure.code())
        }
    }
}
