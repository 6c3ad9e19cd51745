"""Unsupported tokens: does a token-level RC signal find the answer tokens the context does not support?

*Unsupported tokens*: QuoteSum and Veri-Gran gold answers with seeded edits of their quoted
numbers, dates and named entities ([`rcattr.eval.groundedness.answer_edits`][rcattr.eval.groundedness.answer_edits]), teacher-forced over the record's
sources. Every answer token gets each signal below (higher: less supported); a token is positive when it
overlaps an edit. The AUROC pools the tokens of all records; its 95% percentile bootstrap interval
resamples records, and each signal's paired difference to the reference is taken on the same resamples.
The table also gives the result's flag rates: the share of untouched and of edited non-blank tokens whose
token support is below [`rcattr.grounding.support.SUPPORT_THRESHOLD`][rcattr.grounding.support.SUPPORT_THRESHOLD].

Signals, per answer token t:

- `token_support`: minus the token's support log-odds, the result's `token_support` ([`rcattr.grounding.support`][rcattr.grounding.support]):
  its log-probability plus the log-odds of its mean P(max X > Y) over the 20 best heads, the two pieces of
  evidence the pass has that the token comes from the context, added with no fitted weight;
- `rc_peak_support`: 1 - that mean P(max X > Y) alone (the result's `token_peak`);
- `rc_groundedness`: 1 - the token's groundedness (the attribution's, on the RC-selected heads);
- `rc_peak` / `rc_peak_selected`: 1 - P(max X > Y) at row t, X the row's context logits, Y the
  answer's self logits (all heads / RC-selected heads);
- `rc_support_logprob`: as `token_support` on the RC-selected heads (the first groundedness recipe);
- `neg_logprob`: minus the token's log-probability; `entropy`: the entropy of the distribution it was
  drawn from;
- `lookback` / `lookback_rc`: 1 - the lookback ratio at row t (all heads / RC-selected heads);
- `random`: a seeded uniform draw.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import token_signals
from rcattr.eval.attribution.method import context_input
from rcattr.eval.common.auroc import auroc
from rcattr.eval.common.metrics import resampled_summary
from rcattr.eval.groundedness.answer_edits import EDIT_KINDS, EditedAnswer
from rcattr.grounding.support import SUPPORT_LOG_ODDS_THRESHOLD, SUPPORT_THRESHOLD, support_heads
from rcattr.record.signals import RCSignals

TOKEN_SIGNALS = (
    "token_support",
    "rc_peak_support",
    "rc_groundedness",
    "rc_peak",
    "rc_peak_selected",
    "rc_support_logprob",
    "neg_logprob",
    "entropy",
    "lookback",
    "lookback_rc",
    "random",
)


def edited_token_kinds(edited: EditedAnswer, tokens: Sequence[tuple[int, int]]) -> list[str]:
    """Per answer token `(start, end)`, the kind of the edit it overlaps, or `""` for an untouched one."""
    kinds = []
    for start, end in tokens:
        hit = [e.kind for e in edited.edits if start < e.end and e.start < end]
        kinds.append(hit[0] if hit else "")
    return kinds


def token_rows(attributor: RCAttributor, edited: EditedAnswer, rng: random.Random) -> dict[str, Any]:
    """Teacher-force the edited answer over the record's sources; every token's signals, text and label."""
    inp = context_input(edited.record)
    result = attributor.attribute(inp, target=edited.answer, granularity="sentence")
    rc = RCSignals.of(result)
    example = attributor.prepare(inp, target=edited.answer, granularity="sentence")
    selection = rc.head_selection
    per_token = token_signals(attributor.model, example, selection.heads, support_heads(selection.scores))
    tokens = [(span.start, span.end) for span in result.answer_tokens]
    if len(tokens) != len(per_token["logprob"]):
        raise RuntimeError(f"{len(tokens)} answer tokens but {len(per_token['logprob'])} scored rows")
    signals = {
        "token_support": -per_token["support_log_odds"],
        "rc_peak_support": 1 - per_token["peak_support"],
        "rc_groundedness": 1 - rc.groundedness.double(),
        "rc_peak": 1 - per_token["peak"],
        "rc_peak_selected": 1 - per_token["peak_selected"],
        "rc_support_logprob": -per_token["support_log_odds_selected"],
        "neg_logprob": -per_token["logprob"],
        "entropy": per_token["entropy"],
        "lookback": 1 - per_token["lookback"],
        "lookback_rc": 1 - per_token["lookback_rc"],
    }
    return {
        "tokens": [edited.answer[start:end] for start, end in tokens],
        "kinds": edited_token_kinds(edited, tokens),
        **{name: [round(float(v), 6) for v in values] for name, values in signals.items()},
        "random": [rng.random() for _ in tokens],
    }


def token_auroc_table(
    rows: Sequence[dict[str, Any]],
    reference: str = "neg_logprob",
    n_boot: int = 1000,
    seed: int = 0,
    signals: Sequence[str] = TOKEN_SIGNALS,
) -> dict[str, dict[str, float]]:
    """Per signal of `signals`, the pooled token AUROC of edited (positive) against untouched tokens, with a
    95% bootstrap interval over records, the paired difference to `reference`, and the AUROC per edit kind
    (that kind's edited tokens against every untouched token); for `token_support`, the result's flag
    rates."""
    kinds = [np.array(row["kinds"]) for row in rows]
    draws = np.random.default_rng(seed).integers(0, len(rows), size=(n_boot, len(rows)))

    def pooled(signal: str, records: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scores = np.concatenate([rows[i][signal] for i in records])
        return scores, np.concatenate([kinds[i] for i in records])

    def aurocs(signal: str) -> tuple[float, np.ndarray, dict[str, float]]:
        scores, labels = pooled(signal, range(len(rows)))
        value = float(auroc(labels != "", scores))
        by_kind = {}
        for kind in EDIT_KINDS:
            keep = (labels == kind) | (labels == "")
            if (labels == kind).any():
                by_kind[kind] = float(auroc(labels[keep] == kind, scores[keep]))
        resampled = []
        for draw in draws:
            scores, labels = pooled(signal, draw)
            resampled.append(auroc(labels != "", scores))
        return value, np.array(resampled), by_kind

    base, base_draws, _ = aurocs(reference)
    all_labels = np.concatenate(kinds)
    words = np.concatenate([[bool(token.strip()) for token in row["tokens"]] for row in rows])
    table: dict[str, dict[str, float]] = {}
    for signal in signals:
        value, resampled, by_kind = aurocs(signal)
        table[signal] = {
            **resampled_summary(value, resampled, base, base_draws, reference),
            **{f"auroc_{kind}": v for kind, v in by_kind.items()},
            "records": len(rows),
            "edited_tokens": int((all_labels != "").sum()),
            "tokens": len(all_labels),
        }
    if "token_support" in signals:
        flagged = pooled("token_support", range(len(rows)))[0] > -SUPPORT_LOG_ODDS_THRESHOLD
        edited = all_labels != ""
        table["token_support"]["flagged_untouched"] = float(flagged[words & ~edited].mean())
        table["token_support"]["caught_edited"] = float(flagged[words & edited].mean())
    return table


def markdown(tables: dict[str, dict[str, dict[str, float]]], reference: str = "neg_logprob") -> str:
    """One table per dataset."""
    out = []
    for dataset, table in tables.items():
        first = next(iter(table.values()))
        kinds = [kind for kind in EDIT_KINDS if f"auroc_{kind}" in first]
        out += [
            f"Unsupported tokens, {dataset} dev: {first['records']} edited answers, "
            f"{first['edited_tokens']} edited of {first['tokens']} tokens\n",
            f"| signal | AUROC | 95% interval | minus {reference} (paired 95% interval) | "
            + " | ".join(kinds)
            + " |",
            "|---|---:|---|---|" + "---:|" * len(kinds),
            *(
                f"| {name} | {v['auroc']:.3f} | [{v['low']:.3f}, {v['high']:.3f}] | "
                f"{v[f'minus_{reference}']:+.3f} [{v['difference_low']:+.3f}, {v['difference_high']:+.3f}] | "
                + " | ".join(f"{v[f'auroc_{kind}']:.3f}" for kind in kinds)
                + " |"
                for name, v in table.items()
            ),
            "",
        ]
        if "flagged_untouched" in table.get("token_support", {}):
            out += [
                f"The result's cut-off (token support < {SUPPORT_THRESHOLD:g}) flags "
                f"{table['token_support']['flagged_untouched']:.1%} of the untouched non-blank tokens and "
                f"catches {table['token_support']['caught_edited']:.1%} of the edited ones.",
                "",
            ]
    return "\n".join(out)
