//! Statistics for benchmark samples (the error function from `statrs`).
//!
//! Everything here works on plain `f64` slices (typically nanoseconds per
//! operation, one value per measurement round) and never panics on odd
//! input: an empty slice, or input for which a figure is undefined, yields
//! `f64::NAN` (or, for the U test, `None`).
//!
//! The figures follow benchstat's conventions:
//!
//! * the central value is the [`median`];
//! * the spread shown next to it ([`spread`]) is the largest relative
//!   deviation from the median among the samples that are not outliers by
//!   Tukey's rule (outside `[Q1 - 1.5 IQR, Q3 + 1.5 IQR]`), i.e. "the middle
//!   samples all lie within ± this fraction of the median";
//! * two configurations are compared with the two-sided Mann-Whitney U test
//!   ([`mann_whitney_u`]), which assumes nothing about the distribution of
//!   the timings;
//! * a summary across rows is the [`geomean`].

/// Returns a sorted copy of `samples`, with NaNs ordered last.
fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The median of `samples`: the middle value for an odd count, the mean of
/// the two middle values for an even count.
///
/// Returns `NaN` for an empty slice.
pub fn median(samples: &[f64]) -> f64 {
    quantile(samples, 0.5)
}

/// The `q`-quantile of `samples` (`0.0 <= q <= 1.0`), linearly interpolated
/// between order statistics (the "type 7" definition used by R and NumPy by
/// default), so `quantile(s, 0.5) == median(s)`.
///
/// Returns `NaN` for an empty slice or a `q` outside `[0, 1]`.
pub fn quantile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() || !(0.0..=1.0).contains(&q) {
        return f64::NAN;
    }
    quantile_sorted(&sorted(samples), q)
}

/// [`quantile`] on data that is already sorted ascending and non-empty.
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// The interquartile range `Q3 - Q1` of `samples`, in the samples' unit.
///
/// Returns `NaN` for an empty slice.
pub fn iqr(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let s = sorted(samples);
    quantile_sorted(&s, 0.75) - quantile_sorted(&s, 0.25)
}

/// The benchstat-style spread of `samples`, as a fraction of the median
/// (`0.03` means "± 3 %").
///
/// Samples outside Tukey's fences `[Q1 - 1.5 IQR, Q3 + 1.5 IQR]` are
/// discarded as outliers; the result is the largest `|x - median| / median`
/// over the remaining samples. It is `0.0` when all kept samples equal the
/// median, and `NaN` for an empty slice or a median of zero.
pub fn spread(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let s = sorted(samples);
    let med = quantile_sorted(&s, 0.5);
    if med == 0.0 {
        return f64::NAN;
    }
    let (q1, q3) = (quantile_sorted(&s, 0.25), quantile_sorted(&s, 0.75));
    let (lo, hi) = (q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1));
    s.iter()
        .filter(|&&x| lo <= x && x <= hi)
        .map(|&x| ((x - med) / med).abs())
        .fold(0.0, f64::max)
}

/// The geometric mean of `values`: `exp(mean(ln x))`.
///
/// This is the right summary for ratios and for timings of different
/// magnitudes (every row weighs the same). Returns `NaN` for an empty slice
/// or when any value is zero, negative or NaN.
pub fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() || values.iter().any(|&x| x.is_nan() || x <= 0.0) {
        return f64::NAN;
    }
    let mean_ln = values.iter().map(|x| x.ln()).sum::<f64>() / values.len() as f64;
    mean_ln.exp()
}

/// The result of a two-sided Mann-Whitney U test; see [`mann_whitney_u`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// The U statistic of the first sample: the number of pairs `(a, b)`
    /// with `a > b`, counting ties as one half.
    pub u: f64,
    /// The two-sided p-value: the probability, if both samples came from the
    /// same distribution, of a U at least this far from its mean `n1 n2 / 2`.
    pub p: f64,
    /// Whether `p` is exact (the permutation distribution of U) rather than
    /// the normal approximation.
    pub exact: bool,
}

/// Largest sample size for which the exact distribution of U is used (when
/// there are no ties); above it, the normal approximation is accurate.
const EXACT_MAX_N: usize = 50;

