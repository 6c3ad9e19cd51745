"""The heads an attribution used (rcattr.head_selection): pairs and a one-sentence description."""

from __future__ import annotations

import torch

from rcattr.head_selection import HeadSelection


def _selection(**kwargs) -> HeadSelection:
    scores = torch.rand(4, 10)  # 40 heads
    return HeadSelection(scores, torch.tensor([[0, 3], [2, 7]]), "superiority", **kwargs)


def test_as_pairs_are_plain_ints() -> None:
    pairs = _selection().as_pairs()
    assert pairs == [(0, 3), (2, 7)] and all(type(value) is int for pair in pairs for value in pair)


def test_the_description_says_how_many_heads_by_which_rule() -> None:
    assert _selection().describe() == "2 heads selected by superiority"
    outliers = _selection(outliers=2).describe()
    assert outliers.startswith("2 heads selected by superiority, the heads more than")
    assert "BM25 filled 25% of the votes" in _selection(lexical_share=0.25).describe()


def test_fewer_heads_than_the_minimum_are_flagged() -> None:
    assert not _selection().few_heads and not _selection(minimum=2).few_heads
    few = _selection(minimum=3)
    assert few.few_heads and "fewer than 3" in few.describe() and "of the model's 40" in few.describe()
