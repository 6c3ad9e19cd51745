"""The result of an attribution: captum's ``LLMAttributionResult`` plus what RC knows about it."""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from captum.attr import LLMAttributionResult

from rcattr.attribution.attributed import AttributedAnswer, AttributedContext
from rcattr.grounding.citations import (
    MAX_SOURCES,
    MIN_RELIANCE,
    MIN_SHARE,
    Citation,
    document_shares,
    sentence_citations,
)
from rcattr.grounding.claims import context_parts, find_claims
from rcattr.grounding.signals import RCSignals
from rcattr.grounding.support import SUPPORT_THRESHOLD
from rcattr.grounding.vouching import UNSUPPORTED_BELOW
from rcattr.text.documents import documents_json
from rcattr.text.segmentation import TextSpan, one_line, tokens_within

if TYPE_CHECKING:
    import pandas as pd


class _FromRC:
    """An attribute of :attr:`RCAttributionResult.rc` read from the result itself (None for a baseline)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, result: RCAttributionResult | None, owner: type | None = None) -> Any:
        if result is None:
            return self
        return None if result.rc is None else getattr(result.rc, self.name)

    def __set__(self, result: RCAttributionResult, value: Any) -> None:
        raise AttributeError(
            f"{self.name} is one of the result's RC signals: replace them, e.g. "
            f"result.rc = dataclasses.replace(result.rc, {self.name}=...)"
        )


class RCAttributionResult(LLMAttributionResult):
    """Attribution of an answer to context spans; works with captum's ``plot_seq_attr`` / ``plot_token_attr``.

    Attributes
    ----------
    seq_attr : Tensor, shape [n_spans]
        Share of the whole answer attributed to each context span (sums to 1).
    token_attr : Tensor, shape [n_outputs, n_spans]
        The same per output unit (answer, sentence or token), each row summing to 1.
    input_tokens, output_tokens : list of str
        Texts of the context spans and of the output units.
    context_spans, output_spans : list of TextSpan
        Their exact character offsets (context spans index into ``chunks[span.source]``,
        output spans into ``answer``).
    chunks : list of str
        The context texts (one per document when the context was given as chunks).
    documents : list of Document
        The context's documents with their ids and metadata, as the input gave them (``chunks`` are their texts).
    answer : str
        The explained answer.
    answer_tokens : list of TextSpan
        The answer's tokens, for the per-token signals below.
    rc : RCSignals or None
        What only RC knows (:class:`~rcattr.grounding.signals.RCSignals`): per answer token its groundedness, lookback,
        log-probability, peak and support, each output unit's context reliance, and the heads; None for a
        baseline. Each is also an attribute of the result (``result.token_support``: None for a baseline).
    evidence : list of str or None
        The texts :meth:`citations` checks the answer's numbers, dates and names against: the documents and
        the question, never the template's labels (a captum input's whole prompt); ``chunks`` when None.
    sentence_rows : SentenceRows or None
        With a whole-answer unit (``output_granularity="answer"``) and several answer sentences: each
        sentence's ``[n_sentences, n_spans]`` rows and context reliance from the same pass, which
        :meth:`citations` cites; None otherwise.
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
        """``context``: the documents and the spans scored; ``output``: the answer, its units and tokens;
        ``rc``: RC's signals (None for a baseline); ``inp``: captum's input, for its plots."""
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

    @property
    def context_reliance(self) -> float | None:
        """How much the whole answer relies on the context: the mean :attr:`lookback` ratio of its tokens on
        the RC-selected heads, in [0, 1] (None for baselines). The best answer-level signal of the
        groundedness benchmarks (``python -m rcattr.eval.groundedness``, docs/benchmarks.md); a relative
        signal, not a truth test."""
        return None if self.rc is None else self.rc.context_reliance

    def unsupported_tokens(self, threshold: float = SUPPORT_THRESHOLD) -> list[int]:
        """Indices of the answer tokens (not blank) whose :attr:`token_support` is below ``threshold``
        (none for baselines). The default, 0.25 (support log-odds below log(1/3)), was measured on the
        unsupported-tokens benchmark on two models (docs/benchmarks.md). A token of a claim that a sentence
        of the documents or the question holds whole (:mod:`rcattr.grounding.claims`) is not flagged: the first piece of
        a copied word (``" O"`` of ``"OAPEC"``) is often unlikely on its own, and the claim is in the context.

        ``threshold`` is a real number in [0, 1], the range of token support; anything else raises ValueError.
        """
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0 <= threshold <= 1:
            raise ValueError(
                f"threshold must be a real number in [0, 1] (token support is a probability), got {threshold!r}"
            )
        if self.token_support is None:
            return []
        context = context_parts(self.evidence if self.evidence is not None else self.chunks)
        held = {
            index
            for claim in find_claims(self.answer, context)
            if claim.held
            for index in tokens_within(self.answer_tokens, claim.start, claim.end)
        }
        return [
            index
            for index, (token, support) in enumerate(
                zip(self.answer_tokens, self.token_support.tolist(), strict=True)
            )
            if support < threshold and token.text.strip() and index not in held
        ]

    def scores(self, output: int | None = None) -> torch.Tensor:
        """``[n_spans]`` scores for the whole answer, or for output unit ``output``."""
        if output is None:
            return self.seq_attr
        if not -len(self.output_spans) <= output < len(self.output_spans):
            raise IndexError(
                f"output={output} is out of range; the result has {len(self.output_spans)} output units"
            )
        assert self.token_attr is not None  # always set by __init__
        return self.token_attr[output]

    def top(self, k: int | None = 5, output: int | None = None) -> list[tuple[TextSpan, float]]:
        """The ``k`` highest-scoring context spans with their scores, for the answer or one output unit.

        ``k`` is a whole number >= 1 (a Python or NumPy integer; more than there are spans gives them all),
        or None for all of them; anything else raises ValueError.
        """
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
                raise ValueError(f"k must be a whole number >= 1 (or None for every span), got {k!r}")
            k = int(k)
        scores = self.scores(output)
        order = torch.argsort(scores, descending=True, stable=True)[:k]
        return [(self.context_spans[i], float(scores[i])) for i in order.tolist()]

    def document_scores(self, output: int | None = None) -> torch.Tensor:
        """``[n_documents]``: each document's share of the answer's (or output unit ``output``'s) attribution, as
        citations rank them: its best span's score, normalised over the documents (:func:`document_shares`)."""
        sources = torch.tensor([span.source for span in self.context_spans], dtype=torch.long)
        return document_shares(self.scores(output).cpu(), sources, len(self.chunks))

    def citations(
        self,
        *,
        min_share: float = MIN_SHARE,
        max_sources: int = MAX_SOURCES,
        min_reliance: float = MIN_RELIANCE,
        sentences: int = 0,
        min_support: float = UNSUPPORTED_BELOW,
    ) -> list[Citation]:
        """The documents that support each sentence of the answer, as an application shows them
        (:mod:`rcattr.grounding.citations`).

        Whatever the output units, citations are per sentence of the answer: a sentence's units (its tokens,
        with ``output_granularity="token"``) have their scores and context reliance averaged, and a whole-answer
        unit (``"answer"``, the default) was scored per sentence too (:attr:`sentence_rows`). Only an output
        unit of given character spans over several sentences cannot be split: those are cited once, after the
        last (``Citation.n_sentences`` > 1), with a warning. Attribute with ``granularity="sentence"`` for
        ``sentences=``.

        Parameters
        ----------
        min_share : float in (0, 1]
            A document is cited when its share of the sentence's attribution is at least this fraction of the
            best document's.
        max_sources : int
            At most this many documents per sentence, best first.
        min_reliance : float in [0, 1]
            A sentence whose context reliance (:attr:`unit_context_reliance`) is below this gets no citation.
        sentences : int
            Also give each cited document's ``sentences`` best context spans for the sentence, with their
            character offsets into the document.
        min_support : float in [0, 1]
            A sentence whose support (``Citation.support``: how much the documents vouch for it) is below this
            gets no citation; the default is the cut-off of the ``"unsupported"`` status, 0 cites every
            sentence whatever its support (the status is given all the same).

        Returns
        -------
        list of Citation
            One per answer sentence that an output unit covers, in answer order, with offsets into the answer.
        """
        return sentence_citations(self, min_share, max_sources, min_reliance, sentences, min_support)

    def cited_answer(self, style: str = "[n]", *, references: bool = True, **rule: Any) -> str:
        """The answer with citation marks after each cited sentence (:meth:`citations`, whose rule ``rule``
        sets).

        ``style`` is ``"[n]"`` (plain text, ``... Paris [1].``), ``"markdown"`` (footnotes ``[^1]``, the text
        and labels escaped, only http(s) urls linked) or ``"html"`` (linked superscripts, escaped);
        ``references`` appends the list of cited documents with their labels (the metadata's title, source,
        ..., with the id or first words where documents share one: :func:`~rcattr.text.documents.source_labels`).
        """
        from rcattr.viz.cited_answer import cited_answer

        return cited_answer(self, sentence_citations(self, **rule), style, references=references)

    def to_dataframe(self, output: int | None = None) -> pd.DataFrame:
        """Context spans sorted by score (ContextCite's table): ``document`` numbers documents from 1 as
        people read them (``Document [1]``), ``source`` is the 0-based index into ``chunks``, ``start`` and
        ``end`` are character offsets into that chunk. ``attrs["context_reliance"]`` holds the answer's (or
        the output unit's) :attr:`context_reliance`."""
        import pandas as pd

        columns = ["score", "document", "source", "start", "end", "text"]
        rows = [
            (score, span.source + 1, span.source, span.start, span.end, span.text)
            for span, score in self.top(None, output)
        ]
        frame = pd.DataFrame(rows, columns=columns)
        if output is None or self.unit_context_reliance is None:
            frame.attrs["context_reliance"] = self.context_reliance
        else:
            frame.attrs["context_reliance"] = float(self.unit_context_reliance[output])
        return frame

    @property
    def seq_attr_dict(self) -> dict[str, float]:
        """Each span's score keyed by its text; a text that occurs more than once (the same sentence in
        two documents) gets `` [doc N]`` and, within one document, `` (2)``, `` (3)``... appended."""
        return dict(zip(self.span_keys(), self.seq_attr.tolist(), strict=True))

    def span_keys(self) -> list[str]:
        """A unique key per context span: its text, made unique as :attr:`seq_attr_dict` describes."""
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
        """Short labels of the context spans for plots: ``[N] first words…`` (``[N]``: document N, with
        several documents), at most ``width`` characters."""
        several = len(self.chunks) > 1
        labels = []
        for span in self.context_spans:
            prefix = f"[{span.source + 1}] " if several else ""
            labels.append(prefix + one_line(span.text, width - len(prefix)))
        return labels

    def plot_seq_attr(self, show: bool = False) -> Any:
        """captum's plot of the whole answer's scores, labelled with :meth:`span_labels`."""
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

    def to_dict(self) -> dict[str, Any]:
        """Everything in the result as plain JSON-serialisable values (``json.dumps(result.to_dict())``).

        Spans are ``{"text", "start", "end"}`` dicts (context spans add ``source``, 0-based, and
        ``document``, 1-based); ``seq_attr`` is a list, ``token_attr`` a list of rows; the per-token signals
        (``groundedness``, ``lookback``, ``token_logprob``, ``token_peak``, ``token_support``),
        ``context_reliance``, ``unit_context_reliance`` and ``heads`` (``{"kind", "selected": [[layer, head],
        ...], "weights", "outliers", "few_heads", "lexical_share", "seeing", "reach"}``: see :class:`HeadSelection`) are None
        for baselines,
        ``unsupported_tokens`` empty. ``documents`` lists each document's ``{"document", "id", "metadata"}``,
        the metadata made plain JSON by :func:`~rcattr.text.documents.plain_json` (dates as ISO strings, bytes
        decoded, other objects as their ``str()``).
        The full ``[L, H]`` head score table is left out (see :attr:`head_selection`).
        """
        assert self.token_attr is not None  # always set by __init__
        selection = self.head_selection
        return {
            "answer": self.answer,
            "chunks": self.chunks,
            "documents": documents_json(self.documents),
            "span_scorer": self.span_scorer,
            "context_spans": [
                {"text": s.text, "document": s.source + 1, "source": s.source, "start": s.start, "end": s.end}
                for s in self.context_spans
            ],
            "output_spans": [{"text": s.text, "start": s.start, "end": s.end} for s in self.output_spans],
            "seq_attr": self.seq_attr.tolist(),
            "token_attr": self.token_attr.tolist(),
            "answer_tokens": [{"text": s.text, "start": s.start, "end": s.end} for s in self.answer_tokens],
            **{
                name: None if values is None else values.tolist()
                for name, values in (
                    ("groundedness", self.groundedness),
                    ("lookback", self.lookback),
                    ("token_logprob", self.token_logprob),
                    ("token_peak", self.token_peak),
                    ("token_support", self.token_support),
                )
            },
            "context_reliance": self.context_reliance,
            "unit_context_reliance": None
            if self.unit_context_reliance is None
            else self.unit_context_reliance.tolist(),
            "unsupported_tokens": self.unsupported_tokens(),
            "heads": None
            if selection is None
            else {
                "kind": selection.kind,
                "selected": [list(pair) for pair in selection.as_pairs()],
                "weights": None if selection.weights is None else selection.weights.tolist(),
                "outliers": selection.outliers,
                "few_heads": selection.few_heads,
                "lexical_share": selection.lexical_share,
                "seeing": selection.seeing,
                "reach": None if selection.reach is None else selection.reach.tolist(),
            },
        }

    def _repr_html_(self) -> str:
        """A compact table for notebooks: the answer, then each output unit's top 3 sources."""
        from rcattr.viz.table import result_table_html

        return result_table_html(self)

    def __repr__(self) -> str:
        best = ", ".join(f"{span.text[:30]!r}: {score:.2f}" for span, score in self.top(3))
        return (
            f"RCAttributionResult({len(self.context_spans)} spans x {len(self.output_spans)} outputs, "
            f"scorer={self.span_scorer!r}, top: {best})"
        )
