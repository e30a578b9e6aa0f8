//! When to sample: the mean interval in bytes, and the draws that turn it into a countdown.
//!
//! Sampling is a Poisson process over the bytes allocated, as tcmalloc's, jemalloc's and Go's:
//! an allocation of `n` bytes is sampled with probability `1 - exp(-n / rate)`, independently of
//! every other, so a sample of a large object stands for few objects and a sample of a small one
//! for many, and the estimate `count / p` is unbiased at every size. For a size class every
//! allocation has the same probability, so the number of allocations from one sample to the next
//! is geometric: a thread heap counts it down per class in the counter its fast path increments
//! anyway (see `heap/sampled.rs`), and the fast path's only extra instruction is the branch on
//! that counter reaching zero.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The mean sampling interval in bytes; 0 while profiling is off.
static RATE: AtomicU64 = AtomicU64::new(0);
/// Bumped on every change of [`RATE`]: a heap whose epoch differs arms its countdowns again on
/// its next slow path, or when a countdown fires. 1 at first, so that every heap (made with
/// epoch 0) arms its countdowns on its first slow path, profiling on or not.
static EPOCH: AtomicU32 = AtomicU32::new(1);

/// The countdown while profiling is off: a class's countdown fires every 65,536 allocations
/// (and draws again, sampling nothing), so that a thread that never leaves its fast paths still
/// sees a new epoch soon after profiling starts. A few dozen instructions per 65,536
/// allocations.
pub(crate) const POLL: u64 = 1 << 16;

/// The mean sampling interval in bytes, 0 when profiling is off.
#[inline]
pub(crate) fn rate() -> u64 {
    RATE.load(Ordering::Relaxed)
}

/// The sampling epoch (see [`EPOCH`]). Acquire: a heap that sees a new epoch sees the rate
/// that came with it.
#[inline]
pub(crate) fn epoch() -> u32 {
    EPOCH.load(Ordering::Acquire)
}

/// Sets the mean sampling interval (0: off) and starts a new epoch.
pub(crate) fn set_rate(bytes: u64) {
    RATE.store(bytes, Ordering::Relaxed);
    EPOCH.fetch_add(1, Ordering::Release);
}

/// The generator's state (splitmix64, stepped with one atomic add): shared by every thread, so
/// that the profiler keeps no thread-local of its own (a shared library would reach one through
/// `__tls_get_addr`). A draw is made only per sample and per large allocation while profiling
/// is on.
static RNG: AtomicU64 = AtomicU64::new(0);

/// A uniform draw in `(0, 1]`.
fn uniform() -> f64 {
    let mut z = RNG.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
}

/// Seeds the generator (each start: runs and processes draw differently).
pub(crate) fn seed() {
    RNG.store(
        crate::os::monotonic_ns() ^ (crate::os::process_id() as u64).rotate_left(40),
        Ordering::Relaxed,
    );
}

/// The probability that an allocation of `bytes` is sampled at mean interval `rate`.
pub(crate) fn probability(bytes: usize, rate: u64) -> f64 {
    if rate == 0 {
        return 0.0;
    }
    -libm::expm1(-(bytes.max(1) as f64) / rate as f64)
}

/// A countdown that does not reach zero in the life of a program (2^62 allocations).
const NEVER: u64 = 1 << 62;

/// How many allocations of `bytes` each, counting the sampled one, until the next sample at
/// mean interval `rate` (a geometric draw); [`POLL`] when `rate` is 0.
pub(crate) fn gap(bytes: usize, rate: u64) -> u64 {
    if rate == 0 {
        return POLL;
    }
    // P(gap > k) = (1 - p)^k with ln(1 - p) = -bytes / rate.
    let g = -libm::log(uniform()) * rate as f64 / bytes.max(1) as f64;
    if g >= NEVER as f64 {
        NEVER
    } else {
        g as u64 + 1
    }
}

/// A draw that succeeds with probability `q`.
pub(crate) fn chance(q: f64) -> bool {
    uniform() <= q
}

/// Whether one allocation of `bytes` is sampled now (a Bernoulli draw, for the large objects,
/// which take no countdown).
pub(crate) fn draw(bytes: usize, rate: u64) -> bool {
    rate != 0 && uniform() <= probability(bytes, rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_have_the_geometric_mean() {
        // Mean of the gap: 1 / p.
        let (bytes, rate) = (64, 64 * 100);
        let n = 200_000;
        let sum: u64 = (0..n).map(|_| gap(bytes, rate)).sum();
        let mean = sum as f64 / n as f64;
        let want = 1.0 / probability(bytes, rate);
        assert!(
            (mean - want).abs() < want * 0.02,
            "mean {mean}, want {want}"
        );
        assert_eq!(gap(bytes, 0), POLL);
    }

    #[test]
    fn draws_have_their_probability() {
        let n = 200_000;
        let hits = (0..n).filter(|_| draw(100_000, 200_000)).count();
        let want = probability(100_000, 200_000) * n as f64;
        assert!((hits as f64 - want).abs() < want * 0.03, "{hits} vs {want}");
        assert!(!draw(1 << 30, 0));
        assert!(probability(1 << 40, 1) > 0.999_999);
    }
}
