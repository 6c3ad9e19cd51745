"""What the views share (rcattr.viz._pieces): a chunk cut into spans and gaps, the shading intensities."""

from __future__ import annotations

import pytest
import torch

from rcattr.text.segmentation import TextSpan
from rcattr.viz._pieces import chunk_pieces, contrast_intensity, document_names, shade_intensity, text_pieces
from tests.helpers.cited import SENTENCE_ROWS, SENTENCES, made_result, steam_engine_chunks
from tests.helpers.results import CHUNKS, hand_made_result


def test_text_pieces_give_each_character_once_in_text_order() -> None:
    spans = [(0, TextSpan(6, 12, "", 0)), (1, TextSpan(2, 8, "", 0)), (2, TextSpan(12, 14, "", 0))]
    pieces = text_pieces(spans, 0, 16)  # out of order, overlapping, touching, and a gap at each end
    assert pieces == [(0, 2, None), (2, 8, 1), (8, 12, 0), (12, 14, 2), (14, 16, None)]
    assert text_pieces(spans, 3, 7) == [(3, 7, 1)]  # clipped to the range
    assert text_pieces([], 0, 4) == [(0, 4, None)]


def test_chunk_pieces_cover_each_chunk_with_its_own_spans() -> None:
    result = hand_made_result()
    for source, chunk in enumerate(CHUNKS):
        pieces = chunk_pieces(result, source)
        assert "".join(chunk[start:end] for start, end, _ in pieces) == chunk
        spans = [index for _, _, index in pieces if index is not None]
        assert spans == [
            i
            for i, span in sorted(enumerate(result.context_spans), key=lambda s: s[1].start)
            if span.source == source
        ]


def test_document_names_number_documents_from_one() -> None:
    result = hand_made_result()
    assert document_names(result) == ["Document [1]", "Document [2]"]


def test_document_names_tell_apart_documents_that_share_a_title() -> None:
    result = made_result(SENTENCES, SENTENCE_ROWS, documents=steam_engine_chunks())
    assert document_names(result) == [
        "Document [1]: Steam engine · Steam_engine-11",
        "Document [2]: Steam engine · Steam_engine-12",
        "Document [3]: Boiler",
    ]


def test_shade_intensity_is_the_square_root_of_the_share() -> None:
    shades = shade_intensity(torch.tensor([0.01, 0.25, 1.0, 2.0, -1.0]))
    assert shades == pytest.approx([0.1, 0.5, 1.0, 1.0, 0.0])


def test_contrast_intensity_is_relative_to_each_rows_best_span() -> None:
    scores = torch.tensor([[0.6, 0.3, 0.1], [0.25, 0.25, 0.25], [0.1, 0.2, 0.7]])
    shades = contrast_intensity(scores)
    torch.testing.assert_close(shades[0], torch.tensor([1.0, (0.3 - 1 / 3) / (0.6 - 1 / 3), 0.0]).clamp(0, 1))
    assert shades[1].tolist() == [0.0, 0.0, 0.0]  # a flat row stays unshaded
    assert shades[2].tolist() == [0.0, 0.0, 1.0]
    assert contrast_intensity(torch.empty(2, 0)).shape == (2, 0)
