"""BM25 between each output unit's text and each context span: the lexical baseline."""

from __future__ import annotations

import re

import bm25s
import torch

from rcattr.base import AttributionInput, Example, SpanAttributor
from rcattr.result import RCAttributionResult

_WORD = re.compile(r"\w+")


def bm25_terms(text: str) -> list[str]:
    """Lower-cased word tokens (``\\w+``), the terms BM25 matches on."""
    return _WORD.findall(text.lower())


class BM25Attributor(SpanAttributor):
    """BM25 (bm25s, Lucene's variant: k1 = 1.5, b = 0.75) with the context spans as the corpus and
    each output unit as the query.

    Lucene's idf ``ln(1 + (N - n + 0.5) / (n + 0.5))`` stays positive; the classic Okapi idf is 0
    for a term in half the spans, which blinds it on two-source records. Reads text only; the model
    generates the answer when none is given. Scores are raw BM25 (a span sharing no term scores 0).
    """

    name = "bm25"

    def _explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        corpus = [bm25_terms(span.text) for span in example.context_spans]
        if not any(corpus):
            raise ValueError("BM25 needs context spans with words in them; every span is empty")
        index = bm25s.BM25(method="lucene")
        index.index(corpus, show_progress=False)
        units = [index.get_scores(bm25_terms(unit.text)) for unit in example.output_spans]
        token_attr = torch.stack([torch.as_tensor(scores, dtype=torch.float64) for scores in units])
        seq_attr = torch.as_tensor(index.get_scores(bm25_terms(example.answer)), dtype=torch.float64)
        return example.result(seq_attr, token_attr, self.name, inp)
