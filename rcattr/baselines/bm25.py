"""BM25 between each output unit's text and each context span: the lexical baseline."""

from __future__ import annotations

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.lexical import bm25_scores
from rcattr.attribution.result import RCAttributionResult


class BM25Attributor(SpanAttributor):
    """BM25 (bm25s, Lucene's variant: k1 = 1.5, b = 0.75) with the context spans as the corpus and
    each output unit as the query.

    Lucene's idf `ln(1 + (N - n + 0.5) / (n + 0.5))` stays positive; the classic Okapi idf is 0
    for a term in half the spans, which blinds it on two-source records. Reads text only; the model
    generates the answer when none is given. Scores are raw BM25 (a span sharing no term scores 0).
    """

    name = "bm25"

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        seq_attr, token_attr = bm25_scores(example)
        return example.result(seq_attr, token_attr, self.name, inp)
