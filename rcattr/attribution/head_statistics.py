"""Every head's per-token statistics from one forward pass: the support probe's features
([`rcattr.grounding.probe`][rcattr.grounding.probe]) and the groundedness benchmarks' baselines.

Reducers on [`LogitCapture`][rcattr.runtime.capture.LogitCapture] (sdpa is kept; attention comes from the exact logits)
and [`token_signals`][rcattr.attribution.head_statistics.token_signals], which gives every answer token its log-probability, entropy, lookback ratio
(Chuang et al. 2024, unsupervised) and peak superiority, over all heads and over given heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from rcattr.attribution.base import Example
from rcattr.attribution.spans import lookback_rows
from rcattr.grounding.support import support_log_odds
from rcattr.heads.scores import peak_rows
from rcattr.runtime.capture import CaptureStep, LogitCapture


class LookbackReducer:
    """Per layer, each head's lookback ratio `[H, A]` for the answer rows of one pass
    (`rcattr.attribution.spans.lookback_rows`)."""

    def __init__(self, context_keys: torch.Tensor, answer_start: int) -> None:
        self.context_keys = context_keys
        self.answer_start = answer_start
        self.ratios: dict[int, torch.Tensor] = {}

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        self.ratios[step.layer_idx] = lookback_rows(
            logits[0], step.visible[0], step.scaling, step.softcap, self.context_keys, self.answer_start
        )


class PeakSuperiorityReducer:
    """Per layer, each head's `[H, A]` P(max X > Y) per answer row
    (`rcattr.heads.scores.peak_rows`); `sizes` keeps each layer's `|Y|`."""

    def __init__(self, context_keys: torch.Tensor, answer_start: int) -> None:
        self.context_keys = context_keys
        self.answer_start = answer_start
        self.scores: dict[int, torch.Tensor] = {}
        self.sizes: dict[int, int] = {}

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        layer = step.layer_idx
        self.scores[layer], self.sizes[layer] = peak_rows(
            logits[0], step.visible[0], self.context_keys, self.answer_start
        )


def _stack(table: dict[int, torch.Tensor]) -> torch.Tensor:
    return torch.stack([table[layer] for layer in sorted(table)])  # [L, H, A]


@dataclass(frozen=True)
class TokenStatistics:
    """Every head's per-answer-token statistics of one pass, before any head is chosen.

    Attributes
    ----------
    peak : Tensor of float64, shape [L, H, A]
        P(max X > Y) at each answer row ([`PeakSuperiorityReducer`][rcattr.attribution.head_statistics.PeakSuperiorityReducer]).
    n_self : Tensor of long, shape [L]
        Each layer's `|Y|`.
    lookback : Tensor, shape [L, H, A]
        The lookback ratio at each answer row.
    logprob, entropy : Tensor, shape [A]
        Each answer token's log-probability and the entropy of the distribution it was drawn from.
    """

    peak: torch.Tensor
    n_self: torch.Tensor
    lookback: torch.Tensor
    logprob: torch.Tensor
    entropy: torch.Tensor

    def support_log_odds(self, heads: torch.Tensor) -> torch.Tensor:
        """`[A]` [`rcattr.grounding.support.support_log_odds`][rcattr.grounding.support.support_log_odds] on the `[k, 2]` heads."""
        layers, index = heads.unbind(1)
        return support_log_odds(self.logprob, self.peak[layers, index], self.n_self[layers])


def token_statistics(model: PreTrainedModel, example: Example) -> TokenStatistics:
    """Every head's [`TokenStatistics`][rcattr.attribution.head_statistics.TokenStatistics] from one forward over `example.ids`."""
    start, ids = example.answer_start, example.ids
    context_keys = torch.tensor(sorted({t for r in example.context_ranges for t in r}), device=ids.device)
    lookback, peak = LookbackReducer(context_keys, start), PeakSuperiorityReducer(context_keys, start)

    def reducer(logits: torch.Tensor, step: CaptureStep) -> None:
        lookback(logits, step)
        peak(logits, step)

    n_answer = ids.shape[1] - start
    with torch.no_grad(), LogitCapture(model, reducer, query_positions=slice(start, None)):
        logits = model(ids, use_cache=False, logits_to_keep=n_answer + 1).logits[0, :-1].float()
    log_probs = torch.log_softmax(logits, -1)  # [A, V]: row t predicts answer token t
    return TokenStatistics(
        peak=_stack(peak.scores),
        n_self=torch.tensor([peak.sizes[layer] for layer in sorted(peak.sizes)]),
        lookback=_stack(lookback.ratios),
        logprob=log_probs.gather(-1, ids[0, start:, None])[:, 0],
        entropy=-(log_probs.exp() * log_probs).sum(-1),
    )


def token_signals(
    model: PreTrainedModel, example: Example, rc_heads: torch.Tensor, peak_heads: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Per answer token `[A]`, from one forward over `example.ids`: its log-probability and the entropy of
    the distribution it was drawn from, and at its own row the lookback ratio and the peak superiority,
    averaged over all heads, over the `[k, 2]` RC-selected ones and over the `[k', 2]` `peak_heads`
    ([`rcattr.grounding.support.support_heads`][rcattr.grounding.support.support_heads]); `support_log_odds` (the result's token support, on
    `peak_heads`) and `support_log_odds_selected` (on the RC-selected heads) add the log-probability and
    the log-odds of the heads' mean smoothed peak ([`rcattr.grounding.support.support_log_odds`][rcattr.grounding.support.support_log_odds])."""
    statistics = token_statistics(model, example)
    peaks, ratios = statistics.peak, statistics.lookback
    layers, heads = rc_heads.unbind(1)
    return {
        "peak": peaks.mean((0, 1)),
        "peak_selected": peaks[layers, heads].mean(0),
        "peak_support": peaks[tuple(peak_heads.T)].mean(0),
        "support_log_odds": statistics.support_log_odds(peak_heads),
        "support_log_odds_selected": statistics.support_log_odds(rc_heads),
        "logprob": statistics.logprob,
        "entropy": statistics.entropy,
        "lookback": ratios.mean((0, 1)),
        "lookback_rc": ratios[layers, heads].mean(0),
    }
