"""The support probe: is a claim attributable to its context? Lookback Lens's recipe (Chuang et al. 2024: a
regularised logistic regression on per-head lookback ratios) on rcattr's own per-head statistics, stacked with
what the citations already know.

A claim's `ClaimFeatures` are, per head, the mean over its tokens of the lookback ratio and of the peak
superiority P(max X > Y) (`rcattr.attribution.head_statistics`), and beside them its token support, mean
log-probability, lexical coverage (the share of its content words the documents hold) and whether a number,
date or name of it is in no sentence of the documents. The probe has two levels: a logistic regression on
the heads' features gives a log-odds, and a small logistic regression weighs that log-odds against the five
others (`COMBINED`), so that coverage and the held claims keep their weight however many heads the model has.
The heads' level alone fell below plain coverage on AttributionBench sources it was not fitted on.

`SupportProbe.fit` fits both levels on a user's labelled claims and chooses the operating points
(`OPERATING_POINTS`) on its out-of-fold probabilities; `SupportProbe.save` writes it as a small JSON file and
`SupportProbe.load` reads it back. A probe knows the model it was fitted on (name and head count):
`SupportProbe.check` refuses another model's features, and `SupportProbe.shipped` gives the probe fitted on
AttributionBench dev for SmolLM2-135M-Instruct, Gemma-3-270m and Qwen2.5-Coder-0.5B-Instruct only to that model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from scipy.special import expit, logit

from rcattr.grounding.claims import Claim, citation_markers
from rcattr.text.segmentation import TextSpan, tokens_within

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# the inverse of the heads' L2 penalty, chosen by question-grouped cross-validation on SmolLM2's AttributionBench
# dev features among 0.001 .. 0.1 (benchmarks/support_probe.py)
DEFAULT_C = 0.01
# the second level has six features and a thousand claims: hardly penalised
COMBINED_C = 1.0
FOLDS = 5
FORMAT = 2
# each operating point: the largest share of attributable claims it may mark, on the fit's out-of-fold
# probabilities; "balanced" marks at most one in five
OPERATING_POINTS = {"lenient": 0.10, "balanced": 0.20, "strict": 0.35}
DEFAULT_OPERATING_POINT = "balanced"
COMBINED = ("heads", "coverage", "support", "logprob", "unheld_number", "unheld_name")
SHIPPED = {
    "SmolLM2-135M-Instruct": "smollm2-135m-instruct.json",
    "gemma-3-270m": "gemma-3-270m.json",
    "qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b-instruct.json",
}
_EPSILON = 1e-6


def claim_tokens(tokens: Sequence[TextSpan], claim: str, start: int = 0, end: int | None = None) -> list[int]:
    """The indices of the `tokens` of `claim[start:end]` (offsets into `claim`, the whole of it by
    default) that say something: not inside a citation marker (`[5]`), not blank (all of them when none is
    left)."""
    end = len(claim) if end is None else end
    markers = {
        t for a, b in citation_markers(claim[start:end]) for t in tokens_within(tokens, a + start, b + start)
    }
    kept = [
        i for i, token in enumerate(tokens) if token.start < end and start < token.end and i not in markers
    ]
    return [i for i in kept if tokens[i].text.strip()] or kept


def head_means(
    lookback: torch.Tensor, peak: torch.Tensor, tokens: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the `[L, H]` mean lookback ratio and mean peak superiority over the answer `tokens` of
    the `[L, H, A]` tables."""
    index = torch.tensor(list(tokens))
    return (
        lookback[..., index.to(lookback.device)].double().mean(-1).cpu().numpy(),
        peak[..., index.to(peak.device)].double().mean(-1).cpu().numpy(),
    )


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class ClaimFeatures:
    """What the probe reads of one claim.

    Attributes
    ----------
    lookback, peak : ndarray, shape [L, H]
        Per head, the mean over the claim's tokens of the lookback ratio and of the peak superiority.
    support : float
        The claim's token support (its weakest sentence's, `Citation.support`), in [0, 1].
    logprob : float
        The mean log-probability of the claim's tokens but the first.
    coverage : float
        The share of the claim's content words the documents hold (`rcattr.grounding.claims.content_coverage`).
    unheld_number, unheld_name : bool
        Whether the claim has a number or date (a name) that no sentence of the documents or the question holds.
    held_support : float
        The support of the claim's held part (`Citation.held_support`); with the coverage, it caps the verdict
        (`vetoed`).
    """

    lookback: np.ndarray
    peak: np.ndarray
    support: float
    logprob: float
    coverage: float = 1.0
    unheld_number: bool = False
    unheld_name: bool = False
    held_support: float = 1.0

    @classmethod
    def of(
        cls,
        lookback: torch.Tensor,
        peak: torch.Tensor,
        logprob: torch.Tensor,
        tokens: Sequence[int],
        support: float,
        coverage: float = 1.0,
        claims: Sequence[Claim] = (),
        held_support: float = 1.0,
    ) -> ClaimFeatures:
        """The features of the claim made of the answer `tokens` (indices) from its pass's `[L, H, A]`
        lookback ratios and peaks and `[A]` log-probabilities, its `support`, `coverage`, `claims` and
        `held_support`."""
        tokens = list(tokens)
        lookbacks, peaks = head_means(lookback, peak, tokens)
        mean_logprob = logprob[tokens[1:] or tokens].double().mean()
        return cls(
            lookbacks,
            peaks,
            float(support),
            float(mean_logprob),
            float(coverage),
            any(not c.held and c.kind != "name" for c in claims),
            any(not c.held and c.kind == "name" for c in claims),
            float(held_support),
        )

    def heads_vector(self) -> np.ndarray:
        """`[2 L H]`: the lookback ratios and the peaks."""
        return np.concatenate([self.lookback.ravel(), self.peak.ravel()])

    def combined_vector(self, heads_log_odds: float) -> np.ndarray:
        """`[6]`: the heads' log-odds and the others of `COMBINED`, in its order."""
        return np.array(
            [
                heads_log_odds,
                self.coverage,
                float(logit(np.clip(self.support, _EPSILON, 1 - _EPSILON))),
                self.logprob,
                float(self.unheld_number),
                float(self.unheld_name),
            ]
        )


