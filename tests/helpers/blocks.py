"""Small random logits blocks with known layouts, for the scorers' and statistics' brute-force tests."""

from __future__ import annotations

import dataclasses

import torch

from rcattr.attribution.spans import SpanBlock, SpanIndex

# 3 context tokens at keys 1..3 in two overlapping spans, answer keys 4..7; units: rows {0, 1} and {2, 3}.
SPAN_TOKENS = [[0, 1], [1, 2]]
CONTEXT_KEYS = torch.tensor([1, 2, 3])
ANSWER_KEYS = torch.tensor([4, 5, 6, 7])


def span_block(window: int | None = None, spans: list[list[int]] = SPAN_TOKENS) -> SpanBlock:
    """Two units of two answer rows each over 8 keys, 3 heads, float64 logits (seeded)."""
    torch.manual_seed(0)
    rows = torch.tensor([[0, 1], [2, 3]])  # answer rows of each unit
    positions = ANSWER_KEYS[rows]  # [U, R] query positions
    keys = torch.arange(8)
    visible = keys <= positions[..., None]
    if window is not None:
        visible &= keys > positions[..., None] - window
    logits = torch.randn(2, 3, 2, 8, dtype=torch.float64) * 4
    return SpanBlock(logits, visible, CONTEXT_KEYS, ANSWER_KEYS, SpanIndex.from_ranges(spans), 0.5)


def answer_block(window: int | None = None) -> tuple[SpanBlock, torch.Tensor]:
    """Every answer row once (the block a row-averaging scorer sees), and each unit's row weights."""
    padded = span_block(window)
    logits = torch.cat([padded.logits[0], padded.logits[1]], dim=1)[None]  # [1, H, 4 rows, 8]
    visible = torch.cat([padded.visible[0], padded.visible[1]])[None]
    unit_rows = torch.tensor([[True, False, False, False], [False, True, True, False]])
    sentence = torch.tensor([0, 0, 0, 1])
    block = dataclasses.replace(
        padded, logits=logits, visible=visible, unit_rows=unit_rows, row_sentence=sentence
    )
    weights = torch.tensor(
        [[1.0, 0.5, 0.25, 0.0], [0.0, 1.0, 1.0, 0.0]], dtype=torch.float64
    )  # continuation 0.5
    return block, weights


def random_layer(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """One layer's ``cross [3, 4, 5]`` (answer rows over context) and ``own [3, 4, 4]`` (over the answer)
    float64 logits with their visibility: a window hides far context from the first row."""
    generator = torch.Generator().manual_seed(seed)
    cross = torch.randn(3, 4, 5, generator=generator, dtype=torch.float64)
    own = torch.randn(3, 4, 4, generator=generator, dtype=torch.float64)
    cross_visible = torch.ones(4, 5, dtype=torch.bool)
    cross_visible[0, :2] = False  # a window hides far context from the first row
    own_visible = torch.ones(4, 4, dtype=torch.bool).tril()
    return cross, cross_visible, own, own_visible


def window_strategies() -> dict:
    """The hypothesis strategies of :func:`random_window`'s arguments, and the key heads to score them with."""
    from hypothesis import strategies as st

    return {
        "seed": st.integers(0, 2**16),
        "window": st.integers(1, 5),
        "context": st.integers(1, 7),
        "pad": st.integers(0, 4),
        "kv_heads": st.sampled_from([1, 2]),
    }


def random_window(seed: int, window: int, context: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[2, 4, w, n]`` float64 logits and their causal ``[2, w, n]`` visibility, the second row left-padded."""
    generator = torch.Generator().manual_seed(seed)
    n = window + context
    pad = min(pad, context)
    logits = torch.randn(2, 4, window, n, generator=generator, dtype=torch.float64)
    positions = torch.arange(n)
    visible = (positions[None, :] <= positions[n - window :, None]).expand(2, window, n).clone()
    visible[1, :, :pad] = False  # left padding of the second row
    return logits, visible
