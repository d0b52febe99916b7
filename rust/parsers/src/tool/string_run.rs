//! The fast path inside a long string argument: while the last push ended inside a live call's
//! JSON string value, a piece without any of the run's stop bytes is that call's next arguments
//! fragment as it stands (`Engine::string_run`).

/// A live call's JSON string value, read up to the end of the buffered region (see
/// `Engine::string_run`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StringRun {
    /// The call whose arguments the value belongs to.
    pub(crate) index: usize,
    /// Bytes that end the run: those a JSON string cannot hold as is (quote, backslash, control
    /// bytes) and the first bytes of the region's end markers. A bit set, one bit per byte.
    stop: [u64; 4],
}

impl StringRun {
    pub(crate) fn new(index: usize, ends: &[&str]) -> Self {
        // Control bytes 0x00-0x1f, then `"` (0x22) and `\\` (0x5c).
        let mut stop = [0x0000_0004_ffff_ffff, 0x1000_0000, 0, 0];
        for first in ends.iter().filter_map(|e| e.as_bytes().first()) {
            stop[usize::from(first >> 6)] |= 1 << (first & 63);
        }
        Self { index, stop }
    }

    /// Whether `text` is plain characters that continue the run.
    pub(crate) fn continues(&self, text: &str) -> bool {
        text.bytes()
            .all(|b| self.stop[usize::from(b >> 6)] & (1 << (b & 63)) == 0)
    }
}
