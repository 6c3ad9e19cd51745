"""The heads an attribution used (rcattr.heads.selection): pairs and a one-sentence description."""

from __future__ import annotations

import torch

from rcattr.heads.selection import HeadSelection


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
    assert "BM25 filled 25% of the votes" in _selection().describe(lexical_share=0.25)
    assert "BM25" not in _selection().describe()


def test_fewer_heads_than_the_minimum_are_flagged() -> None:
    assert not _selection().few_heads and not _selection(minimum=2).few_heads
    few = _selection(minimum=3)
    assert few.few_heads and "fewer than 3" in few.describe() and "of the model's 40" in few.describe()


def test_the_selection_says_how_many_heads_see_the_whole_context() -> None:
    assert _selection().seeing is None and _selection().reach_note() is None
    everyone = _selection(reach=torch.ones(4, dtype=torch.float64))
    assert everyone.seeing == 40 and everyone.reach_note() is None and not everyone.few_seeing
    assert everyone.describe() == "2 heads selected by superiority"
    some = _selection(reach=torch.tensor([1.0, 0.2, 0.2, 1.0], dtype=torch.float64))
    assert some.seeing == 20 and not some.few_seeing
    assert "; 20 of the model's 40 heads see the whole context from the answer" in some.describe()
    assert "chosen among them" in some.describe()


def test_none_or_few_heads_that_see_the_context_are_flagged() -> None:
    none = _selection(reach=torch.tensor([0.1, 0.3, 0.3, 0.2], dtype=torch.float64))
    assert none.seeing == 0 and none.few_seeing
    assert (
        "no head sees the whole context" in none.describe()
        and "the 20 that see the most of it (30%)" in none.describe()
    )
    scores = torch.rand(10, 10)  # 100 heads: 5 is the minimum, one layer of 10 is enough
    few = HeadSelection(scores, torch.tensor([[0, 0]]), "superiority", reach=torch.eye(10)[0].double())
    assert few.seeing == 10 and not few.few_seeing
    reach = torch.eye(50)[0].double()  # 1 of 50 heads sees the context; 3 is the minimum
    narrow = HeadSelection(torch.rand(50, 1), torch.tensor([[0, 0]]), "fixed", reach=reach)
    assert narrow.few_seeing and "rests on few heads that can see the sources" in narrow.describe()
    assert "chosen among" not in narrow.describe()  # given heads are not chosen
    blind_fixed = HeadSelection(
        torch.rand(4, 10), torch.tensor([[0, 0]]), "fixed", reach=torch.full((4,), 0.3)
    )
    assert "no head sees" in blind_fixed.describe() and "chosen among" not in blind_fixed.describe()
