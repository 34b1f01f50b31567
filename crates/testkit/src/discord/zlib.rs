//! The sending end of Discord's `zlib-stream` transport compression: one
//! zlib stream per connection, each gateway message compressed and ended
//! with a sync flush (`00 00 ff ff`), as the gateway sends it to a client
//! that connected with `compress=zlib-stream`.

use flate2::{Compress, Compression, FlushCompress};

/// One connection's zlib stream.
pub struct Deflater(Compress);

impl Default for Deflater {
    fn default() -> Self {
        Self::new()
    }
}

impl Deflater {
    pub fn new() -> Self {
        Self(Compress::new(Compression::default(), true))
    }

    /// `text` as the binary frame that carries it.
    pub fn message(&mut self, text: &str) -> Vec<u8> {
        let bytes = text.as_bytes();
        let start = self.0.total_in();
        let mut out = Vec::with_capacity(bytes.len() / 2 + 64);
        loop {
            let done = (self.0.total_in() - start) as usize;
            self.0
                .compress_vec(&bytes[done..], &mut out, FlushCompress::Sync)
                .expect("deflating into a growing buffer");
            if (self.0.total_in() - start) as usize == bytes.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity().max(64));
        }
        out
    }
}
