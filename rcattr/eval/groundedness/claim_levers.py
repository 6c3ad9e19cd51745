"""What each signal says of an AttributionBench claim, from its stored row
([`rcattr.eval.groundedness.attributionbench.claim_row`][rcattr.eval.groundedness.attributionbench.claim_row]), with no model.

Every signal is a probability-like score, higher for a claim the references support:

- `support`: the library's, [`Citation.support`][rcattr.grounding.citations.Citation.support] of the claim's
  weakest sentence (the reference every other signal is compared with); its mark is the citation's
  `status` (anything but `"supported"`);
- levers, one idea each, none fitted:

  - `content_words`: the mean token support of the claim's content words only (stop words, punctuation and
    citation markers left out), its claims read as [`rcattr.grounding.vouching.sentence_support`][rcattr.grounding.vouching.sentence_support] reads them;
  - `heads_coverage`: the share of content words the references hold, by their surface form or, for a
    word they do not hold so (a paraphrase), by the pass: none of its tokens flagged (token support at or
    above [`rcattr.grounding.support.SUPPORT_THRESHOLD`][rcattr.grounding.support.SUPPORT_THRESHOLD], the heads' peak with the model's expectation);
  - `fused_coverage`: lexical coverage fused where the heads are unsure, as the attribution's gate fuses
    BM25: `g * support + (1 - g) * coverage` with `g = |2 support - 1|`;
  - `support_judge`: the judge's log-odds added to the support's, `sigmoid(logit support + judge)`;

- baselines: `coverage` (the share of content words the references hold), `logprob`, `neg_entropy`,
  `lookback` (over every head) and `judge` (`sigmoid` of the model's log-odds of "yes",
  [`rcattr.eval.groundedness.judge`][rcattr.eval.groundedness.judge]).

`MARK_SIGNALS` have a cut-off of their own, even odds; the others are cut where cross-validation puts them
([`rcattr.eval.groundedness.claim_report`][rcattr.eval.groundedness.claim_report]).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scipy.special import expit
from scipy.special import logit as special_logit

from rcattr.grounding.claims import Claim
from rcattr.grounding.support import SUPPORT_LOG_ODDS_THRESHOLD
from rcattr.grounding.vouching import sentence_support

REFERENCE = "support"
LEVERS = ("content_words", "heads_coverage", "fused_coverage", "support_judge")
BASELINES = ("coverage", "logprob", "neg_entropy", "lookback", "judge")
SIGNALS = (REFERENCE, *LEVERS, *BASELINES)
# signals that are probabilities (or shares): marked below even odds, as the library marks support
MARK_SIGNALS = frozenset({*LEVERS, "coverage", "judge"})
_EPSILON = 1e-6


def sigmoid(x: float) -> float:
    return float(expit(x))


def logit(p: float) -> float:
    """The log-odds of `p`, kept finite (a support of 0 or 1, which the claims' floors give)."""
    return float(special_logit(min(max(p, _EPSILON), 1 - _EPSILON)))


def _claims(row: dict[str, Any]) -> list[Claim]:
    return [Claim(0, 0, "", kind, held) for kind, held, _ in row["claims"]]


def content_words_support(row: dict[str, Any]) -> float:
    """The mean token support of the row's content-word tokens, its claims' floors applied."""
    tokens = sorted({t for _, word_tokens in row["words"] for t in word_tokens})
    return sentence_support([sigmoid(row["log_odds"][t]) for t in tokens], _claims(row))


def heads_coverage(row: dict[str, Any]) -> float:
    """The share of the row's content words held by their surface form or found by the pass (no token of
    theirs with support log-odds below the token flag's); 1 with none."""
    found = [
        held
        or (bool(word_tokens) and min(row["log_odds"][t] for t in word_tokens) >= SUPPORT_LOG_ODDS_THRESHOLD)
        for held, word_tokens in row["words"]
    ]
    return sum(found) / len(found) if found else 1.0


def claim_signals(row: dict[str, Any]) -> dict[str, float]:
    """Every signal of [`SIGNALS`][rcattr.eval.groundedness.claim_levers.SIGNALS] for one row."""
    support, coverage, judge = row["support"], row["coverage"], row["judge"]
    certainty = abs(2 * support - 1)
    return {
        REFERENCE: support,
        "content_words": content_words_support(row),
        "heads_coverage": heads_coverage(row),
        "fused_coverage": certainty * support + (1 - certainty) * coverage,
        "support_judge": sigmoid(logit(support) + judge),
        "coverage": coverage,
        "logprob": row["logprob"],
        "neg_entropy": row["neg_entropy"],
        "lookback": row["lookback"],
        "judge": sigmoid(judge),
    }


def marked(row: dict[str, Any], signals: dict[str, float]) -> dict[str, bool]:
    """Per signal with a cut-off of its own, whether it marks the claim: the library's `status` for
    `support`, below even odds for the [`MARK_SIGNALS`][rcattr.eval.groundedness.claim_levers.MARK_SIGNALS]."""
    return {
        REFERENCE: row["status"] != "supported",
        **{name: signals[name] < 0.5 for name in SIGNALS if name in MARK_SIGNALS},
    }


def signal_matrix(rows: Sequence[dict[str, Any]], names: Sequence[str] = SIGNALS) -> list[list[float]]:
    """`[n_rows, n_names]` the rows' signals, for a combiner's features."""
    return [[signals[name] for name in names] for signals in map(claim_signals, rows)]