/// The two-sided Mann-Whitney U test (Wilcoxon rank-sum test) of whether
/// samples `a` and `b` come from the same distribution.
///
/// When both samples have at most 50 values and there are no ties across the
/// pooled data, the p-value is exact (computed from the permutation
/// distribution of U). Otherwise it uses the normal approximation with tie
/// correction and a continuity correction of 1/2. If every pooled value is
/// identical, U carries no information and `p` is `1.0`.
///
/// Returns `None` if either sample is empty or contains a NaN.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| x.is_nan()) {
        return None;
    }
    let (n1, n2) = (a.len(), b.len());
    // Rank the pooled samples, giving tied values the mean of their ranks.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0; // sum over tie groups of t^3 - t
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i) as f64;
        let mean_rank = (i + 1 + j) as f64 / 2.0; // ranks i+1 ..= j
        rank_sum_a += mean_rank * pooled[i..j].iter().filter(|e| e.1).count() as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let u = rank_sum_a - (n1 * (n1 + 1)) as f64 / 2.0;
    let mean = (n1 * n2) as f64 / 2.0;

    if tie_term == 0.0 && n1 <= EXACT_MAX_N && n2 <= EXACT_MAX_N {
        // Without ties U is an integer; P(U <= u) from the exact distribution.
        let counts = u_distribution(n1, n2);
        let total: f64 = counts.iter().sum();
        let k = u.round() as usize;
        let lower: f64 = counts[..=k].iter().sum::<f64>() / total;
        let upper: f64 = counts[k..].iter().sum::<f64>() / total;
        let p = (2.0 * lower.min(upper)).min(1.0);
        return Some(MannWhitney { u, p, exact: true });
    }

    let nf = n as f64;
    let var = (n1 * n2) as f64 / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    let p = if var <= 0.0 {
        1.0
    } else {
        let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
        (2.0 * normal_sf(z)).min(1.0)
    };
    Some(MannWhitney { u, p, exact: false })
}

/// Counts of each value `0 ..= n1 n2` of U over all `C(n1 + n2, n1)`
/// arrangements of two untied samples of sizes `n1` and `n2`.
///
/// Uses the recurrence `c(i, j, u) = c(i - 1, j, u - j) + c(i, j - 1, u)`
/// (the largest value belongs to the first sample, beating all `j` of the
/// second, or to the second). Counts are kept as `f64`: they only feed
/// ratios, and `C(100, 50)` is about `1e29`.
fn u_distribution(n1: usize, n2: usize) -> Vec<f64> {
    // prev[j] holds the distribution for (i - 1, j), cur[j] for (i, j).
    let mut prev: Vec<Vec<f64>> = (0..=n2).map(|_| vec![1.0]).collect(); // i = 0: U = 0
    for i in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n2 + 1);
        cur.push(vec![1.0]); // j = 0: U = 0
        for j in 1..=n2 {
            let mut c = vec![0.0; i * j + 1];
            for (u, &x) in prev[j].iter().enumerate() {
                c[u + j] += x;
            }
            for (u, &x) in cur[j - 1].iter().enumerate() {
                c[u] += x;
            }
            cur.push(c);
        }
        prev = cur;
    }
    prev.swap_remove(n2)
}

