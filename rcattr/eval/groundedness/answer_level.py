"""Answer-level groundedness signals and their paired AUROC (the tasks of [`rcattr.eval.groundedness.pairs`][rcattr.eval.groundedness.pairs]).

Signals, one per answer (higher: more reliant on the context):

- `context_reliance`: the result's [`context_reliance`][rcattr.attribution.result.RCAttributionResult.context_reliance], the lookback
  ratio (Chuang et al. 2024) on the RC-selected heads, averaged over the answer's tokens;
- `supported_share`: the share of the answer's non-blank tokens that the result does not flag
  (`1 - len(result.unsupported_tokens()) / tokens`); `token_support`: their mean token support;
- `rc_groundedness`: the answer tokens' mean groundedness on the RC-selected heads (the former
  `context_reliance`);
- `rc_context_heads`: the share of all the model's heads whose P(X > Y) exceeds 1/2;
- `rc_superiority`: the mean P(X > Y) over all heads; `rc_selected`: over the RC-selected heads;
- `rc_peak` / `rc_peak_selected`: per head and answer token, P(max X > Y), averaged over all heads / the
  RC-selected heads and the tokens;
- `logprob` and `neg_entropy`: the answer tokens' mean log-probability and minus their mean entropy;
- `lookback`: the lookback ratio averaged over all heads and tokens;
- `random`: a seeded uniform draw.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import token_signals
from rcattr.eval.common.auroc import auroc, table_lines
from rcattr.eval.common.metrics import resampled_summary
from rcattr.eval.groundedness.pairs import Answering
from rcattr.grounding.support import support_heads
from rcattr.record.signals import RCSignals
from rcattr.text.prompting import ContextInput

ANSWER_SIGNALS = (
    "context_reliance",
    "supported_share",
    "token_support",
    "rc_groundedness",
    "rc_context_heads",
    "rc_superiority",
    "rc_selected",
    "rc_peak",
    "rc_peak_selected",
    "logprob",
    "neg_entropy",
    "lookback",
    "random",
)
REFERENCE = "lookback"


def answer_signals(
    attributor: RCAttributor, answering: Answering, gen_args: dict[str, Any], rng: random.Random
) -> dict[str, Any]:
    """Generate the model's answer to the question over its context and compute every signal for it."""
    inp = ContextInput(answering.context, answering.question)
    result = attributor.attribute(inp, target=None, granularity="sentence", gen_args=gen_args)
    rc = RCSignals.of(result)
    selection = rc.head_selection
    head_scores = selection.scores.double()
    example = attributor.prepare(inp, target=result.answer, granularity="sentence")
    tokens = token_signals(attributor.model, example, selection.heads, support_heads(selection.scores))
    words = [i for i, token in enumerate(result.answer_tokens) if token.text.strip()] or [0]
    flagged = set(result.unsupported_tokens())
    return {
        "answer": result.answer,
        "context_reliance": rc.context_reliance,
        "supported_share": sum(i not in flagged for i in words) / len(words),
        "token_support": float(rc.token_support[words].double().mean()),
        "rc_groundedness": float(rc.groundedness.double().mean()),
        "rc_context_heads": float((head_scores > 0.5).double().mean()),
        "rc_superiority": float(head_scores.mean()),
        "rc_selected": float(head_scores[tuple(selection.heads.T)].mean()),
        "rc_peak": float(tokens["peak"].mean()),
        "rc_peak_selected": float(tokens["peak_selected"].mean()),
        "logprob": float(tokens["logprob"].mean()),
        "neg_entropy": float(-tokens["entropy"].mean()),
        "lookback": float(tokens["lookback"].mean()),
        "random": rng.random(),
    }


def auroc_table(
    rows: Sequence[dict[str, Any]],
    conditions: tuple[str, str] = ("own", "other"),
    reference: str = REFERENCE,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Per signal, the AUROC of the first condition (positive) against the second, with a 95% bootstrap
    interval over pairs (a resample keeps a pair's two answers together), and its paired difference to
    `reference`. Rows carry `id` (the pair), `condition` and the signals; pairs missing a condition are
    left out, as are signals the rows lack."""
    by_id: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_id.setdefault(row["id"], {})[row["condition"]] = row
    complete = [pair for pair in by_id.values() if set(pair) == set(conditions)]
    labels = np.array([1] * len(complete) + [0] * len(complete))
    draws = np.random.default_rng(seed).integers(0, len(complete), size=(n_boot, len(complete)))
    positive, negative = conditions

    def aurocs(signal: str) -> tuple[float, np.ndarray]:
        good = np.array([pair[positive][signal] for pair in complete])
        bad = np.array([pair[negative][signal] for pair in complete])
        resampled = [auroc(labels, np.concatenate([good[d], bad[d]])) for d in draws]
        return float(auroc(labels, np.concatenate([good, bad]))), np.array(resampled)

    base, base_draws = aurocs(reference)
    table: dict[str, dict[str, float]] = {}
    present = [s for s in ANSWER_SIGNALS if complete and s in complete[0][positive]]
    for signal in present:
        value, resampled = (base, base_draws) if signal == reference else aurocs(signal)
        summary = resampled_summary(value, resampled, base, base_draws, reference)
        table[signal] = {**summary, "questions": len(complete)}
    return table


def markdown(table: dict[str, dict[str, float]], description: str, reference: str = REFERENCE) -> str:
    """The AUROC table of one paired task, under its description and pair count."""
    lines = table_lines(table, reference)
    n = next(iter(table.values()))["questions"] if table else 0
    return f"{description}: {n} pairs\n\n" + "\n".join(lines) + "\n"
