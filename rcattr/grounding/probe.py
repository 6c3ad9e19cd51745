"""The support probe (issue 75): is a claim attributable to its context? Lookback Lens's recipe (Chuang et al.
2024: a regularised logistic regression on per-head lookback ratios) on rcattr's own per-head statistics.

A claim's :class:`ClaimFeatures` are, per head, the mean over its tokens of the lookback ratio and of the peak
superiority P(max X > Y) (:mod:`rcattr.grounding.head_statistics`), and the claim's token support and mean
log-probability. :meth:`SupportProbe.fit` fits the probe on a user's labelled claims; :meth:`SupportProbe.save`
writes it as a small JSON file, and :meth:`SupportProbe.load` reads it back. The probe knows the model it was
fitted on (its name and head count): :meth:`SupportProbe.check` refuses another model's features, and
:meth:`SupportProbe.shipped` gives the one fitted on AttributionBench dev for the default model
(SmolLM2-135M-Instruct) only to that model; everywhere else the unsupervised token support stands.
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
from scipy.special import expit

from rcattr.grounding.claims import citation_markers
from rcattr.grounding.head_statistics import TokenStatistics, token_statistics
from rcattr.text.segmentation import TextSpan, tokens_within

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from rcattr.attribution.attributor import RCAttributor
    from rcattr.text.prompting import ContextInput

# the inverse of the L2 penalty, chosen by question-grouped cross-validation on SmolLM2's AttributionBench dev
# features among 0.001 .. 0.1 (benchmarks/support_probe.py fit; docs/benchmarks.md, issue 75)
DEFAULT_C = 0.01
SHIPPED = {"SmolLM2-135M-Instruct": "smollm2-135m-instruct.json"}


def claim_tokens(tokens: Sequence[TextSpan], claim: str) -> list[int]:
    """The indices of ``claim``'s ``tokens`` that say something: not inside a citation marker (``[5]``), not
    blank (all of them when none is left)."""
    markers = {t for a, b in citation_markers(claim) for t in tokens_within(tokens, a, b)}
    kept = [i for i in range(len(tokens)) if i not in markers]
    return [i for i in kept if tokens[i].text.strip()] or kept


def head_means(statistics: TokenStatistics, tokens: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the ``[L, H]`` mean lookback ratio and mean peak superiority over the answer ``tokens``."""
    index = torch.tensor(list(tokens))
    return (
        statistics.lookback[..., index.to(statistics.lookback.device)].double().mean(-1).cpu().numpy(),
        statistics.peak[..., index.to(statistics.peak.device)].double().mean(-1).cpu().numpy(),
    )


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class ClaimFeatures:
    """What the probe reads of one claim.

    Attributes
    ----------
    lookback, peak : ndarray, shape [L, H]
        Per head, the mean over the claim's tokens of the lookback ratio and of the peak superiority.
    support : float
        The claim's token support (its weakest sentence's, :attr:`Citation.support
        <rcattr.grounding.citations.Citation.support>`), in [0, 1].
    logprob : float
        The mean log-probability of the claim's tokens but the first.
    """

    lookback: np.ndarray
    peak: np.ndarray
    support: float
    logprob: float

    @classmethod
    def of(cls, statistics: TokenStatistics, tokens: Sequence[int], support: float) -> ClaimFeatures:
        """The features of the claim made of the answer ``tokens`` (indices) from its pass's ``statistics``."""
        tokens = list(tokens)
        lookback, peak = head_means(statistics, tokens)
        logprob = statistics.logprob[tokens[1:] or tokens].double().mean()
        return cls(lookback, peak, float(support), float(logprob))

    def vector(self) -> np.ndarray:
        """``[2 L H + 2]``: the lookback ratios, the peaks, the support's log-odds and the log-probability."""
        support = np.clip(self.support, 1e-6, 1 - 1e-6)
        return np.concatenate(
            [self.lookback.ravel(), self.peak.ravel(), [np.log(support / (1 - support)), self.logprob]]
        )


def claim_features(attributor: RCAttributor, inputs: ContextInput, claim: str) -> ClaimFeatures:
    """``claim``'s features, teacher-forced as the answer to ``inputs``: its attribution (for the support) and
    one more forward for every head's statistics."""
    return _read(attributor, inputs, claim)[0]


def _read(attributor: RCAttributor, inputs: ContextInput, claim: str) -> tuple[ClaimFeatures, bool]:
    """The claim's features, and whether the library's citations mark it (a sentence short of supported)."""
    citations = attributor.attribute(inputs, target=claim).citations()
    support = min(c.support for c in citations if c.support is not None)
    example = attributor.prepare(inputs, claim, "sentence")
    with torch.no_grad():
        statistics = token_statistics(attributor.model, example)
    features = ClaimFeatures.of(statistics, claim_tokens(example.answer_tokens, claim), support)
    return features, any(c.status != "supported" for c in citations if c.status)