/// The standard normal survival function `P(Z > z) = erfc(z / sqrt 2) / 2`
/// (statrs' `erfc`).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(z / std::f64::consts::SQRT_2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn quantiles_interpolate_linearly() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&s, 0.0), 1.0);
        assert_eq!(quantile(&s, 1.0), 5.0);
        assert_eq!(quantile(&s, 0.25), 2.0);
        assert_eq!(quantile(&s, 0.75), 4.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.25), 1.25);
        assert_eq!(iqr(&s), 2.0);
        assert!(quantile(&s, 1.5).is_nan());
    }

    #[test]
    fn spread_ignores_outliers() {
        // Median 10; the middle samples deviate by at most 1 (10 %); 100 is
        // far outside Tukey's fences and must not count.
        let s = [9.0, 9.5, 10.0, 10.0, 10.5, 11.0, 100.0];
        assert!(close(spread(&s), 0.1, 1e-12), "{}", spread(&s));
        assert_eq!(spread(&[5.0, 5.0, 5.0]), 0.0);
        assert!(spread(&[]).is_nan());
    }

    #[test]
    fn geomean_known_values() {
        assert!(close(geomean(&[1.0, 4.0]), 2.0, 1e-12));
        assert!(close(geomean(&[2.0, 8.0, 4.0]), 4.0, 1e-12));
        assert!(close(geomean(&[0.5, 2.0]), 1.0, 1e-12));
        assert!(geomean(&[1.0, 0.0]).is_nan());
        assert!(geomean(&[]).is_nan());
    }

    #[test]
    fn normal_tail_known_values() {
        assert!(close(normal_sf(0.0), 0.5, 1e-7));
        assert!(close(normal_sf(1.959_964), 0.025, 1e-6));
        assert!(close(normal_sf(-1.0), 0.841_344_75, 1e-6));
        assert!(close(normal_sf(3.0), 0.001_349_898, 1e-7));
    }

    #[test]
    fn u_distribution_small_cases() {
        // n1 = n2 = 2: arrangements give U = 0,1,2,2,3,4.
        assert_eq!(u_distribution(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        // Total count is C(n1 + n2, n1).
        assert_eq!(u_distribution(10, 10).iter().sum::<f64>(), 184_756.0);
        assert_eq!(u_distribution(3, 5).iter().sum::<f64>(), 56.0);
    }

    #[test]
    fn identical_samples_give_p_near_one() {
        let a: Vec<f64> = (0..10).map(|i| 100.0 + i as f64).collect();
        let r = mann_whitney_u(&a, &a).unwrap();
        assert_eq!(r.u, 50.0);
        assert!(r.p > 0.99, "p = {}", r.p);
        // All values tied: no evidence of any difference.
        let r = mann_whitney_u(&[5.0; 8], &[5.0; 8]).unwrap();
        assert_eq!(r.p, 1.0);
    }

    #[test]
    fn separated_samples_give_tiny_p() {
        let a: Vec<f64> = (0..10).map(|i| 10.0 + i as f64 * 0.1).collect();
        let b: Vec<f64> = (0..10).map(|i| 20.0 + i as f64 * 0.1).collect();
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(r.exact);
        assert_eq!(r.u, 0.0);
        // Exact: 2 / C(20, 10).
        assert!(close(r.p, 2.0 / 184_756.0, 1e-12), "p = {}", r.p);
        assert!(r.p < 0.001);
        // Symmetric in direction.
        let r = mann_whitney_u(&b, &a).unwrap();
        assert_eq!(r.u, 100.0);
        assert!(r.p < 0.001);
    }

    #[test]
    fn separated_samples_with_ties_use_normal_approximation() {
        let a = [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 5.0, 5.0];
        let b = [11.0, 11.0, 12.0, 12.0, 13.0, 13.0, 14.0, 14.0, 15.0, 15.0];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(!r.exact);
        assert_eq!(r.u, 0.0);
        assert!(r.p < 0.001, "p = {}", r.p);
    }

    #[test]
    fn exact_p_matches_textbook_value() {
        // n1 = n2 = 5: the counts of U = 0, 1, 2, 3, 4, 5 among the 252
        // arrangements are 1, 1, 2, 3, 5, 7.
        // U = 2 (4.5 > 4, 4.6 > 4): P(U <= 2) = 4 / 252, two-sided 8 / 252.
        let a = [1.0, 2.0, 3.0, 4.5, 4.6];
        let b = [4.0, 5.0, 7.0, 8.0, 9.0];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert_eq!(r.u, 2.0);
        assert!(close(r.p, 8.0 / 252.0, 1e-12), "p = {}", r.p);
        // U = 5 (4 > 3, 6 > 3, 6 > 5, 7 > 3, 7 > 5): P(U <= 5) = 19 / 252.
        let a = [1.0, 2.0, 4.0, 6.0, 7.0];
        let b = [3.0, 5.0, 8.0, 9.0, 10.0];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert_eq!(r.u, 5.0);
        assert!(close(r.p, 38.0 / 252.0, 1e-12), "p = {}", r.p);
        // U at the centre of the distribution: p = 1.
        let r = mann_whitney_u(&[1.0, 4.0], &[2.0, 3.0]).unwrap();
        assert_eq!(r.u, 2.0);
        assert_eq!(r.p, 1.0);
    }

    #[test]
    fn normal_approximation_is_close_to_exact() {
        // Large untied samples take the normal path; a shift of half the
        // range is clearly significant, and the p-value is in (0, 1).
        let a: Vec<f64> = (0..60).map(|i| i as f64).collect();
        let b: Vec<f64> = (0..60).map(|i| i as f64 + 30.5).collect();
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(!r.exact);
        assert!(r.p > 0.0 && r.p < 1e-4, "p = {}", r.p);
    }

    #[test]
    fn degenerate_input() {
        assert!(mann_whitney_u(&[], &[1.0]).is_none());
        assert!(mann_whitney_u(&[f64::NAN], &[1.0]).is_none());
    }
}
