//! Discord's `zlib-stream` transport compression, pure: one zlib stream
//! for the whole connection, sent as binary frames; a gateway message ends
//! where a frame ends with the sync-flush marker `00 00 ff ff` (a message
//! may span several frames). Dispatches are JSON and repeat their field
//! names, so they shrink to a fraction of their size on the wire.
//!
//! The inflated size of one message is capped as the uncompressed frame
//! size is: a few kilobytes of compressed input must not become gigabytes
//! of memory.

use flate2::{Decompress, FlushDecompress, Status};

/// What ends every complete message of the stream.
const SYNC_FLUSH: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Why the stream cannot be read on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InflateError {
    #[error("a compressed gateway message inflates to more than {0} bytes")]
    TooLarge(usize),
    #[error("the gateway's zlib stream is corrupt: {0}")]
    Corrupt(String),
    #[error("a gateway message is not UTF-8")]
    NotText,
}

/// The receiving end of one connection's zlib stream.
pub struct Inflater {
    stream: Decompress,
    /// Compressed bytes of a message not yet complete.
    pending: Vec<u8>,
    max_message: usize,
}

impl Inflater {
    /// For a new connection; messages may inflate to `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        Self {
            stream: Decompress::new(true),
            pending: Vec::new(),
            max_message,
        }
    }

    /// Takes one binary frame; the message it completes, if it does.
    pub fn push(&mut self, frame: &[u8]) -> Result<Option<String>, InflateError> {
        if self.pending.len() + frame.len() > self.max_message {
            return Err(InflateError::TooLarge(self.max_message));
        }
        self.pending.extend_from_slice(frame);
        if !self.pending.ends_with(&SYNC_FLUSH) {
            return Ok(None);
        }
        let input = std::mem::take(&mut self.pending);
        let mut output = Vec::with_capacity((input.len() * 4).min(self.max_message));
        let mut consumed = 0;
        loop {
            if output.len() == output.capacity() {
                if output.len() >= self.max_message {
                    return Err(InflateError::TooLarge(self.max_message));
                }
                let more = output.len().max(4096).min(self.max_message - output.len());
                output.reserve_exact(more);
            }
            let (in_before, out_before) = (self.stream.total_in(), output.len());
            let status = self
                .stream
                .decompress_vec(&input[consumed..], &mut output, FlushDecompress::Sync)
                .map_err(|err| InflateError::Corrupt(err.to_string()))?;
            consumed += (self.stream.total_in() - in_before) as usize;
            let room_left = output.len() < output.capacity();
            if status == Status::StreamEnd || consumed >= input.len() && room_left {
                break;
            }
            if room_left && self.stream.total_in() == in_before && output.len() == out_before {
                return Err(InflateError::Corrupt("the stream stopped short".into()));
            }
        }
        String::from_utf8(output).map(Some).map_err(|_| InflateError::NotText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use herald_testkit::discord::zlib::Deflater;

    #[test]
    fn messages_of_one_stream_inflate_one_by_one() {
        let mut deflater = Deflater::new();
        let mut inflater = Inflater::new(1 << 20);
        for text in [
            r#"{"op":10,"d":{"heartbeat_interval":41250}}"#,
            r#"{"op":11}"#,
            r#"{"op":0,"t":"READY"}"#,
        ] {
            let frame = deflater.message(text);
            assert!(frame.ends_with(&SYNC_FLUSH));
            assert_eq!(inflater.push(&frame).unwrap().as_deref(), Some(text));
        }
    }

    #[test]
    fn a_message_split_over_frames_is_read_when_it_ends() {
        let mut deflater = Deflater::new();
        let mut inflater = Inflater::new(1 << 20);
        let text = format!(r#"{{"op":0,"d":{{"content":"{}"}}}}"#, "word ".repeat(2000));
        let frame = deflater.message(&text);
        let (head, tail) = frame.split_at(frame.len() / 2);
        assert_eq!(inflater.push(head).unwrap(), None);
        assert_eq!(inflater.push(tail).unwrap().as_deref(), Some(text.as_str()));
    }

    #[test]
    fn a_compression_bomb_is_refused() {
        let mut deflater = Deflater::new();
        let mut inflater = Inflater::new(64 * 1024);
        // A megabyte of zeros compresses to about a kilobyte.
        let bomb = "0".repeat(1 << 20);
        let frame = deflater.message(&bomb);
        assert!(frame.len() < 64 * 1024);
        assert_eq!(inflater.push(&frame), Err(InflateError::TooLarge(64 * 1024)));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut inflater = Inflater::new(1 << 20);
        let result = inflater.push(&[0x12, 0x34, 0x56, 0x00, 0x00, 0xff, 0xff]);
        assert!(matches!(result, Err(InflateError::Corrupt(_))), "{result:?}");
    }
}
