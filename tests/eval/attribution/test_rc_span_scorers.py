"""The paper's RC-expectation span scorers against brute force: the block expectation and its upper bound."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.spans import SpanBlock
from rcattr.eval.attribution.rc_span_scorers import RCBoundScorer, RCScorer
from rcattr.stats import overlap_bounds
from tests.helpers.blocks import ANSWER_KEYS, CONTEXT_KEYS, SPAN_TOKENS, span_block


def block_samples(
    block: SpanBlock, unit: int, head: int, span: int, spans: list[list[int]] = SPAN_TOKENS
) -> tuple[list[float], list[float]]:
    """X (the span's visible logits) and Y (the answer's) of one unit and head, by loops."""
    x, y = [], []
    for row in range(block.logits.shape[2]):
        for key in range(block.logits.shape[3]):
            if not block.visible[unit, row, key]:
                continue
            value = float(block.logits[unit, head, row, key])
            if key in [int(CONTEXT_KEYS[t]) for t in spans[span]]:
                x.append(value)
            if key in ANSWER_KEYS.tolist():
                y.append(value)
    return x, y


@pytest.mark.parametrize("window", [None, 4])
def test_rc_scorer_is_the_block_expectation(window: int | None) -> None:
    block = span_block(window)
    scores = RCScorer().score(block)
    for unit in range(2):
        for head in range(3):
            for span in range(2):
                x, y = block_samples(block, unit, head, span)
                expected = sum(max(a - b, 0) for a in x for b in y) / (len(x) * len(y)) if x else 0.0
                assert scores[unit, head, span].item() == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("window", [None, 4])
@pytest.mark.parametrize("spans", [SPAN_TOKENS, [[2], [0, 1, 2], [1], [0, 1], [0, 2]]])
def test_rc_bound_scorer_is_the_upper_bound_of_each_block(window: int | None, spans: list[list[int]]) -> None:
    block = span_block(window, spans)
    scores = RCBoundScorer().score(block)
    for unit in range(2):
        for head in range(3):
            for span in range(len(spans)):
                x, y = block_samples(block, unit, head, span, spans)
                if not x:
                    assert scores[unit, head, span] == 0
                    continue
                _, upper = overlap_bounds(
                    torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
                )
                assert scores[unit, head, span].item() == pytest.approx(upper.item(), rel=1e-12)
    assert bool((scores >= RCScorer().score(block) - 1e-12).all())


def test_the_scorers_have_their_names() -> None:
    assert (RCScorer.name, RCBoundScorer.name) == ("rc", "rc_bound")
