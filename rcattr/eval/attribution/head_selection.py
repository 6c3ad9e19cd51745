"""Head-selection rules measured across architectures (issue 35), as recipes of the ``heads`` method.

The default picks the *outlier* heads of each example: those scoring more than two standard deviations
above the mean over all heads. That follows the shape of one model's score distribution (about 19 of
SmolLM2's 270 heads, 3 to 4 of Gemma-3-270m's 72, and a single head of a held-out 24 x 14 model), and a
single head's vote is fragile. Each rule here is one lever: a function of the ``[L, H]`` head scores of
one example that returns the heads and their weights. :func:`selection_ablation` lists them as recipes
beside the default, so one ``heads`` pass per record scores every rule on the same logits
(``python -m rcattr.eval.attribution --methods heads,bm25``). The rules are experimental: the one that
wins on every model measured becomes rcattr's default, the others stay here as results.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rcattr.head_selection import HeadSelection
from rcattr.heads import OUTLIER_SIGMAS, HeadScore, outlier_count, top_heads
from rcattr.selectors import HeadSelector

Selector = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""``[L, H]`` head scores -> ``([k, 2]`` (layer, head) pairs best first, ``[k]`` weights)."""


def _pairs(flat_index: torch.Tensor, n_heads: int) -> torch.Tensor:
    return torch.stack([flat_index // n_heads, flat_index % n_heads], dim=1)


def _top(scores: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``count`` best heads (1 to all of them), equal weights."""
    heads = top_heads(scores, max(1, min(count, scores.numel())))
    return heads, torch.ones(len(heads), dtype=scores.dtype)


def _z(scores: torch.Tensor) -> torch.Tensor:
    """Each head's score in standard deviations above the mean of all heads (``[N]``)."""
    flat = scores.flatten().double()
    return (flat - flat.mean()) / flat.std(correction=0).clamp_min(1e-12)


def outliers(sigmas: float = OUTLIER_SIGMAS, floor: float = 0.0) -> Selector:
    """Heads above ``sigmas`` standard deviations, and at least ``ceil(floor x heads)`` of them (at least 1)."""

    def select(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _top(scores, max(outlier_count(scores, sigmas), math.ceil(floor * scores.numel())))

    return select


def top_share(share: float) -> Selector:
    """A fixed share of the model's heads."""
    return lambda scores: _top(scores, math.ceil(share * scores.numel()))


def knee(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The heads before the knee of the descending scores: the point farthest below the chord from the
    best to the worst head (Kneedle on the normalised curve)."""
    ordered = scores.flatten().double().sort(descending=True).values
    n = ordered.numel()
    x = torch.arange(n, dtype=torch.float64) / max(n - 1, 1)
    y = (ordered - ordered[-1]) / (ordered[0] - ordered[-1]).clamp_min(1e-12)
    return _top(scores, max(int((1 - x - y).argmax()), 1))  # the knee is the first head of the flat part


def z_weighted(offset: float) -> Selector:
    """Every head above ``offset`` standard deviations, weighted by its distance above it (a soft cut)."""

    def select(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        weights = (_z(scores) - offset).clamp_min(0)
        if not bool((weights > 0).any()):
            return _top(scores, 1)
        order = weights.argsort(descending=True)[: int((weights > 0).sum())]
        return _pairs(order, scores.shape[1]), weights[order].to(scores.dtype)

    return select


def layer_outliers(sigmas: float = OUTLIER_SIGMAS) -> Selector:
    """Outliers of the scores centred per layer: a layer whose heads all score high (a model-wide depth
    trend) does not crowd the others out."""

    def select(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centred = scores.double() - scores.double().mean(1, keepdim=True)
        return _top(centred, outlier_count(centred, sigmas))

    return select


def layer_standardised(sigmas: float = OUTLIER_SIGMAS) -> Selector:
    """Heads more than ``sigmas`` standard deviations above their own layer's mean, in their layer's standard
    deviations: each layer's heads are compared with each other only (with fewer than ``sigmas**2 + 1``
    heads a layer cannot have such a head; the best head of all is then taken)."""

    def select(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        table = scores.double()
        spread = table.std(1, correction=0, keepdim=True).clamp_min(1e-12)
        standard = (table - table.mean(1, keepdim=True)) / spread
        return _top(standard, int((standard > sigmas).sum()))

    return select


def robust_outliers(sigmas: float = 3.0) -> Selector:
    """Heads above the median of all heads by ``sigmas`` robust standard deviations (1.4826 x the median
    absolute deviation), which one far outlier cannot inflate as it inflates the standard deviation."""

    def select(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = scores.flatten().double()
        median = flat.median()
        spread = 1.4826 * (flat - median).abs().median()
        return _top(scores, int((flat > median + sigmas * spread).sum()))

    return select


def above_half(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Heads whose P(X > Y) exceeds 1/2, the data-free point where a head's answer rows favour the context
    over the answer itself (superiority scores only)."""
    return _top(scores, int((scores > 0.5).sum()))


def upper_mixture(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Heads more likely drawn from the upper of two Gaussians fitted to this example's scores (scikit-learn's
    ``GaussianMixture``): the number of heads is where the two populations cross."""
    from sklearn.mixture import GaussianMixture

    flat = scores.flatten().double().numpy()[:, None]
    if len(flat) < 2 or float(flat.std()) == 0:
        return _top(scores, 1)
    mixture = GaussianMixture(2, random_state=0).fit(flat)
    upper = int(mixture.means_.argmax())
    return _top(scores, int((mixture.predict_proba(flat)[:, upper] > 0.5).sum()))


RULES: dict[str, Selector] = {
    "outliers, at least 5% of heads": outliers(floor=0.05),
    "outliers, at least 10% of heads": outliers(floor=0.10),
    "outliers above 1.5 sd": outliers(1.5),
    "top 7% of heads": top_share(0.07),
    "knee of the sorted scores": knee,
    "z-weighted vote above the mean": z_weighted(0.0),
    "z-weighted vote above 1 sd": z_weighted(1.0),
    "outliers of layer-centred scores": layer_outliers(),
    "outliers of layer-standardised scores": layer_standardised(),
    "robust outliers (median + 3 MAD sd)": robust_outliers(),
    "heads with P(X > Y) above 1/2": above_half,
    "upper component of a 2-Gaussian mixture": upper_mixture,
}


@dataclass(frozen=True)
class RuleHeads(HeadSelector):
    """A :class:`~rcattr.selectors.HeadSelector` of this module's selection rules (``rule``), for
    :class:`~rcattr.RCAttributor`'s ``heads``.

    Parameters
    ----------
    rule : callable
        ``[L, H]`` head scores -> (heads, weights), e.g. a value of :data:`RULES`.
    score : {"superiority", "rc_std", "rc"}, default "superiority"
    """

    rule: Selector
    score: HeadScore = "superiority"

    def __post_init__(self) -> None:
        self._check_score()

    def select(self, scores: torch.Tensor, reach: torch.Tensor | None = None) -> HeadSelection:
        """The rule's heads over all of them: the rules of issue 35 do not know windows (``reach`` is ignored)."""
        heads, weights = self.rule(scores.cpu())
        return HeadSelection(scores.cpu(), heads, self.score, weights)
