//! Discord's `zlib-stream` transport compression as Herald inflates it
//! (`discord::gateway::zlib::Inflater`): the bytes cut into binary frames
//! where the first byte of each piece says how long it is, pushed one
//! after another into one connection's inflater with a 64 KiB cap.
//!
//! Asserts that nothing panics, that no message comes out larger than the
//! cap (a compression bomb is refused, not inflated), and that once the
//! stream is refused it is not read on.

#![no_main]

use herald_channels::discord::gateway::zlib::Inflater;
use libfuzzer_sys::fuzz_target;

const CAP: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut inflater = Inflater::new(CAP);
    let mut rest = data;
    while let Some((&length, tail)) = rest.split_first() {
        let length = usize::from(length).min(tail.len());
        let (frame, tail) = tail.split_at(length);
        rest = tail;
        match inflater.push(frame) {
            Ok(Some(message)) => assert!(message.len() <= CAP, "{} bytes past the cap", message.len()),
            Ok(None) => {}
            // The connection is dropped on an error: nothing more is read.
            Err(_) => return,
        }
    }
});
