//! Output of the command line: stdout that ends quietly on a closed pipe.

/// `println!` for the command line's output: a closed pipe
/// (`fencesim replay --trace | head`) ends the program quietly instead of
/// panicking.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::output::write_line(format_args!($($arg)*))
    };
}

/// Writes one line to stdout; exits quietly when stdout is gone.
pub fn write_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        std::process::exit(0);
    }
}

/// Writes one line to stdout; `false` when stdout is gone (a closed pipe),
/// for a command that must end with the exit code of what it found.
pub fn try_write_line(line: std::fmt::Arguments<'_>) -> bool {
    use std::io::Write;
    writeln!(std::io::stdout().lock(), "{line}").is_ok()
}
