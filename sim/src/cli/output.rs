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

/// `value` as compact JSON, written as it is serialized (`{}` prints it):
/// a large object — a hunt's thousand examples — is never held whole as text.
pub struct JsonText<'a, T>(pub &'a T);

impl<T: serde::Serialize> std::fmt::Display for JsonText<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        serde_json::to_writer(FmtWriter(f), self.0).map_err(|_| std::fmt::Error)
    }
}

/// serde_json's writer over a formatter. serde_json writes whole `str`
/// slices and ASCII, so every buffer is UTF-8 on its own.
struct FmtWriter<'a, 'b>(&'a mut std::fmt::Formatter<'b>);

impl std::io::Write for FmtWriter<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = std::str::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        self.0.write_str(text).map_err(std::io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
