"""The BM25 baseline (rcattr.baselines.bm25) against Lucene's formula."""

from __future__ import annotations

import math

import torch

from rcattr.attribution.lexical import bm25_terms
from rcattr.baselines import (
    BM25Attributor,
)
from rcattr.text.prompting import ContextInput
from tests.helpers.attribution import ANSWER, BRACED_INPUT


def _lucene_bm25(query: list[str], corpus: list[list[str]], k1: float = 1.5, b: float = 0.75) -> list[float]:
    average = sum(map(len, corpus)) / len(corpus)
    scores = []
    for document in corpus:
        total = 0.0
        for term in set(query):
            n = sum(term in other for other in corpus)
            if n:
                idf = math.log(1 + (len(corpus) - n + 0.5) / (n + 0.5))
                tf = document.count(term)
                total += idf * tf / (tf + k1 * (1 - b + b * len(document) / average))
        scores.append(total)
    return scores


def test_bm25_matches_the_lucene_formula(llama, tokenizer) -> None:
    result = BM25Attributor(llama, tokenizer).attribute(
        BRACED_INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    corpus = [bm25_terms(span.text) for span in result.context_spans]
    expected = [_lucene_bm25(bm25_terms(unit), corpus) for unit in ("It sat.", "Then it purred.")]
    torch.testing.assert_close(result.token_attr, torch.tensor(expected), atol=1e-5, rtol=1e-5)
    assert result.top(1, output=1)[0][0].text == "It purred."


def test_bm25_separates_two_sources(llama, tokenizer) -> None:
    # Okapi's idf is 0 for a term in one of two documents; Lucene's is not
    result = BM25Attributor(llama, tokenizer).attribute(
        ContextInput(["The cat sat on a mat.", "Loud dogs bark at night."]), "dogs bark", granularity="chunk"
    )
    assert result.seq_attr[1] > 0 and result.seq_attr[0] == 0
