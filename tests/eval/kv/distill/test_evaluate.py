"""The rank measures of a predictor (rcattr.eval.kv.distill.evaluate) against their definitions."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from rcattr.eval.kv.distill.evaluate import kept_overlap, spearman


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(8, 40))
def test_the_rank_correlation_is_spearmans(seed, n) -> None:
    generator = torch.Generator().manual_seed(seed)
    a, b = torch.randn(2, n, generator=generator), torch.randn(2, n, generator=generator)
    ours = spearman(a, b)
    for row in range(2):
        assert float(ours[row]) == pytest.approx(spearmanr(a[row], b[row]).statistic, abs=1e-9)


def test_the_kept_overlap_counts_the_teachers_kept_keys_the_prediction_keeps() -> None:
    target = torch.arange(8.0)[None]
    assert float(kept_overlap(target, target, 0.5)[0]) == 1.0
    assert float(kept_overlap(-target, target, 0.5)[0]) == 0.0
    shuffled = torch.tensor([[7.0, 6, 5, 0, 1, 2, 3, 4]])  # keeps 0, 1, 2, 7 of the teacher's 4, 5, 6, 7
    assert float(kept_overlap(shuffled, target, 0.5)[0]) == 0.25
