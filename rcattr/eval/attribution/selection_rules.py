"""Head-selection rules measured across architectures, as recipes of the `heads` method.

The default picks the *outlier* heads of each example: those scoring more than two standard deviations
above the mean over all heads. That follows the shape of one model's score distribution (about 19 of
SmolLM2's 270 heads, 3 to 4 of Gemma-3-270m's 72, and a single head of a held-out 24 x 14 model), and a
single head's vote is fragile. Each rule here is one lever: a [`HeadSelector`][rcattr.heads.selectors.HeadSelector] (a
[`SelectionRule`][rcattr.eval.attribution.selection_rules.SelectionRule]) whose fields are its parameters. [`selection_ablation`][rcattr.eval.attribution.recipes.selection_ablation]
lists the rules of [`RULES`][rcattr.eval.attribution.selection_rules.RULES] as recipes beside the default, so one `heads` pass per record scores every
rule on the same logits (`python -m rcattr.eval.attribution --methods heads,bm25`). The rules are
experimental: the one that wins on every model measured becomes rcattr's default, the others stay here as
results. [`BottomHeads`][rcattr.eval.attribution.selection_rules.BottomHeads], the paper's ablation (the lowest-scoring heads), is one too.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass, replace

import torch

from rcattr.heads.scores import OUTLIER_SIGMAS, HeadScore, outlier_heads, seeing_heads, top_heads
from rcattr.heads.selection import HeadSelection
from rcattr.heads.selectors import HeadSelector, TopHeads

__all__ = [
    "RULES",
    "AboveHalfHeads",
    "BottomHeads",
    "KneeHeads",
    "LayerCentredHeads",
    "LayerStandardisedHeads",
    "MixtureHeads",
    "OutlierFloorHeads",
    "RobustOutlierHeads",
    "SelectionRule",
    "ShareHeads",
    "ZWeightedHeads",
]


class SelectionRule(HeadSelector):
    """A head-selection rule: it chooses among all the heads of a `[L, H]` score table (it does not know
    windows: `reach` is ignored) and may weigh them. A subclass is a frozen dataclass that implements
    [`choose`][rcattr.eval.attribution.selection_rules.SelectionRule.choose]."""

    def __post_init__(self) -> None:
        self._check_score()

    @abstractmethod
    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`[L, H]` head scores -> `[k, 2]` (layer, head) pairs best first and their `[k]` weights."""

    def select(self, scores: torch.Tensor, reach: torch.Tensor | None = None) -> HeadSelection:
        """The rule's heads over all of them (`reach` is ignored)."""
        heads, weights = self.choose(scores.cpu())
        return HeadSelection(scores.cpu(), heads, self.score, weights)


