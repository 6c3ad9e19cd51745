"""What an attribution found, as data: captum's `LLMAttributionResult` (the scores and the spans they refer
to) plus what RC knows about it (its signals and heads).

Everything computed from a record (citations, unsupported tokens, the table, the cited answer, the HTML page,
the plain dict) lives in [`rcattr.grounding`][rcattr.grounding] and [`rcattr.viz`][rcattr.viz] as functions that take one;
[`RCAttributionResult`][rcattr.attribution.result.RCAttributionResult] is this record with those as methods."""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from captum.attr import LLMAttributionResult

from rcattr.record.attributed import AttributedAnswer, AttributedContext
from rcattr.record.signals import RCSignals
from rcattr.text.segmentation import TextSpan, one_line


class _FromRC:
    """An attribute of [`AttributionRecord.rc`][rcattr.record.record.AttributionRecord.rc] read from the result itself (None for a baseline)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, result: AttributionRecord | None, owner: type | None = None) -> Any:
        if result is None:
            return self
        return None if result.rc is None else getattr(result.rc, self.name)

    def __set__(self, result: AttributionRecord, value: Any) -> None:
        raise AttributeError(
            f"{self.name} is one of the result's RC signals: replace them, e.g. "
            f"result.rc = dataclasses.replace(result.rc, {self.name}=...)"
        )


class AttributionRecord(LLMAttributionResult):
    """Attribution of an answer to context spans, as data; works with captum's `plot_seq_attr` /
    `plot_token_attr`. [`RCAttributionResult`][rcattr.attribution.result.RCAttributionResult] adds the grounding and views.

    Attributes
    ----------
    seq_attr : Tensor, shape [n_spans]
        Share of the whole answer attributed to each context span (sums to 1).
    token_attr : Tensor, shape [n_outputs, n_spans]
        The same per output unit (answer, sentence or token), each row summing to 1.
    input_tokens, output_tokens : list of str
        Texts of the context spans and of the output units.
    context_spans, output_spans : list of TextSpan
        Their exact character offsets (context spans index into `chunks[span.source]`,
        output spans into `answer`).
    chunks : list of str
        The context texts (one per document when the context was given as chunks).
    documents : list of Document
        The context's documents with their ids and metadata, as the input gave them (`chunks` are their texts).
    answer : str
        The explained answer.
    answer_tokens : list of TextSpan
        The answer's tokens, for the per-token signals below.
    rc : RCSignals or None
        What only RC knows ([`RCSignals`][rcattr.record.signals.RCSignals]): per answer token its groundedness, lookback,
        log-probability, peak and support, each output unit's context reliance, and the heads; None for a
        baseline. Each is also an attribute of the result (`result.token_support`: None for a baseline).
    evidence : list of str or None
        The texts citations check the answer's numbers, dates and names against: the documents and
        the question, never the template's labels (a captum input's whole prompt); `chunks` when None.
    sentence_rows : SentenceRows or None
        With a whole-answer unit (`output_granularity="answer"`) and several answer sentences: each
        sentence's `[n_sentences, n_spans]` rows and context reliance from the same pass, which
        citations cite; None otherwise.
    span_scorer : str
        The RC span scorer, or the name of the baseline method that produced the scores.
    """

    input_tokens: list[str]
    output_tokens: list[str]

    def __init__(
        self,
        seq_attr: torch.Tensor,
        token_attr: torch.Tensor,
        *,
        context: AttributedContext,
        output: AttributedAnswer,
        span_scorer: str,
        rc: RCSignals | None = None,
        inp: Any = None,
    ) -> None:
        """`context`: the documents and the spans scored; `output`: the answer, its units and tokens;
        `rc`: RC's signals (None for a baseline); `inp`: captum's input, for its plots."""
        super().__init__(
            input_tokens=[span.text for span in context.spans],
            output_tokens=[span.text for span in output.units],
            seq_attr=seq_attr,
            token_attr=token_attr,
            inp=inp,
        )
        self.context_spans = list(context.spans)
        self.output_spans = list(output.units)
        self.documents = list(context.documents)
        self.chunks = [document.text for document in self.documents]
        self.evidence = None if context.evidence is None else list(context.evidence)
        self.answer = output.text
        self.answer_tokens = list(output.tokens)
        self.sentence_rows = output.sentence_rows
        self.span_scorer = span_scorer
        self.rc = rc

    groundedness = _FromRC()
    lookback = _FromRC()
    unit_context_reliance = _FromRC()
    token_logprob = _FromRC()
    token_peak = _FromRC()
    token_support = _FromRC()
    head_selection = _FromRC()
    lexical_share = _FromRC()

    @property
    def context_reliance(self) -> float | None:
        """How much the whole answer relies on the context: the mean [`lookback`][rcattr.record.signals.RCSignals] ratio of its tokens on
        the RC-selected heads, in [0, 1] (None for baselines). The best answer-level signal of the
        groundedness benchmarks (`python -m rcattr.eval.groundedness`, docs/benchmarks/citations.md); a relative
        signal, not a truth test."""
        return None if self.rc is None else self.rc.context_reliance

    def scores(self, output: int | None = None) -> torch.Tensor:
        """`[n_spans]` scores for the whole answer, or for output unit `output`."""
        if output is None:
            return self.seq_attr
        if not -len(self.output_spans) <= output < len(self.output_spans):
            raise IndexError(
                f"output={output} is out of range; the result has {len(self.output_spans)} output units"
            )
        assert self.token_attr is not None  # always set by __init__
        return self.token_attr[output]

    def top(self, k: int | None = 5, output: int | None = None) -> list[tuple[TextSpan, float]]:
        """The `k` highest-scoring context spans with their scores, for the answer or one output unit.

        `k` is a whole number >= 1 (a Python or NumPy integer; more than there are spans gives them all),
        or None for all of them; anything else raises ValueError.
        """
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
                raise ValueError(f"k must be a whole number >= 1 (or None for every span), got {k!r}")
            k = int(k)
        scores = self.scores(output)
        order = torch.argsort(scores, descending=True, stable=True)[:k]
        return [(self.context_spans[i], float(scores[i])) for i in order.tolist()]

    @property
    def seq_attr_dict(self) -> dict[str, float]:
        """Each span's score keyed by its text; a text that occurs more than once (the same sentence in
        two documents) gets `` [doc N]`` and, within one document, `` (2)``, `` (3)``... appended."""
        return dict(zip(self.span_keys(), self.seq_attr.tolist(), strict=True))

    def span_keys(self) -> list[str]:
        """A unique key per context span: its text, made unique as [`seq_attr_dict`][rcattr.record.record.AttributionRecord.seq_attr_dict] describes."""
        texts = [span.text for span in self.context_spans]
        repeated = {text for text in texts if texts.count(text) > 1}
        keys, seen = [], set()
        for span in self.context_spans:
            key = f"{span.text} [doc {span.source + 1}]" if span.text in repeated else span.text
            base, copy = key, 1
            while key in seen:
                copy += 1
                key = f"{base} ({copy})"
            seen.add(key)
            keys.append(key)
        return keys

    def span_labels(self, width: int = 30) -> list[str]:
        """Short labels of the context spans for plots: `[N] first words…` (`[N]`: document N, with
        several documents), at most `width` characters."""
        several = len(self.chunks) > 1
        labels = []
        for span in self.context_spans:
            prefix = f"[{span.source + 1}] " if several else ""
            labels.append(prefix + one_line(span.text, width - len(prefix)))
        return labels

    def plot_seq_attr(self, show: bool = False) -> Any:
        """captum's plot of the whole answer's scores, labelled with [`span_labels`][rcattr.record.record.AttributionRecord.span_labels]."""
        with self._short_labels():
            return super().plot_seq_attr(show=show)

    def plot_token_attr(self, show: bool = False) -> Any:
        """captum's heat map of output units x context spans, labelled with short texts."""
        with self._short_labels():
            return super().plot_token_attr(show=show)

    @contextmanager
    def _short_labels(self) -> Iterator[None]:
        inputs, outputs = self.input_tokens, self.output_tokens
        self.input_tokens = self.span_labels()
        self.output_tokens = [one_line(span.text, 30) for span in self.output_spans]
        try:
            yield
        finally:
            self.input_tokens, self.output_tokens = inputs, outputs

    def __repr__(self) -> str:
        best = ", ".join(f"{span.text[:30]!r}: {score:.2f}" for span, score in self.top(3))
        return (
            f"{type(self).__name__}({len(self.context_spans)} spans x {len(self.output_spans)} outputs, "
            f"scorer={self.span_scorer!r}, top: {best})"
        )
