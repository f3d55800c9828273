#!/usr/bin/env python3
"""Reference values for crates/cmwq-lab/tests/stats_reference.rs.

The Rust statistics in crates/cmwq-lab/src/stats/ are checked against numbers
computed here, independently, with NumPy and SciPy.  CI has no SciPy, so the
numbers live in the Rust test as constants; this script only documents where
they came from and regenerates them:

    pip install scipy numpy
    python3 crates/cmwq-lab/tests/reference/gen_reference.py          # print
    python3 crates/cmwq-lab/tests/reference/gen_reference.py --write  # update test

`--write` replaces the text between the `BEGIN GENERATED` and `END GENERATED`
markers in stats_reference.rs and runs rustfmt on it.  The values committed there were produced with
the versions printed in the generated header (SciPy 1.17.1, NumPy 2.4.6).

What is computed:

* Mann-Whitney U: ``scipy.stats.mannwhitneyu(x, y, alternative='two-sided')``
  with the defaults ``use_continuity=True, method='auto'``.  In SciPy 1.17
  'auto' picks the exact null distribution when at least one sample has <= 8
  values and the pooled sample has no ties, and the normal approximation
  (tie- and continuity-corrected) otherwise.  The method actually used is
  recorded too (SciPy's private ``_mwu_choose_method`` rule, restated below).
  Where cmwq departs from 'auto' on purpose (a side of <= 8 values *with*
  ties: exhaustive permutations instead of the normal approximation), the
  reference is ``mannwhitneyu(method=PermutationMethod(n_resamples=inf))``.
* Summaries: ``numpy.mean``, ``numpy.median``, ``numpy.std(ddof=1)``,
  ``numpy.min``, ``numpy.max``; percentiles: ``numpy.percentile`` (the
  default 'linear' method, Hyndman-Fan type 7).
* The standard normal survival function: ``scipy.stats.norm.sf`` and
  ``scipy.special.erfc``.
* Bootstrap CI of the delta of medians: not a SciPy call, because SciPy's
  random streams are not reproducible from Rust.  Instead this script
  re-implements the *procedure* documented in src/stats/bootstrap.rs
  (xoshiro256** seeded by SplitMix64, Lemire's unbiased bounded integers,
  resample A then B, median, delta in percent, ``numpy.percentile`` linear)
  in plain Python, so the Rust code is checked against a second, independent
  implementation.  As a sanity check it also prints SciPy's own percentile
  bootstrap (``scipy.stats.bootstrap``) of the same statistic, which must be
  close but not identical.
"""

import os
import subprocess
import sys

import numpy as np
import scipy
import scipy.special
import scipy.stats

MASK = (1 << 64) - 1

# --------------------------------------------------------------------------
# Data sets
# --------------------------------------------------------------------------

_rng = np.random.default_rng(20261122)
# Seed-001-like throughput runs (ops/s), 20 a side, B about 0.35% higher:
# overlapping, so not significant.
THR_A = [float(v) for v in np.round(_rng.normal(431398, 1500, 20))]
THR_B = [float(v) for v in np.round(_rng.normal(432897, 1500, 20))]
# Seed-001-like L1i misses, 20 a side, B about 9% higher: clearly separated.
L1I_A = [float(v) for v in np.round(_rng.normal(198588165, 900000, 20))]
L1I_B = [float(v) for v in np.round(_rng.normal(216672536, 900000, 20))]
# Wall times in seconds with 4 decimals: ties likely? no, but non-integers.
WALL_A = [float(v) for v in np.round(_rng.normal(2.4012, 0.01, 20), 4)]
WALL_B = [float(v) for v in np.round(_rng.normal(2.3865, 0.01, 20), 4)]

