//! Where the gateway's log lines go: stderr, with every URL's userinfo and query string
//! masked on the way (see [`redact::urls`]).
//!
//! The gateway redacts what it logs itself, but its dependencies log too: rmcp's
//! streamable-HTTP client worker, for one, logs reqwest errors with the full URL, whose
//! query string may carry an API key. Masking at the sink covers every line, whoever
//! wrote it.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

use crate::redact;

/// A [`MakeWriter`] for stderr that redacts URLs in each log line.
pub struct RedactedStderr;

impl<'a> MakeWriter<'a> for RedactedStderr {
    type Writer = RedactedLine;

    fn make_writer(&'a self) -> RedactedLine {
        RedactedLine(Vec::new())
    }
}

/// One log line (the formatter makes a writer per event), written to stderr, redacted,
/// when it is dropped: a URL is never split between two writes.
pub struct RedactedLine(Vec<u8>);

impl Write for RedactedLine {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&self.0);
        let _ = io::stderr()
            .lock()
            .write_all(redact::urls(&line).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_kept_whole_until_it_is_written() {
        let mut line = RedactedStderr.make_writer();
        write!(line, "GET http://example.test/mcp?").unwrap();
        write!(line, "api_key=hunter2 failed").unwrap();
        assert_eq!(
            redact::urls(&String::from_utf8_lossy(&line.0)),
            "GET http://example.test/mcp?*** failed"
        );
    }
}
