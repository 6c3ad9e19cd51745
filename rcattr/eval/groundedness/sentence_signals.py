"""Per answer sentence, what the natural-error benchmark compares: the support of its citation and
the pieces it is made of, and the baselines from the same tokens.

- `vouch`: [`Citation.support`][rcattr.grounding.citations.Citation.support], what `result.citations()` says
  (its `status` too, and `held_support`, [`Citation.held_support`][rcattr.grounding.citations.Citation.held_support],
which decides whether it cites);
- `support`: the sentence's mean token support alone; `claims`: its claims as `[kind, held, least token
  support]` ([`rcattr.grounding.claims`][rcattr.grounding.claims]);
- baselines: `logprob` (the mean log-probability of its tokens after its first, which says more about the
  boundary before it than the sentence: the answer's first token is left out of token support for the same
  reason), `neg_entropy` (minus the mean entropy),
  `lookback` (the lookback ratio over all heads, Chuang et al. 2024) and `coverage`, a lexical check: the
  share of the sentence's content words (not stop words) found anywhere in the documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rcattr.attribution.head_statistics import TokenStatistics
from rcattr.attribution.result import RCAttributionResult
from rcattr.grounding.citations import Citation
from rcattr.grounding.claims import content_coverage
from rcattr.record.signals import RCSignals
from rcattr.text.segmentation import tokens_within

SIGNALS = ("vouch", "support", "claims_held", "claims_rc", "coverage", "logprob", "neg_entropy", "lookback")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def citation_signals(
    result: RCAttributionResult, citation: Citation, statistics: TokenStatistics
) -> dict[str, Any]:
    """The signals of one citation's sentence (`statistics`: every head's, from a pass over the same
    prompt and answer)."""
    tokens = tokens_within(result.answer_tokens, citation.start, citation.end)
    support = RCSignals.of(result).token_support
    lookback = statistics.lookback.mean((0, 1))
    return {
        "vouch": citation.support,
        "status": citation.status,
        "held_support": citation.held_support,
        "support": _mean([float(support[i]) for i in tokens]),
        "claims": [[claim.kind, claim.held, claim.support] for claim in citation.claims],
        "coverage": content_coverage(citation.text, result.chunks),
        "logprob": _mean([float(statistics.logprob[i]) for i in tokens[1:] or tokens]),
        "neg_entropy": -_mean([float(statistics.entropy[i]) for i in tokens]),
        "lookback": _mean([float(lookback[i]) for i in tokens]),
    }


def derived(row: dict[str, Any]) -> dict[str, float]:
    """The signals a row's stored pieces give, by name ([`SIGNALS`][rcattr.eval.groundedness.sentence_signals.SIGNALS]): `claims_held` is 0 when a claim
    is not held (1 otherwise), `claims_rc` the least token support of its claims (1 with none)."""
    claims = row["claims"]
    return {
        **{
            name: row[name] for name in ("vouch", "support", "coverage", "logprob", "neg_entropy", "lookback")
        },
        "claims_held": float(all(held for _, held, _ in claims)),
        "claims_rc": min((support for _, _, support in claims if support is not None), default=1.0),
    }
