"""The result of an attribution: captum's ``LLMAttributionResult`` plus what RC knows about it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from captum.attr import LLMAttributionResult

from rcattr.segmentation import TextSpan

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class HeadSelection:
    """The heads an attribution used and the scores they were chosen by.

    Attributes
    ----------
    scores : Tensor, shape [L, H]
        Every head's score (``kind``) for this example.
    heads : Tensor of long, shape [k, 2]
        The selected ``(layer, head)`` pairs.
    kind : str
        The head score (``"superiority"``, ``"rc_std"``, ``"rc"``), or ``"fixed"`` for given heads.
    weights : Tensor, shape [k], optional
        Each selected head's weight (None: all 1).
    unit_heads : Tensor of long, shape [U, k, 2], optional
        With per-unit selection, the heads chosen for each output unit (``heads`` serve the whole answer).
    unit_weights : Tensor, shape [U, k], optional
        Their weights.
    """

    scores: torch.Tensor
    heads: torch.Tensor
    kind: str
    weights: torch.Tensor | None = None
    unit_heads: torch.Tensor | None = None
    unit_weights: torch.Tensor | None = None

    def as_pairs(self) -> list[tuple[int, int]]:
        return [(int(layer), int(head)) for layer, head in self.heads.tolist()]


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
    answer : str
        The explained answer.
    answer_tokens : list of TextSpan
        The answer's tokens, for ``groundedness``.
    groundedness : Tensor, shape [n_answer_tokens], or None
        RC methods only. Per answer token j, on the selected heads, ``sum_h E[Z_h] / sum_h (E[Z_h] + E[Z'_h])`` with
        X = the token's logits to the context and Y = Y(g, g), the answer's self-contextualization
        (one reference for every token, so early tokens are not judged on a tiny sample). In [0, 1]:
        low values mark answer tokens whose contextualization comes from the answer, not the context.
    head_selection : HeadSelection or None
        RC methods only: all head scores and the selected heads.
    span_scorer : str
        The RC span scorer, or the name of the baseline method that produced the scores.
    """

    def __init__(
        self,
        *,
        seq_attr: torch.Tensor,
        token_attr: torch.Tensor,
        context_spans: Sequence[TextSpan],
        output_spans: Sequence[TextSpan],
        chunks: Sequence[str],
        answer: str,
        answer_tokens: Sequence[TextSpan],
        span_scorer: str,
        groundedness: torch.Tensor | None = None,
        head_selection: HeadSelection | None = None,
        inp: Any = None,
    ) -> None:
        super().__init__(
            input_tokens=[span.text for span in context_spans],
            output_tokens=[span.text for span in output_spans],
            seq_attr=seq_attr,
            token_attr=token_attr,
            inp=inp,
        )
        self.context_spans = list(context_spans)
        self.output_spans = list(output_spans)
        self.chunks = list(chunks)
        self.answer = answer
        self.answer_tokens = list(answer_tokens)
        self.groundedness = groundedness
        self.head_selection = head_selection
        self.span_scorer = span_scorer

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

    def top(self, k: int = 5, output: int | None = None) -> list[tuple[TextSpan, float]]:
        """The ``k`` highest-scoring context spans with their scores, for the answer or one output unit."""
        scores = self.scores(output)
        order = torch.argsort(scores, descending=True, stable=True)[:k]
        return [(self.context_spans[i], float(scores[i])) for i in order.tolist()]

    def to_dataframe(self, output: int | None = None) -> pd.DataFrame:
        """Context spans sorted by score (ContextCite's table), with their source and offsets."""
        import pandas as pd

        rows = [
            {"score": score, "source": span.source, "start": span.start, "end": span.end, "text": span.text}
            for span, score in self.top(len(self.context_spans), output)
        ]
        return pd.DataFrame(rows, columns=["score", "source", "start", "end", "text"])

    def __repr__(self) -> str:
        best = ", ".join(f"{span.text[:30]!r}: {score:.2f}" for span, score in self.top(3))
        return (
            f"RCAttributionResult({len(self.context_spans)} spans x {len(self.output_spans)} outputs, "
            f"scorer={self.span_scorer!r}, top: {best})"
        )
