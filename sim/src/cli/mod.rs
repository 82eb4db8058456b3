//! The `fencesim` command line (CLI.md): hunt, replay, run, variants, bench, shrink, merge, model, explore;
//! `view` is how replay and run show a trace.
//!
//! Every input error is one line on stderr and exit code 2; a violated
//! property is exit code 1; anything else is 0.

pub mod args;
pub mod bench;
pub mod cells;
pub mod coverage;
pub mod explore;
pub mod hunt;
pub mod merge;
pub mod output;
pub mod plot;
pub mod real;
pub mod records;
pub mod replay;
pub mod shard;
pub mod shrink;
pub mod summary;
pub mod sweep_file;
pub mod variants;
pub mod view;

use args::{Cli, Command, InputError};
use clap::Parser;
use std::process::ExitCode;

pub fn main_with(args: Vec<String>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => return clap_error(error),
    };
    match execute(cli) {
        Ok(code) => code,
        Err(InputError(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// clap's help and version go to stdout with code 0; its errors become one
/// line and code 2: the message with what it names (the missing argument,
/// the bad value), without the usage and the pointer to --help.
fn clap_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{}", error_line(&error.render().to_string()));
            ExitCode::from(2)
        }
    }
}

/// The first paragraph of clap's rendered error, joined onto one line,
/// with clap's tip of a similar name as "did you mean" (`hunt --seed 5`:
/// did you mean `--seeds`?).
fn error_line(rendered: &str) -> String {
    let paragraph: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .skip_while(|line| line.is_empty())
        .take_while(|line| !line.is_empty() && !line.starts_with("Usage:"))
        .collect();
    let line = paragraph.join(" ");
    if line.is_empty() {
        return "error: invalid arguments".to_string();
    }
    match similar_names(rendered) {
        Some(names) => format!("{line}; did you mean {names}?"),
        None => line,
    }
}

/// The names of clap's tip `a similar argument exists: '--seeds'` (or
/// `some similar subcommands exist: 'a', 'b'`), as `` `--seeds` `` or `` `a` or `b` ``.
fn similar_names(rendered: &str) -> Option<String> {
    let tip = rendered.lines().map(str::trim).find_map(|line| line.strip_prefix("tip: "))?;
    let (what, names) = tip.split_once(": ")?;
    if !what.contains("similar") {
        return None;
    }
    let names: Vec<String> = names.split('\'').skip(1).step_by(2).map(|name| format!("`{name}`")).collect();
    (!names.is_empty()).then(|| names.join(" or "))
}

fn execute(cli: Cli) -> Result<ExitCode, InputError> {
    match cli.command {
        Command::Hunt(args) => hunt::hunt(&args),
        Command::Replay(args) => replay::replay(&args),
        Command::Real(args) => real::real(&args),
        Command::Run(args) => replay::run_files(&args),
        Command::Variants(args) => variants::variants(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Shrink(args) => shrink::shrink(&args),
        Command::Merge(args) => merge::merge(&args),
        Command::Model => {
            crate::outln!("{}", crate::model::Model::commented_toml().trim_end());
            Ok(ExitCode::SUCCESS)
        }
        Command::Explore(args) => explore::explore(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::error_line;

    #[test]
    fn a_similar_name_becomes_a_did_you_mean() {
        let rendered = "error: unexpected argument '--seed' found\n\n  tip: a similar argument exists: '--seeds'\n\n\
                        Usage: fencesim hunt --seeds <SEEDS>\n\nFor more information, try '--help'.\n";
        assert_eq!(error_line(rendered), "error: unexpected argument '--seed' found; did you mean `--seeds`?");
        let two = "error: unrecognized subcommand 'rn'\n\n  tip: some similar subcommands exist: 'run', 'bench'\n";
        assert_eq!(error_line(two), "error: unrecognized subcommand 'rn'; did you mean `run` or `bench`?");
        let other = "error: unexpected argument 'x' found\n\n  tip: to pass 'x' as a value, use '-- x'\n";
        assert_eq!(error_line(other), "error: unexpected argument 'x' found");
    }
}
