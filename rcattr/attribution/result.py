"""The result of an attribution: the record ([`AttributionRecord`][rcattr.record.record.AttributionRecord]) with what is
read from it as methods, each one line handing the record to [`rcattr.grounding`][rcattr.grounding] or [`rcattr.viz`][rcattr.viz]."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from rcattr.grounding.citation_rule import DEFAULT_RULE, CitationRule, CitationStyle
from rcattr.grounding.citations import Citation, document_scores, sentence_citations
from rcattr.grounding.support import SUPPORT_THRESHOLD
from rcattr.grounding.vouching import unsupported_tokens
from rcattr.record.record import AttributionRecord
from rcattr.viz.cited_answer import cited_answer
from rcattr.viz.plain import result_dict
from rcattr.viz.table import result_frame, result_table_html

if TYPE_CHECKING:
    import pandas as pd


class RCAttributionResult(AttributionRecord):
    """Attribution of an answer to context spans; works with captum's `plot_seq_attr` / `plot_token_attr`.

    The data (scores, spans, signals, heads) are the record's ([`AttributionRecord`][rcattr.record.record.AttributionRecord]
    lists them); the methods below read the record through [`rcattr.grounding`][rcattr.grounding] (citations, unsupported
    tokens) and [`rcattr.viz`][rcattr.viz] (the cited answer, the tables, the plain dict).
    """

    def unsupported_tokens(self, threshold: float = SUPPORT_THRESHOLD) -> list[int]:
        """Indices of the answer tokens (not blank) whose [`token_support`][rcattr.record.signals.RCSignals] is below `threshold`
        (none for baselines); a token of a claim the context holds whole is not flagged
        ([`unsupported_tokens`][rcattr.grounding.vouching.unsupported_tokens]). The default, 0.25 (support log-odds below
        log(1/3)), was measured on the unsupported-tokens benchmark on two models (docs/benchmarks/citations.md).
        `threshold` is a real number in [0, 1]; anything else raises ValueError."""
        return unsupported_tokens(self, threshold)

    def document_scores(self, output: int | None = None) -> torch.Tensor:
        """`[n_documents]`: each document's share of the answer's (or output unit `output`'s) attribution, as
        citations rank them ([`document_scores`][rcattr.grounding.citations.document_scores])."""
        return document_scores(self, output)

    def citations(self, rule: CitationRule | None = None, **overrides: Any) -> list[Citation]:
        """The documents that support each sentence of the answer, as an application shows them
        ([`sentence_citations`][rcattr.grounding.citations.sentence_citations]).

        Whatever the output units, citations are per sentence of the answer: a sentence's units (its tokens,
        with `output_granularity="token"`) have their scores and context reliance averaged, and a whole-answer
        unit (`"answer"`, the default) was scored per sentence too (`sentence_rows`). Only an output
        unit of given character spans over several sentences cannot be split: those are cited once, after the
        last (`Citation.n_sentences` > 1), with a warning. Attribute with `granularity="sentence"` for
        `sentences=`.

        Parameters
        ----------
        rule : CitationRule, optional
            The rule (default [`CitationRule`][rcattr.grounding.citation_rule.CitationRule], whose fields say what each
            cut-off does).
        **overrides
            Fields of the rule to replace: `min_share`, `max_sources`, `min_reliance`, `sentences`,
            `min_support` (e.g. `result.citations(min_support=0)` cites every sentence whatever its
            support; the status is given all the same), `verdict` (the support probe's operating point,
            `"lenient"`, `"balanced"` or `"strict"`).

        Returns
        -------
        list of Citation
            One per answer sentence that an output unit covers, in answer order, with offsets into the answer.
        """
        return sentence_citations(self, replace(rule or DEFAULT_RULE, **overrides))

    def cited_answer(
        self, style: CitationStyle | None = None, *, rule: CitationRule | None = None, **overrides: Any
    ) -> str:
        """The answer with citation marks after each cited sentence ([`citations`][rcattr.attribution.result.RCAttributionResult.citations] under `rule` with
        `overrides`; [`cited_answer`][rcattr.viz.cited_answer.cited_answer]).

        `style` (default the rule's, `"[n]"`) is `"[n]"` (plain text, `... Paris [1].`), `"markdown"`
        (footnotes `[^1]`, the text and labels escaped, only http(s) urls linked) or `"html"` (linked
        superscripts, escaped); `references=False` leaves out the list of cited documents with their labels (the
        metadata's title, source, ..., with the id or first words where documents share one:
        [`source_labels`][rcattr.text.documents.source_labels]).
        """
        if style is not None:
            overrides["style"] = style
        rule = replace(rule or DEFAULT_RULE, **overrides)
        return cited_answer(self, sentence_citations(self, rule), rule)

    def to_dataframe(self, output: int | None = None) -> pd.DataFrame:
        """Context spans sorted by score (ContextCite's table; [`result_frame`][rcattr.viz.table.result_frame]):
        `document` numbers documents from 1, `source` is the 0-based index into `chunks`, `start` and
        `end` are character offsets into that chunk; `attrs["context_reliance"]` holds the answer's (or the
        output unit's) [`context_reliance`][rcattr.attribution.result.RCAttributionResult.context_reliance]."""
        return result_frame(self, output)

    def to_dict(self) -> dict[str, Any]:
        """Everything in the result as plain JSON-serialisable values (`json.dumps(result.to_dict())`); the
        keys are [`result_dict`][rcattr.viz.plain.result_dict]'s."""
        return result_dict(self)

    def _repr_html_(self) -> str:
        """A compact table for notebooks: the answer, then each output unit's top 3 sources."""
        return result_table_html(self)
