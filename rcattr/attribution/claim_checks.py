"""A claim checked against its context by teacher-forcing it as the answer: its verdict (`claim_verdict`), the
one its citations give, and the support probe's features (`claim_features`), from the attribution's one pass."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from rcattr.grounding.citation_rule import CitationRule
from rcattr.grounding.claims import content_coverage, without_markers
from rcattr.grounding.probe import DEFAULT_OPERATING_POINT, ClaimFeatures, claim_tokens
from rcattr.grounding.verdict import ClaimVerdict
from rcattr.record.signals import RCSignals

if TYPE_CHECKING:
    from rcattr.attribution.attributor import RCAttributor
    from rcattr.text.prompting import ContextInput

__all__ = ["claim_features", "claim_verdict"]


def claim_features(attributor: RCAttributor, inputs: ContextInput, claim: str) -> ClaimFeatures:
    """`claim`'s features, teacher-forced as the answer to `inputs`, from its attribution's one pass (every
    head's rows kept, with a probe or without) and its citations: its weakest sentence's support, all its
    tokens' head statistics."""
    keeping = copy.copy(attributor)
    keeping.keep_head_rows = True
    result = keeping.attribute(inputs, target=claim)
    signals = RCSignals.of(result)
    assert signals.head_lookback is not None and signals.head_peak is not None  # kept by the pass
    citations = result.citations()
    support = min(c.support for c in citations if c.support is not None)
    return ClaimFeatures.of(
        signals.head_lookback,
        signals.head_peak,
        signals.token_logprob,
        claim_tokens(result.answer_tokens, claim),
        support,
        content_coverage(without_markers(claim), result.chunks),
        [c for citation in citations for c in citation.claims],
        min(c.held_support for c in citations if c.held_support is not None),
    )


def claim_verdict(
    attributor: RCAttributor,
    inputs: ContextInput,
    claim: str,
    operating_point: str = DEFAULT_OPERATING_POINT,
) -> ClaimVerdict:
    """Is `claim` attributable to `inputs`' context? The verdicts of its citations
    (`attributor.attribute(inputs, target=claim).citations()`, by the attributor's probe, else by token
    support): marked when one of its sentences is, its probability the least of theirs, the reason of the
    first marked sentence (of the weakest when none is)."""
    citations = attributor.attribute(inputs, target=claim).citations(CitationRule(verdict=operating_point))
    verdicts = [c.verdict for c in citations if c.verdict is not None]
    if not verdicts:
        raise ValueError("no sentence of the claim has a verdict: attribute with an RCAttributor")
    marked = [v for v in verdicts if v.marked]
    weakest = min(verdicts, key=lambda v: v.attributable)
    first = marked[0] if marked else weakest
    return ClaimVerdict(weakest.attributable, bool(marked), first.by, first.reason)
