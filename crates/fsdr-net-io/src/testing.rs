//! Helpers of the unit tests.

/// A deterministic stream of pseudo-random numbers (xorshift64), the same in every run, for
/// tests that feed arbitrary input.
pub(crate) struct Noise(u64);

impl Noise {
    pub(crate) fn new() -> Self {
        Noise(0x9e37_79b9_7f4a_7c15)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `len` bytes.
    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// The size of a sweep: `n` natively, a fiftieth (at least `floor`) under Miri, which checks
/// the same paths at a thousandth of the speed.
pub(crate) fn sweep(n: u64, floor: u64) -> u64 {
    if cfg!(miri) { (n / 50).max(floor) } else { n }
}
