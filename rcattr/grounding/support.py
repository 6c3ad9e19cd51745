"""Token support: does the context hold an answer token? (docs/design.md §2)

Two pieces of evidence from the one pass say that answer token t came from the context:

- **a head finds it there**: on each of the [`SUPPORT_HEADS`][rcattr.grounding.support.SUPPORT_HEADS] best heads ([`support_heads`][rcattr.grounding.support.support_heads]), P(max X > Y) at t's row, the share of the answer's self logits
  Y(g, g) below the row's highest logit to the context ([`rcattr.heads.scores.peak_superiority`][rcattr.heads.scores.peak_superiority]). A copied
  token has heads whose best context logit stands out (the heads that match it to its earlier
  occurrence); a token the context lacks does not;
- **the model expects it**: its log-probability given the prompt and the answer before it (but for the
  answer's first token, whose log-probability says more about the prompt's last words than the context).

[`support_log_odds`][rcattr.grounding.support.support_log_odds] adds the log-odds of the first (averaged over heads, each smoothed as
`(count + 1/2) / (|Y| + 1)` so that it is never 0 or 1) to the second, with no fitted weight. It is in
log-odds units, so one cut-off means the same on every model: [`SUPPORT_THRESHOLD`][rcattr.grounding.support.SUPPORT_THRESHOLD].
"""

from __future__ import annotations

import math

import torch

from rcattr.heads.scores import top_heads

SUPPORT_HEADS = 20
"""The heads token support is read on: those with the highest head score (the paper's k). The peak is a max
over every context token of a row, noisy on one head, so it is averaged over more heads than the attribution's
outlier heads (3 or 4 of Gemma-3-270m's 72). Measured against the outliers, all heads and 30 heads in
docs/benchmarks/citations.md."""

SUPPORT_THRESHOLD = 0.25
"""A token is flagged when its token support `sigmoid(log p + logit peak)` is below this: its support log-odds
below log(1/3), odds of 1 to 3 against. Measured, not fitted per model (docs/benchmarks/citations.md): on the
unsupported-tokens benchmark it flags at most 15% of the untouched tokens and catches at least 66% of the
edited ones on SmolLM2-135M and Gemma-3-270m, QuoteSum and Veri-Gran."""
SUPPORT_LOG_ODDS_THRESHOLD = math.log(SUPPORT_THRESHOLD / (1 - SUPPORT_THRESHOLD))


def support_heads(head_scores: torch.Tensor) -> torch.Tensor:
    """The `[k, 2]` (layer, head) pairs whose peaks make token support: the [`SUPPORT_HEADS`][rcattr.grounding.support.SUPPORT_HEADS] best of
    the `[L, H]` head scores (all heads of a smaller model)."""
    return top_heads(head_scores, min(SUPPORT_HEADS, head_scores.numel()))


def smoothed_peak(peak: torch.Tensor, n_self: torch.Tensor) -> torch.Tensor:
    """`[k, A]` P(max X > Y) of `k` heads as `(count + 1/2) / (|Y| + 1)`, never 0 or 1; `n_self
    [k]` is each head's `|Y|`."""
    sizes = n_self.to(device=peak.device, dtype=torch.float64)[:, None]
    return (peak.double() * sizes + 0.5) / (sizes + 1)


def support_log_odds(log_prob: torch.Tensor, peak: torch.Tensor, n_self: torch.Tensor) -> torch.Tensor:
    """`[A]` support log-odds of each answer token: its `[A]` log-probability plus the log-odds of the
    `k` heads' mean smoothed `[k, A]` P(max X > Y) ([`smoothed_peak`][rcattr.grounding.support.smoothed_peak]; `n_self [k]`: each
    head's `|Y|`). Float64.

    The first answer token's log-probability is left out (taken as 0): it measures how the prompt ends and
    how the answer opens more than the context (a base model's plain prompt ends with `Answer:` and
    expects a space before the answer's first word, which the answer, tokenized on its own, lacks).
    """
    log_prob = log_prob.double().to(peak.device).clone()
    log_prob[:1] = 0.0
    return log_prob + torch.logit(smoothed_peak(peak, n_self).mean(0))


def support_text(value: float, digits: int = 2) -> str:
    """`value` written with `digits` decimals, rounded down: a token flagged below the cut-off never
    reads as the cut-off itself (0.2499 is `0.24`, not `0.25`)."""
    scale = 10**digits
    return f"{math.floor(value * scale + 1e-9) / scale:.{digits}f}"


SUPPORT_MEANING = (
    "the evidence that the context holds the token: a head finding a matching context token (its best "
    "context logit against the answer's own) and the model expecting the token (its log-probability), combined"
)
