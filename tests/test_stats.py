"""bertbench.report.stats against textbook references: scipy's t-interval and a paired bootstrap done by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from bertbench.report.stats import T_OVER_SEEDS, fmt_interval, t_interval
from tests.reference import PAIRED_BOOTSTRAP, PAIRED_T_OVER_SEEDS, paired_bootstrap, paired_differences, paired_t_interval


@pytest.mark.parametrize("values", [[84.1, 85.0, 83.2, 84.7, 86.0], [50.0, 58.8], [12.5, 12.25, 13.0]])
def test_t_interval_matches_scipy(values):
    got = t_interval(values)
    n = len(values)
    mean = float(np.mean(values))
    low, high = sps.t.interval(0.95, n - 1, loc=mean, scale=sps.sem(values))
    assert got.method == T_OVER_SEEDS and got.n == n
    assert got.estimate == pytest.approx(mean, abs=1e-12)
    assert got.low == pytest.approx(low, abs=1e-9) and got.high == pytest.approx(high, abs=1e-9)


def test_t_interval_textbook_numbers():
    # mean 1, s = 1, n = 5: 1 ± 2.776445 / sqrt(5) (t(0.975, 4) = 2.776445, any t table)
    values = [1 - math.sqrt(1.5), 1 - math.sqrt(0.5), 1, 1 + math.sqrt(0.5), 1 + math.sqrt(1.5)]
    got = t_interval(values)
    assert got.low == pytest.approx(1 - 2.776445 / math.sqrt(5), abs=1e-5)
    assert got.high == pytest.approx(1 + 2.776445 / math.sqrt(5), abs=1e-5)


def test_one_value_has_no_interval():
    assert t_interval([84.0]) is None and t_interval([]) is None
    assert paired_t_interval({1: 80.0, 2: 81.0}, {1: 79.0, 3: 70.0}) is None  # one seed pairs up
    assert paired_bootstrap(np.ones((1, 4)), np.zeros((1, 4))) is None
    assert fmt_interval(None) == "no interval"


def test_equal_seeds_give_a_zero_width_interval_not_nan():
    got = t_interval([70.0, 70.0, 70.0])
    assert (got.low, got.high) == (70.0, 70.0)


def test_paired_t_uses_only_shared_seeds_and_matches_scipy_on_differences():
    a = {1: 80.0, 2: 82.5, 3: 79.0, 4: 81.0}
    b = {1: 78.0, 2: 80.0, 3: 78.5, 5: 60.0}  # seed 4 and 5 have no partner
    seeds, diffs = paired_differences(a, b)
    assert seeds == (1, 2, 3) and diffs == (2.0, 2.5, 0.5)
    got = paired_t_interval(a, b)
    low, high = sps.t.interval(0.95, 2, loc=np.mean(diffs), scale=sps.sem(diffs))
    assert got.method == PAIRED_T_OVER_SEEDS and got.n == 3
    assert (got.low, got.high) == (pytest.approx(low), pytest.approx(high))
    # pairing matters: the unpaired (Welch) interval of the same numbers is wider
    welch = sps.ttest_ind([80.0, 82.5, 79.0], [78.0, 80.0, 78.5], equal_var=False).confidence_interval(0.95)
    assert got.high - got.low < welch.high - welch.low


def test_paired_bootstrap_by_hand():
    """Three resamples from default_rng(7), written out by hand.

    The generator draws (seed rows, then example columns): [1 1] [2 2 1]; [1 1] [0 0 0]; [0 1] [2 0 1].
    d = a - b = [[1, 0, 0], [0, 1, 0]]. Resample 1: rows 1,1 × cols 2,2,1 -> d values 0,0,1 twice -> 2/6.
    Resample 2: rows 1,1 × cols 0,0,0 -> 0. Resample 3: row 0 × cols 2,0,1 -> 0,1,0; row 1 -> 0,0,1 -> 2/6.
    Sorted statistics 0, 1/3, 1/3; a 50% interval is numpy's linear quantiles at 0.25 and 0.75 of
    three values: positions 0.5 and 1.5 -> 1/6 and 1/3.
    """
    a = np.array([[1, 0, 1], [1, 1, 0]])
    b = np.array([[0, 0, 1], [1, 0, 0]])
    got = paired_bootstrap(a, b, resamples=3, seed=7, confidence=0.5)
    assert got.method == PAIRED_BOOTSTRAP and got.n == 2
    assert got.estimate == pytest.approx(1 / 3)
    assert got.low == pytest.approx(1 / 6) and got.high == pytest.approx(1 / 3)


def test_paired_bootstrap_equals_a_literal_resampling_loop():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, (4, 50)).astype(float)
    b = rng.integers(0, 2, (4, 50)).astype(float)
    got = paired_bootstrap(a, b, resamples=200, seed=3)
    draw = np.random.default_rng(3)
    reference = []
    for _ in range(200):
        rows = draw.integers(0, 4, 4)
        cols = draw.integers(0, 50, 50)
        reference.append(a[np.ix_(rows, cols)].mean() - b[np.ix_(rows, cols)].mean())
    low, high = np.quantile(reference, [0.025, 0.975])
    assert (got.low, got.high) == (pytest.approx(low), pytest.approx(high))
    assert got.estimate == pytest.approx(a.mean() - b.mean())


def test_paired_bootstrap_identical_variants_and_bad_shapes():
    a = np.random.default_rng(1).random((3, 20))
    same = paired_bootstrap(a, a.copy(), resamples=50)
    assert (same.low, same.high, same.estimate) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="same"):
        paired_bootstrap(a, a[:, :5])


def test_fmt_interval_signs():
    got = t_interval([-1.0, 1.0, 3.0])
    assert fmt_interval(got, signed=True).startswith("[-") and ", +" in fmt_interval(got, signed=True)
