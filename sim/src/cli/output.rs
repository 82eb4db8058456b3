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