@dataclass(frozen=True)
class ClaimVerdict:
    """Whether a claim is attributable to its context.

    Attributes
    ----------
    attributable : float
        The probe's probability where a probe was used, else the claim's token support; in [0, 1].
    marked : bool
        The probe's probability below one half; without a probe, a sentence of the claim short of
        ``"supported"`` (:attr:`Citation.status <rcattr.grounding.citations.Citation.status>`).
    by : str
        ``"probe"`` or ``"support"``.
    """

    attributable: float
    marked: bool
    by: str


def claim_verdict(
    attributor: RCAttributor, inputs: ContextInput, claim: str, probe: SupportProbe | None = None
) -> ClaimVerdict:
    """Is ``claim`` attributable to ``inputs``' context? By ``probe`` (checked against the attributor's model),
    else by the probe shipped for the attributor's model (:meth:`SupportProbe.shipped`), else by the
    unsupervised token support and its marks."""
    if probe is not None:
        probe.check(model_identity(attributor.model))
    probe = probe or SupportProbe.shipped(attributor.model)
    features, marked = _read(attributor, inputs, claim)
    if probe is None:
        return ClaimVerdict(features.support, marked, "support")
    probability = float(probe.probability([features])[0])
    return ClaimVerdict(probability, probability < 0.5, "probe")


def model_identity(model: PreTrainedModel) -> tuple[str, int, int]:
    """The ``(name, layers, heads per layer)`` a probe is checked against; the name is the last part of the
    model's ``name_or_path``."""
    config = model.config.get_text_config()
    return (
        Path(str(model.config.name_or_path)).name,
        int(config.num_hidden_layers),
        int(config.num_attention_heads),
    )


@dataclass(frozen=True)
class SupportProbe:
    """A fitted probe: standardised features, a logistic regression. ``mean``, ``scale`` and ``coefficients``
    are ``[2 L H + 2]``; the probability of a claim being attributable is
    ``sigmoid(coefficients · (x - mean) / scale + intercept)``."""

    model: str
    layers: int
    heads: int
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float
    c: float

    @classmethod
    def fit(
        cls,
        claims: Sequence[ClaimFeatures],
        labels: Sequence[int] | np.ndarray,
        model: str,
        c: float = DEFAULT_C,
    ) -> SupportProbe:
        """The probe fitted on ``claims`` (their features, all of one model named ``model``) and ``labels``
        (1: attributable, 0: not), with L2 penalty ``1 / c``."""
        from sklearn.linear_model import LogisticRegression
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
        x = np.stack([claim.vector() for claim in claims])
        scaler = StandardScaler().fit(x)
        mean, scale = scaler.mean_, scaler.scale_
        fitted = LogisticRegression(C=c, max_iter=5000).fit(scaler.transform(x), labels)
        coefficients, intercept = tuple(fitted.coef_[0].tolist()), float(fitted.intercept_[0])
        return cls(
            model, layers, heads, tuple(mean.tolist()), tuple(scale.tolist()), coefficients, intercept, c
        )

    def check(self, model: tuple[str, int, int]) -> None:
        """ValueError unless ``model`` (:func:`model_identity`) is the one the probe was fitted on."""
        if model != (self.model, self.layers, self.heads):
            raise ValueError(
                f"this probe was fitted on {self.model} ({self.layers} layers x {self.heads} heads), not on "
                f"{model[0]} ({model[1]} x {model[2]}): fit one on this model's claims (SupportProbe.fit)"
            )

    def probability(self, claims: Sequence[ClaimFeatures]) -> np.ndarray:
        """``[n]`` each claim's probability of being attributable."""
        if not claims:
            raise ValueError("no claims to judge")
        shapes = {claim.lookback.shape for claim in claims} - {(self.layers, self.heads)}
        if shapes:
            raise ValueError(
                f"features of shape {sorted(shapes)}; this probe reads {(self.layers, self.heads)}"
            )
        x = (np.stack([claim.vector() for claim in claims]) - self.mean) / np.asarray(self.scale)
        return expit(x @ np.asarray(self.coefficients) + self.intercept)

    def save(self, path: str | Path) -> None:
        """Write the probe as JSON."""
        Path(path).write_text(json.dumps(asdict(self)), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> SupportProbe:
        """The probe :meth:`save` wrote to ``path``."""
        fields: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        tuples: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        return cls(**tuples)

    @classmethod
    def shipped(cls, model: PreTrainedModel) -> SupportProbe | None:
        """The probe shipped for ``model`` (fitted on AttributionBench dev), or None where none was fitted on a
        model of its name and head count."""
        identity = model_identity(model)
        name = SHIPPED.get(identity[0])
        if name is None:
            return None
        probe = cls.load(Path(str(resources.files("rcattr.grounding") / "probes" / name)))
        return probe if (probe.model, probe.layers, probe.heads) == identity else None