def model_identity(model: PreTrainedModel) -> tuple[str, int, int]:
    """The `(name, layers, heads per layer)` a probe is checked against; the name is the last part of the
    model's `name_or_path`."""
    config = model.config.get_text_config()
    return (
        Path(str(model.config.name_or_path)).name,
        int(config.num_hidden_layers),
        int(config.num_attention_heads),
    )


def heads_model(x: np.ndarray, labels: np.ndarray, c: float) -> Any:
    """The heads' level: a standardised logistic regression with L2 penalty `1 / c`, fitted on
    the `[n, 2 L H]` features `x`."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000)).fit(x, labels)


def operating_cut(probabilities: np.ndarray, labels: np.ndarray, share: float) -> float:
    """The largest cut that marks (probability below it) at most `share` of the attributable claims
    (`labels` 1) of `probabilities`."""
    attributable = np.sort(probabilities[np.asarray(labels) == 1])
    allowed = int(np.floor(share * len(attributable) + 1e-9))
    return float(attributable[min(allowed, len(attributable) - 1)])


def vetoed(probabilities: np.ndarray, claims: Sequence[ClaimFeatures]) -> np.ndarray:
    """`[n]` the verdict's score (`rcattr.grounding.verdict`): the probability, never above the larger of the
    claim's held support and its lexical coverage (the heads do not pass a claim that neither its tokens' support
    nor its words find in the documents), 0 for a claim with a number or date the documents lack."""
    unheld = np.array([claim.unheld_number for claim in claims], dtype=bool)
    evidence = np.array([max(claim.held_support, claim.coverage) for claim in claims], dtype=float)
    return np.where(unheld, 0.0, np.minimum(probabilities, evidence))


def grouped_folds(labels: np.ndarray, groups: Sequence[str], seed: int, n_folds: int = FOLDS) -> list[Any]:
    """Up to `n_folds` stratified folds, each group's (question's) claims in one."""
    from sklearn.model_selection import StratifiedGroupKFold

    n_splits = min(n_folds, len(set(groups)), int(np.bincount(labels).min()))
    if n_splits < 2:
        raise ValueError("too few questions or claims of a label to fold: give more labelled claims")
    splitter = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(labels)), labels, groups))


@dataclass(frozen=True)
class SupportProbe:
    """A fitted probe of two levels. The heads' level: `mean`, `scale` and `coefficients` are
    `[2 L H]`, its log-odds `z = coefficients · (x - mean) / scale + intercept`. The combined level over
    `COMBINED` (`z` first): the probability of a claim being attributable is
    `sigmoid(combined_coefficients · (v - combined_mean) / combined_scale + combined_intercept)`. `cuts`:
    per operating point (`OPERATING_POINTS`), the probability below which a claim is marked."""

    model: str
    layers: int
    heads: int
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float
    c: float
    combined_mean: tuple[float, ...]
    combined_scale: tuple[float, ...]
    combined_coefficients: tuple[float, ...]
    combined_intercept: float
    cuts: dict[str, float]
    format: int = FORMAT

    @classmethod
    def fit(
        cls,
        claims: Sequence[ClaimFeatures],
        labels: Sequence[int] | np.ndarray,
        model: str,
        c: float = DEFAULT_C,
        groups: Sequence[str] | None = None,
        seed: int = 0,
    ) -> SupportProbe:
        """The probe fitted on `claims` (their features, all of one model named `model`) and `labels`
        (1: attributable, 0: not), the heads' L2 penalty `1 / c`. The combined level is fitted on the heads'
        out-of-fold log-odds (folds that keep each of `groups`, the claims' questions, whole; each claim its
        own by default), and the operating points are cut on the out-of-fold verdict scores (`vetoed`)."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        labels = np.asarray(labels, dtype=int)
        if len(claims) != len(labels):
            raise ValueError(f"{len(claims)} claims but {len(labels)} labels")
        if set(labels.tolist()) != {0, 1}:
            raise ValueError("the labels must hold both classes, 1 (attributable) and 0 (not)")
        shapes = {claim.lookback.shape for claim in claims}
        if len(shapes) != 1:
            raise ValueError(f"the claims come from models of different shapes: {sorted(shapes)}")
        (layers, heads) = shapes.pop()
        x = np.stack([claim.heads_vector() for claim in claims])
        groups = list(groups) if groups is not None else [str(i) for i in range(len(claims))]
        folds = grouped_folds(labels, groups, seed)
        z = np.zeros(len(claims))
        for train, test in folds:
            z[test] = heads_model(x[train], labels[train], c).decision_function(x[test])
        fitted = heads_model(x, labels, c)
        v = np.stack([claim.combined_vector(score) for claim, score in zip(claims, z, strict=True)])
        scaler = StandardScaler().fit(v)
        combined = LogisticRegression(C=COMBINED_C, max_iter=5000).fit(scaler.transform(v), labels)
        probabilities = np.zeros(len(claims))  # the cuts' probabilities, out of fold at both levels
        for train, test in folds:
            fold = make_pipeline(StandardScaler(), LogisticRegression(C=COMBINED_C, max_iter=5000))
            probabilities[test] = fold.fit(v[train], labels[train]).predict_proba(v[test])[:, 1]
        probabilities = vetoed(probabilities, claims)
        scaled = fitted[0]
        return cls(
            model,
            layers,
            heads,
            tuple(scaled.mean_.tolist()),
            tuple(scaled.scale_.tolist()),
            tuple(fitted[-1].coef_[0].tolist()),
            float(fitted[-1].intercept_[0]),
            c,
            tuple(scaler.mean_.tolist()),
            tuple(scaler.scale_.tolist()),
            tuple(combined.coef_[0].tolist()),
            float(combined.intercept_[0]),
            {name: operating_cut(probabilities, labels, share) for name, share in OPERATING_POINTS.items()},
        )

    def check(self, model: tuple[str, int, int]) -> None:
        """ValueError unless `model` (`model_identity`) is the one the probe was fitted on (names compared
        ignoring case)."""
        if (model[0].lower(), *model[1:]) != (self.model.lower(), self.layers, self.heads):
            raise ValueError(
                f"this probe was fitted on {self.model} ({self.layers} layers x {self.heads} heads), not on "
                f"{model[0]} ({model[1]} x {model[2]}): fit one on this model's claims (SupportProbe.fit)"
            )

    def cut(self, operating_point: str = DEFAULT_OPERATING_POINT) -> float:
        """The probability below which a claim is marked at `operating_point` (`OPERATING_POINTS`)."""
        if operating_point not in self.cuts:
            raise ValueError(
                f"unknown operating point {operating_point!r}; choose one of {sorted(self.cuts)}"
            )
        return self.cuts[operating_point]

    def heads_log_odds(self, claims: Sequence[ClaimFeatures]) -> np.ndarray:
        """`[n]` the heads' level's log-odds of each claim."""
        if not claims:
            raise ValueError("no claims to judge")
        shapes = {claim.lookback.shape for claim in claims} - {(self.layers, self.heads)}
        if shapes:
            raise ValueError(
                f"features of shape {sorted(shapes)}; this probe reads {(self.layers, self.heads)}"
            )
        x = (np.stack([claim.heads_vector() for claim in claims]) - self.mean) / np.asarray(self.scale)
        return np.asarray(x @ np.asarray(self.coefficients) + self.intercept)

    def probability(self, claims: Sequence[ClaimFeatures]) -> np.ndarray:
        """`[n]` each claim's probability of being attributable."""
        z = self.heads_log_odds(claims)
        v = np.stack([claim.combined_vector(score) for claim, score in zip(claims, z, strict=True)])
        v = (v - self.combined_mean) / np.asarray(self.combined_scale)
        return np.asarray(expit(v @ np.asarray(self.combined_coefficients) + self.combined_intercept))

    def save(self, path: str | Path) -> None:
        """Write the probe as JSON."""
        Path(path).write_text(json.dumps(asdict(self)), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> SupportProbe:
        """The probe `save` wrote to `path`; ValueError for a probe of an older format (refit it)."""
        fields: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        if fields.get("format") != FORMAT:
            raise ValueError(
                f"{path} holds a probe of format {fields.get('format', 1)}; this release reads format {FORMAT} "
                "(the heads stacked with coverage and the held claims): refit it with SupportProbe.fit"
            )
        tuples: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        return cls(**tuples)

    @classmethod
    def shipped(cls, model: PreTrainedModel) -> SupportProbe | None:
        """The probe shipped for `model` (fitted on AttributionBench dev), or None where none was fitted on a
        model of its name and head count."""
        name, layers, heads = model_identity(model)
        file = {shipped.lower(): file for shipped, file in SHIPPED.items()}.get(name.lower())
        if file is None:  # the hub's names and a local folder's may differ in case only
            return None
        probe = cls.load(Path(str(resources.files("rcattr.grounding") / "probes" / file)))
        return (
            probe
            if (probe.model.lower(), probe.layers, probe.heads) == (name.lower(), layers, heads)
            else None
        )
