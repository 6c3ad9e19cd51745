"""How much the documents vouch for an answer sentence: its token support and its claims, read
against fixed odds.

[`sentence_support`][rcattr.grounding.vouching.sentence_support] scores a sentence from its tokens' support ([`rcattr.grounding.support`][rcattr.grounding.support]) and its claims
([`rcattr.grounding.claims`][rcattr.grounding.claims]); [`support_status`][rcattr.grounding.vouching.support_status] reads a score as `"supported"`, `"weak"` or
`"unsupported"`. A sentence that mixes held and unheld claims is judged by its held part as well
([`sentence_vouching`][rcattr.grounding.vouching.sentence_vouching]): it keeps that part's citation, and its unheld claims are marked where
they stand. [`rcattr.grounding.citations.sentence_citations`][rcattr.grounding.citations.sentence_citations] gives each citation these figures;
[`unsupported_tokens`][rcattr.grounding.vouching.unsupported_tokens] names the answer's tokens the documents do not vouch for.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import replace

from rcattr.grounding.claims import Claim, citation_markers, context_parts, find_claims
from rcattr.grounding.support import SUPPORT_THRESHOLD
from rcattr.record.record import AttributionRecord
from rcattr.text.segmentation import tokens_within

WEAK_BELOW = 0.5
"""A sentence whose support is below this, even odds, is `"weak"`. A sentence's support
([`sentence_support`][rcattr.grounding.vouching.sentence_support]) is a probability that the context holds it, so
the cut-offs are odds, the same on every model; measured, not fitted, on the natural-error benchmark
(docs/benchmarks/citations.md)."""

UNSUPPORTED_BELOW = SUPPORT_THRESHOLD
"""A sentence whose support is below this, odds of 1 to 3 (token support's cut-off,
[`SUPPORT_THRESHOLD`][rcattr.grounding.support.SUPPORT_THRESHOLD]), is `"unsupported"`."""

UNHELD_NAME = UNSUPPORTED_BELOW
"""The most support a sentence has when no sentence of the documents or the question holds one of its names: the
unsupported cut-off itself, so that the sentence is weak, not unsupported, and keeps its citation. Names are found
by their capitals, so some are not claims (a title's words, a heading)."""


def sentence_support(token_support: Sequence[float], claims: Sequence[Claim]) -> float:
    """How much the context vouches for one answer sentence: the mean token support of its (non-blank)
    tokens (1 with none), however likely each token is, 0 when no sentence of the documents or the question
    holds one of its numbers or dates whole, and at most [`UNHELD_NAME`][rcattr.grounding.vouching.UNHELD_NAME] when none holds one of its
    names."""
    mean = sum(token_support) / len(token_support) if token_support else 1.0
    return min([mean, *(UNHELD_NAME if claim.kind == "name" else 0.0 for claim in claims if not claim.held)])


def support_status(support: float) -> str:
    """`"supported"`, `"weak"` or `"unsupported"`: `support` against [`WEAK_BELOW`][rcattr.grounding.vouching.WEAK_BELOW] and
    [`UNSUPPORTED_BELOW`][rcattr.grounding.vouching.UNSUPPORTED_BELOW]."""
    return "unsupported" if support < UNSUPPORTED_BELOW else "weak" if support < WEAK_BELOW else "supported"


def partly_held(claims: Sequence[Claim]) -> bool:
    """Whether `claims` mix held and unheld ones: then the sentence's held part is judged on its own
    ([`sentence_vouching`][rcattr.grounding.vouching.sentence_vouching], [`sentence_status`][rcattr.grounding.vouching.sentence_status])."""
    return any(claim.held for claim in claims) and not all(claim.held for claim in claims)


def sentence_status(held_support: float, claims: Sequence[Claim]) -> str:
    """[`support_status`][rcattr.grounding.vouching.support_status] of a sentence's held part, `"partial"` in place of `"supported"` when it is
    [`partly_held`][rcattr.grounding.vouching.partly_held]."""
    status = support_status(held_support)
    return "partial" if status == "supported" and partly_held(claims) else status


def sentence_vouching(
    result: AttributionRecord, start: int, end: int, context: Sequence[frozenset[str]]
) -> tuple[list[Claim], float | None, float | None]:
    """The claims of `result.answer[start:end]` (offsets in the answer) with their least token support,
    the sentence's [`sentence_support`][rcattr.grounding.vouching.sentence_support] and its held part's (`Citation.held_support`); both None
    without token support. Citation markers (`[1]`) are neither claims nor tokens of the sentence."""
    text = result.answer[start:end]
    claims = [
        replace(claim, start=claim.start + start, end=claim.end + start)
        for claim in find_claims(text, context)
    ]
    if result.token_support is None:
        return claims, None, None
    support = result.token_support.tolist()
    markers = [(a + start, b + start) for a, b in citation_markers(text)]

    def inside(a: int, b: int, left_out: Sequence[tuple[int, int]] = ()) -> list[float]:
        skipped = {i for x, y in [*markers, *left_out] for i in tokens_within(result.answer_tokens, x, y)}
        return [support[i] for i in tokens_within(result.answer_tokens, a, b) if i not in skipped]

    claims = [replace(claim, support=min(inside(claim.start, claim.end), default=None)) for claim in claims]
    whole = sentence_support(inside(start, end), claims)
    if not partly_held(claims):
        return claims, whole, whole
    unheld = [(claim.start, claim.end) for claim in claims if not claim.held]
    return claims, whole, sentence_support(inside(start, end, unheld), [])


def unsupported_tokens(result: AttributionRecord, threshold: float = SUPPORT_THRESHOLD) -> list[int]:
    """Indices of the answer tokens (not blank) whose [`token_support`][rcattr.record.signals.RCSignals]
    is below `threshold` (none for baselines).

    A token of a claim that a sentence of the documents or the question holds whole is not flagged: the first
    piece of a copied word (`" O"` of `"OAPEC"`) is often unlikely on its own, and the claim is in the
    context. `threshold` is a real number in [0, 1]; anything else raises ValueError."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0 <= threshold <= 1:
        raise ValueError(
            f"threshold must be a real number in [0, 1] (token support is a probability), got {threshold!r}"
        )
    if result.token_support is None:
        return []
    context = context_parts(result.evidence if result.evidence is not None else result.chunks)
    held = {
        index
        for claim in find_claims(result.answer, context)
        if claim.held
        for index in tokens_within(result.answer_tokens, claim.start, claim.end)
    }
    return [
        index
        for index, (token, support) in enumerate(
            zip(result.answer_tokens, result.token_support.tolist(), strict=True)
        )
        if support < threshold and token.text.strip() and index not in held
    ]