def _top(scores: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `count` best heads (1 to all of them), equal weights."""
    return _equal(top_heads(scores, max(1, min(count, scores.numel()))), scores)


def _equal(heads: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`heads` with equal weights, in the scores' dtype."""
    return heads, torch.ones(len(heads), dtype=scores.dtype)


@dataclass(frozen=True)
class OutlierFloorHeads(SelectionRule):
    """The outlier heads ([`outlier_heads`][rcattr.heads.scores.outlier_heads], as [`OutlierHeads`][rcattr.heads.selectors.OutlierHeads]):
    those above `sigmas` standard deviations, and at least `ceil(floor x heads)` of them (at least 1)."""

    sigmas: float = OUTLIER_SIGMAS
    floor: float = 0.0
    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        at_least = max(1, math.ceil(self.floor * scores.numel()))
        return _equal(outlier_heads(scores, self.sigmas, at_least=at_least), scores)


@dataclass(frozen=True)
class ShareHeads(SelectionRule):
    """A fixed share of the model's heads (rounded up)."""

    share: float
    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _top(scores, math.ceil(self.share * scores.numel()))


@dataclass(frozen=True)
class KneeHeads(SelectionRule):
    """The heads before the knee of the descending scores: the point farthest below the chord from the
    best to the worst head (Kneedle on the normalised curve)."""

    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ordered = scores.flatten().double().sort(descending=True).values
        n = ordered.numel()
        x = torch.arange(n, dtype=torch.float64) / max(n - 1, 1)
        y = (ordered - ordered[-1]) / (ordered[0] - ordered[-1]).clamp_min(1e-12)
        return _top(scores, max(int((1 - x - y).argmax()), 1))  # the knee is the first head of the flat part


@dataclass(frozen=True)
class ZWeightedHeads(SelectionRule):
    """Every head above `offset` standard deviations of the mean of all heads, weighted by its distance
    above it (a soft cut)."""

    offset: float
    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = scores.flatten().double()
        z = (flat - flat.mean()) / flat.std(correction=0).clamp_min(1e-12)
        weights = (z - self.offset).clamp_min(0)
        if not bool((weights > 0).any()):
            return _top(scores, 1)
        order = weights.argsort(descending=True)[: int((weights > 0).sum())]
        heads = torch.stack([order // scores.shape[1], order % scores.shape[1]], dim=1)
        return heads, weights[order].to(scores.dtype)


@dataclass(frozen=True)
class LayerCentredHeads(SelectionRule):
    """The outliers ([`outlier_heads`][rcattr.heads.scores.outlier_heads]) of the scores centred per layer: a layer whose
    heads all score high (a model-wide depth trend) does not crowd the others out."""

    sigmas: float = OUTLIER_SIGMAS
    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centred = scores.double() - scores.double().mean(1, keepdim=True)
        return _equal(outlier_heads(centred, self.sigmas), centred)


@dataclass(frozen=True)
class LayerStandardisedHeads(SelectionRule):
    """Heads more than `sigmas` standard deviations above their own layer's mean, in their layer's standard
    deviations: each layer's heads are compared with each other only (with fewer than `sigmas**2 + 1`
    heads a layer cannot have such a head; the best head of all is then taken)."""

    sigmas: float = OUTLIER_SIGMAS
    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        table = scores.double()
        spread = table.std(1, correction=0, keepdim=True).clamp_min(1e-12)
        standard = (table - table.mean(1, keepdim=True)) / spread
        return _top(standard, int((standard > self.sigmas).sum()))


@dataclass(frozen=True)
class RobustOutlierHeads(SelectionRule):
    """Heads above the median of all heads by `sigmas` robust standard deviations (1.4826 x the median
    absolute deviation), which one far outlier cannot inflate as it inflates the standard deviation."""

    sigmas: float = 3.0
    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = scores.flatten().double()
        median = flat.median()
        spread = 1.4826 * (flat - median).abs().median()
        return _top(scores, int((flat > median + self.sigmas * spread).sum()))


@dataclass(frozen=True)
class AboveHalfHeads(SelectionRule):
    """Heads whose P(X > Y) exceeds 1/2, the data-free point where a head's answer rows favour the context
    over the answer itself (superiority scores only)."""

    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _top(scores, int((scores > 0.5).sum()))


@dataclass(frozen=True)
class MixtureHeads(SelectionRule):
    """Heads more likely drawn from the upper of two Gaussians fitted to this example's scores (scikit-learn's
    `GaussianMixture`): the number of heads is where the two populations cross."""

    score: HeadScore = "superiority"

    def choose(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from sklearn.mixture import GaussianMixture

        flat = scores.flatten().double().numpy()[:, None]
        if len(flat) < 2 or float(flat.std()) == 0:
            return _top(scores, 1)
        mixture = GaussianMixture(2, random_state=0).fit(flat)
        upper = int(mixture.means_.argmax())
        return _top(scores, int((mixture.predict_proba(flat)[:, upper] > 0.5).sum()))


RULES: dict[str, SelectionRule] = {
    "outliers, at least 5% of heads": OutlierFloorHeads(floor=0.05),
    "outliers, at least 10% of heads": OutlierFloorHeads(floor=0.10),
    "outliers above 1.5 sd": OutlierFloorHeads(1.5),
    "top 7% of heads": ShareHeads(0.07),
    "knee of the sorted scores": KneeHeads(),
    "z-weighted vote above the mean": ZWeightedHeads(0.0),
    "z-weighted vote above 1 sd": ZWeightedHeads(1.0),
    "outliers of layer-centred scores": LayerCentredHeads(),
    "outliers of layer-standardised scores": LayerStandardisedHeads(),
    "robust outliers (median + 3 MAD sd)": RobustOutlierHeads(),
    "heads with P(X > Y) above 1/2": AboveHalfHeads(),
    "upper component of a 2-Gaussian mixture": MixtureHeads(),
}
"""The rules of the `heads` table, by their row labels (the names the committed records use)."""


@dataclass(frozen=True)
class BottomHeads(HeadSelector):
    """The lowest-scoring heads, worst first: the paper's ablation (a measured loser, docs/benchmarks/attribution.md).
    Like [`TopHeads`][rcattr.heads.selectors.TopHeads], it chooses among the heads that see the whole context.

    Parameters
    ----------
    k : int, float or HeadSelector, default 20
        A number of heads, a fraction of all heads (a float in `(0, 1]`), or a selector: as many heads as
        it selects from this example's scores (`OutlierHeads()`: as many as this example's outliers, the
        ablation's "default · bottom heads"). A count above the model's heads is capped to all of them.
    score : {"superiority", "rc_std", "rc"}, default "superiority"
    """

    k: int | float | HeadSelector = 20
    score: HeadScore = "superiority"

    def __post_init__(self) -> None:
        self._check_score()
        if isinstance(self.k, (str, bool)):
            raise ValueError(f"k={self.k!r}: give a number of heads, a fraction of them, or a head selector")

    def for_model(self, n_layers: int, n_heads: int) -> BottomHeads:
        if isinstance(self.k, HeadSelector):
            return replace(self, k=self.k.for_model(n_layers, n_heads))
        capped = TopHeads(self.k, self.score).for_model(n_layers, n_heads)  # checks k, caps it with a warning
        return self if capped.k == self.k else replace(self, k=capped.k)

    def select(self, scores: torch.Tensor, reach: torch.Tensor | None = None) -> HeadSelection:
        among = None if reach is None else seeing_heads(reach, scores.shape[1])
        count = len(self.k.select(scores, reach).heads) if isinstance(self.k, HeadSelector) else self.k
        heads = top_heads(scores, count, bottom=True, among=among)
        return HeadSelection(scores.cpu(), heads.cpu(), self.score, reach=reach)
