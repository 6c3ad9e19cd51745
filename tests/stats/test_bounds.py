"""overlap_bounds against brute-force integrals: the sandwich around E, every coupling inside, sharpness."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rcattr.stats import (
    expected_rc,
    overlap_bounds,
)
from tests.helpers.samples import SETTINGS, as_tensor, pairs, tolerance
from tests.reference.stats import brute_bounds, coupled_rc


@SETTINGS
@given(pairs(), st.booleans())
def test_bounds_match_brute_force_integrals_and_sandwich_e(
    xy: tuple[np.ndarray, np.ndarray], reverse: bool
) -> None:
    x, y = xy
    lo, up = overlap_bounds(as_tensor(x), as_tensor(y), reverse=reverse)
    blo, bup = brute_bounds(x, y, reverse)
    tol = tolerance(x, y)
    assert math.isclose(lo.item(), blo, rel_tol=1e-7, abs_tol=tol)
    assert math.isclose(up.item(), bup, rel_tol=1e-7, abs_tol=tol)
    e = expected_rc(as_tensor(x), as_tensor(y), reverse=reverse).item()
    assert lo.item() - tol <= e <= up.item() + tol


@SETTINGS
@given(pairs(equal_sizes=True), st.randoms(use_true_random=False))
def test_bounds_hold_for_permutation_couplings_and_are_attained(
    xy: tuple[np.ndarray, np.ndarray], rnd: object
) -> None:
    x, y = xy
    lo, up = (v.item() for v in overlap_bounds(as_tensor(x), as_tensor(y)))
    tol = tolerance(x, y)
    perm = list(range(len(y)))
    rnd.shuffle(perm)  # type: ignore[attr-defined]
    e_perm = coupled_rc(x, y[perm])
    assert lo - tol <= e_perm <= up + tol
    # Sharpness: the comonotone pairing attains the lower bound, the antitone the upper.
    assert math.isclose(lo, coupled_rc(np.sort(x), np.sort(y)), rel_tol=1e-7, abs_tol=tol)
    assert math.isclose(up, coupled_rc(np.sort(x), np.sort(y)[::-1]), rel_tol=1e-7, abs_tol=tol)