MWU_CASES = [
    # name, x, y
    ("ties_small", [1, 2, 2, 3, 4], [2, 3, 3, 5, 6, 7]),
    ("ties_3_vs_3_two_values", [100, 100, 100], [101, 101, 101]),
    ("ties_2_vs_5_two_values", [100, 100], [101, 101, 101, 101, 101]),
    ("ties_rss_like_4_vs_5", [8160, 8164, 8164, 8168], [8164, 8168, 8172, 8172, 8176]),
    ("ties_8_vs_12_counts", [3, 4, 4, 5, 5, 5, 6, 7], [5, 6, 6, 7, 7, 8, 8, 8, 9, 9, 10, 12]),
    ("ties_within_x_only", [1, 1, 2, 3], [4, 5, 6, 7]),
    ("n1_vs_n1", [1], [2]),
    ("n1_vs_n1_tied", [3], [3]),
    ("n1_vs_n2", [5], [1, 2]),
    ("n2_vs_n3", [1.5, 4.0], [2.0, 3.0, 5.0]),
    ("n3_vs_n3_disjoint", [1, 2, 3], [4, 5, 6]),
    ("n3_vs_n3_disjoint_reversed", [4, 5, 6], [1, 2, 3]),
    ("identical_samples", [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
    ("all_equal", [5, 5, 5], [5, 5, 5]),
    ("all_equal_unbalanced", [7, 7], [7, 7, 7, 7, 7]),
    ("exact_8_vs_8", [3, 9, 14, 1, 22, 7, 18, 11], [2, 13, 25, 17, 30, 21, 28, 19]),
    ("exact_5_vs_20", [10, 12, 32, 34, 40], list(range(1, 41, 2))),
    ("asymptotic_9_vs_9", [1, 4, 6, 9, 12, 15, 17, 20, 23], [2, 3, 8, 10, 11, 14, 16, 18, 25]),
    ("disjoint_20", list(range(1, 21)), list(range(101, 121))),
    ("throughput_20", THR_A, THR_B),
    ("l1i_20", L1I_A, L1I_B),
    ("wall_20", WALL_A, WALL_B),
]

SUMMARY_CASES = [
    ("one", [42.0]),
    ("two", [1.0, 4.0]),
    ("three", [3.0, -1.0, 2.5]),
    ("all_equal", [5.0, 5.0, 5.0, 5.0]),
    ("ties_small_x", [1.0, 2.0, 2.0, 3.0, 4.0]),
    ("throughput_a", THR_A),
    ("wall_b", WALL_B),
]

PERCENTILE_CASES = [
    ([42.0], [0.0, 50.0, 100.0]),
    ([1.0, 4.0], [0.0, 25.0, 50.0, 90.0, 100.0]),
    ([3.0, -1.0, 2.5, 10.0, 7.0], [2.5, 50.0, 95.0, 97.5, 99.0]),
    (WALL_B, [5.0, 50.0, 95.0, 99.0]),
]

NORM_SF_POINTS = [-3.0, -1.0, -0.2, 0.0, 0.3, 1.0, 1.959963984540054, 2.5, 4.0, 5.5, 8.0, 12.0]
ERFC_POINTS = [-2.0, -0.5, 0.0, 0.1, 0.5, 1.0, 1.9, 2.0, 2.1, 3.0, 5.0, 10.0, 26.0]

BOOTSTRAP_CASES = [
    # name, a, b, resamples, confidence, seed
    ("throughput_20", THR_A, THR_B, 10000, 0.95, 0x5EED),
    ("l1i_20", L1I_A, L1I_B, 10000, 0.95, 0x5EED),
    ("tiny_2_vs_3", [10.0, 12.0], [11.0, 13.0, 15.0], 2000, 0.95, 7),
    ("wall_20_seed1_90pct", WALL_A, WALL_B, 5000, 0.90, 1),
]


# --------------------------------------------------------------------------
# Mann-Whitney method rule of SciPy 1.17 (scipy/stats/_mannwhitneyu.py,
# _mwu_choose_method), restated
# --------------------------------------------------------------------------

def scipy_method(x, y):
    pooled = np.concatenate([x, y])
    ties = len(np.unique(pooled)) != len(pooled)
    if len(x) > 8 and len(y) > 8:
        return "Asymptotic"
    if ties:
        # cmwq departs from SciPy's 'auto' here: exhaustive permutations
        # (see mwu_reference below), not the normal approximation.
        return "Permutation"
    return "Exact"


def mwu_reference(x, y):
    """SciPy's answer for the method cmwq uses: 'auto' where they agree,
    and where cmwq enumerates (small samples with ties)
    mannwhitneyu(method=PermutationMethod(n_resamples=inf)), which SciPy
    computes from every split of the pooled sample."""
    if scipy_method(x, y) == "Permutation":
        brute = brute_force_permutation(x, y)
        if min(len(x), len(y)) < 2:
            # SciPy's permutation_test wants two values a side; the plain
            # enumeration below is the reference then.
            return brute
        res = scipy.stats.mannwhitneyu(
            x, y, alternative="two-sided",
            method=scipy.stats.PermutationMethod(n_resamples=np.inf))
        assert abs(res.pvalue - brute.pvalue) < 1e-12, (x, y, res, brute)
        return res
    return scipy.stats.mannwhitneyu(x, y, alternative="two-sided")


class _Res:
    def __init__(self, statistic, pvalue):
        self.statistic = statistic
        self.pvalue = pvalue


def brute_force_permutation(x, y):
    """Every split of the pooled values into len(x) and len(y), by
    itertools: U of x and 2*min(P(U <= u), P(U >= u)), capped at 1."""
    import itertools
    pooled = list(x) + list(y)
    def u_of(a, b):
        return sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in a for q in b)
    u_obs = u_of(x, y)
    le = ge = total = 0
    for idx in itertools.combinations(range(len(pooled)), len(x)):
        chosen = set(idx)
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        u = u_of(a, b)
        total += 1
        le += u <= u_obs + 1e-9
        ge += u >= u_obs - 1e-9
    return _Res(u_obs, min(1.0, 2.0 * min(le, ge) / total))


# --------------------------------------------------------------------------
# Bootstrap procedure of src/stats/bootstrap.rs, in plain Python
# --------------------------------------------------------------------------

def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


class Xoshiro256StarStar:
    def __init__(self, seed):
        sm = SplitMix64(seed)
        self.s = [sm.next() for _ in range(4)]

    def next(self):
        s = self.s
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        """Uniform integer in [0, n), Lemire's multiply-and-reject."""
        m = self.next() * n
        low = m & MASK
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next() * n
                low = m & MASK
        return m >> 64


def median(v):
    s = sorted(v)
    k = len(s)
    if k % 2 == 1:
        return s[k // 2]
    return (s[k // 2 - 1] + s[k // 2]) / 2.0


def delta_pct(ma, mb):
    if ma == 0.0:
        if mb == 0.0:
            return 0.0
        return float("inf") if mb > 0 else float("-inf")
    return (mb - ma) / abs(ma) * 100.0


def bootstrap_ci(a, b, resamples, confidence, seed):
    rng = Xoshiro256StarStar(seed)
    deltas = []
    for _ in range(resamples):
        ra = [a[rng.below(len(a))] for _ in range(len(a))]
        rb = [b[rng.below(len(b))] for _ in range(len(b))]
        deltas.append(delta_pct(median(ra), median(rb)))
    tail = (1.0 - confidence) / 2.0 * 100.0
    lo, hi = np.percentile(np.array(deltas), [tail, 100.0 - tail])
    return float(lo), float(hi), rng.next()


def scipy_bootstrap_ci(a, b, resamples, confidence):
    def stat(x, y, axis=-1):
        mx = np.median(x, axis=axis)
        my = np.median(y, axis=axis)
        return (my - mx) / np.abs(mx) * 100.0

    res = scipy.stats.bootstrap((np.array(a), np.array(b)), stat, n_resamples=resamples,
                                confidence_level=confidence, method="percentile",
                                vectorized=True, rng=np.random.default_rng(1))
    return res.confidence_interval.low, res.confidence_interval.high


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def f(v):
    """A Rust f64 literal that round-trips exactly."""
    v = float(v)
    if v == float("inf"):
        return "f64::INFINITY"
    if v == float("-inf"):
        return "f64::NEG_INFINITY"
    r = repr(v)
    if "e" not in r and "." not in r and "inf" not in r and "nan" not in r:
        r += ".0"
    return r


def flist(vs):
    return "&[" + ", ".join(f(v) for v in vs) + "]"


def generate():
    out = []
    w = out.append
    w("// Generated by tests/reference/gen_reference.py with SciPy %s, NumPy %s, Python %s."
      % (scipy.__version__, np.__version__, sys.version.split()[0]))
    w("// Do not edit by hand: change the script and rerun it with --write.")
    w("")
    w("/// `scipy.stats.mannwhitneyu(x, y, alternative='two-sided')` (use_continuity=True,")
    w("/// method='auto'; for `Permutation` rows method=PermutationMethod(n_resamples=inf)):")
    w("/// `u` is `res.statistic` (U of x), `p` is `res.pvalue`.")
    w("const MWU_CASES: &[MwuCase] = &[")
    for name, x, y in MWU_CASES:
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        res = mwu_reference(x, y)
        w("    MwuCase {")
        w("        name: %r," % name)
        w("        x: %s," % flist(x))
        w("        y: %s," % flist(y))
        w("        u: %s," % f(res.statistic))
        w("        p: %s," % f(res.pvalue))
        w("        method: MwuMethod::%s," % scipy_method(x, y))
        w("    },")
    w("];")
    w("")
    w("/// numpy.mean, numpy.median, numpy.std(ddof=1) (None: n < 2), numpy.min, numpy.max.")
    w("const SUMMARY_CASES: &[SummaryCase] = &[")
    for name, x in SUMMARY_CASES:
        a = np.asarray(x, dtype=float)
        sd = "Some(%s)" % f(np.std(a, ddof=1)) if len(a) >= 2 else "None"
        w("    SummaryCase {")
        w("        name: %r," % name)
        w("        x: %s," % flist(a))
        w("        mean: %s," % f(np.mean(a)))
        w("        median: %s," % f(np.median(a)))
        w("        stdev: %s," % sd)
        w("        min: %s," % f(np.min(a)))
        w("        max: %s," % f(np.max(a)))
        w("    },")
    w("];")
    w("")
    w("/// numpy.percentile(x, q) (method='linear'): (x, [(q, value)]).")
    w("const PERCENTILE_CASES: &[PercentileCase] = &[")
    for x, qs in PERCENTILE_CASES:
        vals = np.percentile(np.asarray(x, dtype=float), qs)
        pairs = ", ".join("(%s, %s)" % (f(q), f(v)) for q, v in zip(qs, vals))
        w("    (%s, &[%s])," % (flist(x), pairs))
    w("];")
    w("")
    w("/// scipy.stats.norm.sf(z): (z, value).")
    w("const NORM_SF: &[(f64, f64)] = &[")
    for z in NORM_SF_POINTS:
        w("    (%s, %s)," % (f(z), f(scipy.stats.norm.sf(z))))
    w("];")
    w("")
    w("/// scipy.special.erfc(x): (x, value).")
    w("const ERFC: &[(f64, f64)] = &[")
    for x in ERFC_POINTS:
        w("    (%s, %s)," % (f(x), f(scipy.special.erfc(x))))
    w("];")
    w("")
    w("/// Percentile bootstrap CI of (median(b) - median(a)) / |median(a)| * 100, recomputed")
    w("/// by the script's own Python implementation of the documented procedure;")
    w("/// `next_u64` is the generator's next output after the last resample.")
    w("/// SciPy's scipy.stats.bootstrap(method='percentile') for comparison: `scipy_lo/hi`.")
    w("const BOOTSTRAP_CASES: &[BootstrapCase] = &[")
    for name, a, b, resamples, conf, seed in BOOTSTRAP_CASES:
        lo, hi, nxt = bootstrap_ci(a, b, resamples, conf, seed)
        slo, shi = scipy_bootstrap_ci(a, b, resamples, conf)
        w("    BootstrapCase {")
        w("        name: %r," % name)
        w("        a: %s," % flist(a))
        w("        b: %s," % flist(b))
        w("        resamples: %d," % resamples)
        w("        confidence: %s," % f(conf))
        w("        seed: %#x," % seed)
        w("        lo: %s," % f(lo))
        w("        hi: %s," % f(hi))
        w("        next_u64: %#x," % nxt)
        w("        scipy_lo: %s," % f(slo))
        w("        scipy_hi: %s," % f(shi))
        w("    },")
    w("];")
    w("")
    w("/// SplitMix64(0): the first outputs.")
    sm = SplitMix64(0)
    w("const SPLITMIX_SEED_0: [u64; 3] = [%s];" % ", ".join("%#x" % sm.next() for _ in range(3)))
    w("/// xoshiro256** seeded by SplitMix64(seed): the first outputs, for seed 0 and 0x5EED.")
    for seed in (0, 0x5EED):
        rng = Xoshiro256StarStar(seed)
        vals = ", ".join("%#x" % rng.next() for _ in range(4))
        w("const XOSHIRO_SEED_%X: [u64; 4] = [%s];" % (seed, vals))
    return "\n".join(out).replace("'", '"') + "\n"


def main():
    text = generate()
    if "--write" not in sys.argv[1:]:
        sys.stdout.write(text)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    test = os.path.join(here, "..", "stats_reference.rs")
    with open(test) as fh:
        src = fh.read()
    begin = "// BEGIN GENERATED\n"
    end = "// END GENERATED\n"
    i = src.index(begin) + len(begin)
    j = src.index(end)
    with open(test, "w") as fh:
        fh.write(src[:i] + text + src[j:])
    # Keep `cargo fmt --check` happy: let rustfmt lay out the tables.
    try:
        subprocess.run(["rustfmt", "--edition", "2024", test], check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        print("warning: rustfmt failed (%s); run cargo fmt" % err, file=sys.stderr)


if __name__ == "__main__":
    main()
