"""What only RC knows about an answer ([`RCSignals`][rcattr.record.signals.RCSignals]): per answer token, its grounding in the context,
and the heads it was read from. A result carries them as `result.rc` (None for a baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from rcattr.heads.selection import HeadSelection
from rcattr.protocols import ClaimProbe


class _Attributed(Protocol):
    """What [`RCSignals.of`][rcattr.record.signals.RCSignals.of] reads of a result (an [`AttributionRecord`][rcattr.record.record.AttributionRecord])."""

    @property
    def rc(self) -> RCSignals | None: ...

    @property
    def span_scorer(self) -> str: ...


@dataclass(frozen=True)
class RCSignals:
    """The RC signals of one answer, from the pass that attributed it.

    Attributes
    ----------
    groundedness : Tensor, shape [n_answer_tokens]
        Per answer token j, on the selected heads, `sum_h E[Z_h] / sum_h (E[Z_h] + E[Z'_h])` with X = the
        token's logits to the context and Y = Y(g, g), the answer's self-contextualization (one reference for
        every token, so early tokens are not judged on a tiny sample). In [0, 1]: low values mark answer
        tokens whose contextualization comes from the answer, not the context.
    lookback : Tensor, shape [n_answer_tokens]
        Per answer token, the lookback ratio (Chuang et al. 2024) averaged over the selected heads: the mean
        attention on a context token over that plus the mean attention on an answer token the row sees. In
        [0, 1]; [`context_reliance`][rcattr.record.signals.RCSignals.context_reliance] is its mean.
    unit_context_reliance : Tensor, shape [n_outputs]
        Each output unit's mean `lookback` over its tokens.
    token_logprob : Tensor, shape [n_answer_tokens]
        Each answer token's log-probability under the model, given the prompt and the answer before it.
    token_peak : Tensor, shape [n_answer_tokens]
        Per answer token, on the support heads (`support_heads`, not the selected ones), the mean
        P(max X > Y): the share of the answer's self logits Y(g, g) below the token's highest logit to the
        context. A token copied from the context has heads that find its match there; a token the context lacks
        does not.
    token_support : Tensor, shape [n_answer_tokens]
        Per answer token, `sigmoid(token_logprob + logit(token_peak))` (each head's peak smoothed,
        [`rcattr.grounding.support.support_log_odds`][rcattr.grounding.support.support_log_odds]): the evidence that the context holds the token, in [0, 1].
    head_selection : HeadSelection
        Every head's score and the selected heads.
    notes : tuple of str
        What the attributor warned of when it made the result: few or no heads that see the whole context from
        the answer, or no selected head that sees any of it (every span scores 0). A caller that attributes many
        inputs at once (a service) reads each one's here rather than from the warnings of the whole batch.
    support_heads : Tensor of long, shape [k, 2], optional
        The `(layer, head)` pairs `token_peak` and `token_support` are read on: the 20 best heads
        by this example's head scores ([`rcattr.grounding.support.SUPPORT_HEADS`][rcattr.grounding.support.SUPPORT_HEADS]; all heads of a smaller model),
        whatever rule chose the voting heads (`heads=`), since the peak is a max over the context, noisy on
        few heads (measured in docs/benchmarks/citations.md). Groundedness and lookback are read on the selected heads.
    lexical_share : float, optional
        With lexical fusion (`RCAttributor()`'s default), how much of the unit votes BM25 filled where the selected
        heads disagreed (mean over units of 1 - the heads' agreement; `rcattr.attribution.fusion`); None without
        (`lexical=False`).
    probe : ClaimProbe, optional
        The support probe whose verdicts the citations give (`rcattr.grounding.verdict`); None: the
        unsupervised status.
    head_lookback, head_peak : Tensor, shape [L, H, n_answer_tokens], optional
        Every head's lookback ratio and P(max X > Y) at each answer token, from the same pass: what the probe
        reads (kept only with a probe).
    """

    groundedness: torch.Tensor
    lookback: torch.Tensor
    unit_context_reliance: torch.Tensor
    token_logprob: torch.Tensor
    token_peak: torch.Tensor
    token_support: torch.Tensor
    head_selection: HeadSelection
    notes: tuple[str, ...] = ()
    support_heads: torch.Tensor | None = None
    lexical_share: float | None = None
    probe: ClaimProbe | None = None
    head_lookback: torch.Tensor | None = None
    head_peak: torch.Tensor | None = None

    @property
    def context_reliance(self) -> float:
        """How much the whole answer relies on the context: the mean `lookback` of its tokens, in [0, 1]."""
        return float(self.lookback.double().mean())

    @classmethod
    def of(cls, result: _Attributed) -> RCSignals:
        """The RC signals of `result`; ValueError naming its method when it has none (a baseline's)."""
        if result.rc is None:
            raise ValueError(
                f"this needs an RC result (RCAttributor's); the result of {result.span_scorer!r} has no RC signals"
            )
        return result.rc
