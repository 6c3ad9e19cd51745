"""One verdict per answer sentence: is it attributable to the documents? The same verdict gives
`Citation.status`, the cited answer's marks, the HTML, the service's JSON and `claim_verdict`, so that they
never disagree (`rcattr.attribution.claim_checks.claim_verdict` checks one claim).

Where a support probe fits the model (`rcattr.grounding.probe`), the verdict is the probe's probability read
against an operating point's cut, never above the larger of the sentence's held token support and its lexical
coverage (a sentence that neither its tokens' support nor its words find in the documents is not passed on the
heads' word: an unrelated sentence among eight passages can look attributable to the heads alone), and a
sentence with a number or a date that no sentence of the documents or the question holds is marked whatever the
probe says (on AttributionBench dev four in five such claims are unattributable). Without a probe it is the unsupervised status from token support
(`rcattr.grounding.vouching`). Each verdict says which it used and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rcattr.grounding.claims import Claim, content_coverage, without_markers
from rcattr.grounding.probe import DEFAULT_OPERATING_POINT, ClaimFeatures, claim_tokens, vetoed
from rcattr.record.record import AttributionRecord

__all__ = ["ClaimVerdict", "sentence_verdict"]

# the status a sentence the probe marks takes when token support alone would call it supported
PROBE_MARKED_STATUS = "weak"


@dataclass(frozen=True)
class ClaimVerdict:
    """Whether a sentence (or a claim of several) is attributable to its documents.

    Attributes
    ----------
    attributable : float
        Where a probe was used, the verdict's score: the probe's probability, never above the larger of the
        sentence's held support and its lexical coverage, 0 with a number or date the documents lack; else the
        token support. In [0, 1].
    marked : bool
        Whether the outputs mark it: `Citation.status` is anything but `"supported"` exactly when it is.
    by : {"probe", "support"}
        What decided it.
    reason : str
        Why, in words: `"not in the documents: '1974'"`, `"probe 0.31 below the balanced cut 0.52"`...
    """

    attributable: float
    marked: bool
    by: Literal["probe", "support"]
    reason: str


def _unheld(claims: Sequence[Claim], numbers: bool) -> list[str]:
    return [claim.text for claim in claims if not claim.held and (claim.kind != "name") == numbers]


def sentence_verdict(
    result: AttributionRecord,
    start: int,
    end: int,
    claims: Sequence[Claim],
    support: float,
    held_support: float,
    status: str,
    operating_point: str = DEFAULT_OPERATING_POINT,
) -> tuple[ClaimVerdict, str]:
    """The verdict on `result.answer[start:end]` and the status it gives the sentence.

    `claims`, `support`, `held_support` and `status` are the sentence's unsupervised reading
    (`rcattr.grounding.vouching.sentence_vouching`). With the result's probe (`RCSignals.probe`), the verdict's
    score (the probability of its `ClaimFeatures`, never above the larger of its held support and its lexical
    coverage, 0 with an unheld number or date: `rcattr.grounding.probe.vetoed`) is cut at `operating_point`; a marked sentence keeps its
    unsupervised status where that marks it too (`"partial"`, `"weak"`, `"unsupported"`), else becomes
    `"weak"`; one the probe passes is `"supported"`. Without a probe the verdict restates the status.
    """
    signals = result.rc
    numbers = _unheld(claims, numbers=True)
    if signals is None or signals.probe is None or signals.head_lookback is None or signals.head_peak is None:
        marked = status != "supported"
        why = (
            f"not in the documents: {', '.join(map(repr, numbers))}"
            if numbers
            else f"token support {support:.2f}"
        )
        return ClaimVerdict(support, marked, "support", f"{why} ({status})"), status
    probe = signals.probe
    text = result.answer[start:end]
    features = ClaimFeatures.of(
        signals.head_lookback,
        signals.head_peak,
        signals.token_logprob,
        claim_tokens(result.answer_tokens, result.answer, start, end),
        support,
        content_coverage(without_markers(text), result.chunks),
        claims,
        held_support,
    )
    probability = float(probe.probability([features])[0])
    score = float(vetoed(np.array([probability]), [features])[0])
    cut = probe.cut(operating_point)
    if numbers:
        reason = f"not in the documents: {', '.join(map(repr, numbers))}"
    elif score < probability:
        below = "below" if score < cut else "at or above"
        reason = (
            f"token support {held_support:.2f} and word coverage {features.coverage:.2f} {below} the "
            f"{operating_point} cut {cut:.2f}"
        )
    else:
        below = "below" if score < cut else "at or above"
        reason = f"probe {probability:.2f} {below} the {operating_point} cut {cut:.2f}"
    if score >= cut:
        return ClaimVerdict(score, False, "probe", reason), "supported"
    return ClaimVerdict(score, True, "probe", reason), (
        status if status != "supported" else PROBE_MARKED_STATUS
    )
