//! [`RampCheck`]: a sink that verifies the emulator's ramp signal sample by sample.

use futuresdr::runtime::dev::prelude::*;
use num_complex::{Complex, Complex32};

use crate::io::emulator::ramp_index;
use crate::io::sample::Item;

/// A sample that can carry the emulator's ramp (sc16 values, possibly scaled to f32).
pub trait RampSample: Item {
    /// The sc16 components of the sample.
    fn sc16(&self) -> (i16, i16);
}

impl RampSample for Complex<i16> {
    fn sc16(&self) -> (i16, i16) {
        (self.re, self.im)
    }
}

impl RampSample for Complex32 {
    fn sc16(&self) -> (i16, i16) {
        // Exact inverse of the 1/32767 scaling for every i16 value.
        (
            (self.re * 32767.0).round() as i16,
            (self.im * 32767.0).round() as i16,
        )
    }
}

/// Counts items and, when enabled, checks that consecutive samples carry consecutive ramp
/// indices ([`crate::io::emulator::Signal::Ramp`]). It reads in place: with
/// `I = circuit::Reader<T>` it sits behind an
/// [`InPlaceUdpSource`](crate::InPlaceUdpSource) and checks the samples where the kernel put
/// them.
///
/// # Stream Inputs
///
/// `input`: samples (FutureSDR's default buffer, or any CPU reader such as the circuit
/// buffer's).
///
/// # Stream Outputs
///
/// No stream outputs.
///
/// # Usage
/// ```
/// use fsdr_net::RampCheck;
/// use futuresdr::num_complex::Complex32;
///
/// let check = RampCheck::<Complex32>::new(true);
/// assert_eq!(check.discontinuities(), 0);
/// ```
#[derive(Block)]
pub struct RampCheck<T: RampSample, I: CpuBufferReader<Item = T> = DefaultCpuReader<T>> {
    #[input]
    input: I,
    check: bool,
    items: u64,
    next: Option<u32>,
    discontinuities: u64,
    first: Option<u64>,
}

impl<T: RampSample, I: CpuBufferReader<Item = T>> RampCheck<T, I> {
    /// A sink that counts, and checks the ramp when `check` is true.
    pub fn new(check: bool) -> Self {
        Self {
            input: I::default(),
            check,
            items: 0,
            next: None,
            discontinuities: 0,
            first: None,
        }
    }

    /// Items consumed.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Places where the ramp did not continue.
    pub fn discontinuities(&self) -> u64 {
        self.discontinuities
    }

    /// Item index of the first discontinuity.
    pub fn first_discontinuity(&self) -> Option<u64> {
        self.first
    }
}

#[doc(hidden)]
impl<T: RampSample, I: CpuBufferReader<Item = T>> Kernel for RampCheck<T, I> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let input = self.input.slice();
        let n = input.len();
        if self.check {
            for (k, s) in input.iter().enumerate() {
                let (i, q) = s.sc16();
                let idx = ramp_index(i, q);
                if let Some(want) = self.next
                    && want != idx
                {
                    self.discontinuities += 1;
                    self.first.get_or_insert(self.items + k as u64);
                }
                self.next = Some(idx.wrapping_add(1));
            }
        }
        self.items += n as u64;
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}
