"""BM25's terms and scores (rcattr.attribution.lexical)."""

from __future__ import annotations

import pytest

from rcattr.attribution.lexical import bm25_scores, bm25_terms
from rcattr.baselines import RandomAttributor
from rcattr.text.prompting import ContextInput


def test_terms_are_lower_cased_words() -> None:
    assert bm25_terms("The Cat's 2 mats, e.g. here!") == ["the", "cat", "s", "2", "mats", "e", "g", "here"]
    assert bm25_terms(" .,; ") == []


def test_each_unit_scores_the_spans_sharing_its_words(llama, tokenizer) -> None:
    inp = ContextInput(["Cats purr softly.", "Dogs bark loudly."], "Who?")
    example = RandomAttributor(llama, tokenizer).prepare(inp, "Dogs bark. Cats purr.", "chunk", "sentence")
    seq_attr, token_attr = bm25_scores(example)
    assert seq_attr.shape == (2,) and token_attr.shape == (2, 2)
    assert token_attr[0, 1] > 0 == token_attr[0, 0] and token_attr[1, 0] > 0 == token_attr[1, 1]
    assert seq_attr[0] == pytest.approx(seq_attr[1])  # the answer names both as often


def test_a_unit_of_no_word_scores_every_span_zero(llama, tokenizer) -> None:
    """A punctuation token as an output unit (``output_granularity="token"``) crashed bm25s before issue 76."""
    inp = ContextInput(["Cats purr softly.", "Dogs bark loudly."], "Who?")
    example = RandomAttributor(llama, tokenizer).prepare(inp, "Dogs bark.", "chunk", "token")
    blank = [index for index, unit in enumerate(example.output_spans) if not bm25_terms(unit.text)]
    assert blank  # the "." token at least
    seq_attr, token_attr = bm25_scores(example)
    assert token_attr.shape == (len(example.output_spans), 2) and not token_attr[blank].any()
    assert seq_attr[1] > 0
