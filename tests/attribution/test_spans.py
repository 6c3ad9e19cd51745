"""Span blocks and their indices (rcattr.attribution.spans): spans grouped by width, continuation weights."""

from __future__ import annotations

import torch

from rcattr.attribution.spans import SpanIndex, continuation_weights


def test_spans_grouped_by_width_are_each_padded_to_their_own_longest() -> None:
    spans = SpanIndex.from_ranges([[5], [0, 1, 2, 3, 4], [1, 2], [6, 7, 8], [9], [0, 1, 2, 3, 4, 5, 6, 7, 8]])
    index, mask = spans.padded
    seen = []
    for members, group_index, group_mask in spans.by_width():
        sizes = group_mask.sum(-1)
        assert int(sizes.max()) == group_mask.shape[1] and int(sizes.max()) <= 2 * int(sizes.min())
        assert torch.equal(group_index[group_mask], index[members][mask[members]])
        seen += members.tolist()
    assert sorted(seen) == list(range(6)) and len(spans.by_width()) == 5  # widths 1, 2, 3-4, 5-8, 9-16


def test_continuation_weights_stay_in_the_units_sentence() -> None:
    rows = torch.zeros(2, 7, dtype=torch.bool)
    rows[0, 1:3] = True  # a unit on rows 1-2 of the sentence of rows 0-4
    rows[1, 5] = True  # a unit on row 5, the start of the next sentence
    sentence = torch.tensor([0, 0, 0, 0, 0, 1, 1])
    weights = continuation_weights(rows, 0.5, sentence)
    torch.testing.assert_close(weights[0], torch.tensor([0, 1, 1, 0.5, 0.25, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(weights[1], torch.tensor([0, 0, 0, 0, 0, 1, 0.5], dtype=torch.float64))
    unbounded = continuation_weights(rows, 0.5)  # no sentences: to the end of the answer
    torch.testing.assert_close(unbounded[0, 5:], torch.tensor([0.125, 0.0625], dtype=torch.float64))
    assert continuation_weights(rows, 0.0, sentence).tolist() == rows.double().tolist()
    between = torch.tensor([0, 0, 0, -1, -1, 1, 1])  # rows in no sentence (the space between) get nothing
    assert continuation_weights(rows, 0.5, between)[0, 3:].tolist() == [0.0] * 4
