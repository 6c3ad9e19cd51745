"""Context reliance, validated: does the answer-level RC signal tell a relevant context from an irrelevant one?

    python -m rcattr.eval.groundedness --limit 200 --out runs/groundedness

*Context relevance* (issue 20): SQuAD v2 answerable dev questions, each answered by the model (greedy, up
to ``--max-new-tokens``) once with its own paragraph and once with a paragraph of another article (seeded).
Every signal below is computed on both answers; its AUROC for telling the own-paragraph answer (positive)
from the other one is reported with a 95% percentile bootstrap interval over questions (a resample keeps
a question's two answers together), and the paired difference to the best baseline.

Signals, one per answer (higher: more reliant on the context):

- ``rc_context_heads``: the share of all the model's heads whose P(X > Y) exceeds 1/2 (the head favours
  the context over the answer itself), a data-free threshold on the score every head gets in the pass;
- ``rc_superiority``: the mean P(X > Y) over all heads; ``rc_selected``: over the RC-selected heads;
- ``rc_groundedness``: the answer tokens' mean groundedness on the RC-selected heads;
- ``rc_peak``: per head and answer token, P(max X > Y): the rank of the token's highest context logit
  among the answer's self logits Y(g, g), averaged over all heads and tokens; ``rc_peak_selected``: over
  the RC-selected heads;
- ``logprob`` and ``neg_entropy``: the answer tokens' mean log-probability and minus their mean entropy;
- ``lookback``: the lookback ratio (Chuang et al. 2024, unsupervised): per head and answer token, mean
  attention on a context token over (that + mean attention on an answer token it sees), averaged over
  all heads and tokens; ``lookback_rc``: the same over the RC-selected heads;
- ``random``: a seeded uniform draw.

Rows (one per question and condition) are appended to ``OUT/records/signals.jsonl`` as they finish, so a
run resumes where it stopped; ``OUT/results.json`` and ``results.md`` are rewritten at the end.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from tqdm import tqdm
from transformers import PreTrainedModel

from rcattr.attributor import RCAttributor
from rcattr.base import Example
from rcattr.eval.common.datasets import load_attribution
from rcattr.eval.common.metrics import resampled_summary
from rcattr.eval.common.run_args import run_folder
from rcattr.eval.common.run_store import RunStore, announce_resume, record_id
from rcattr.eval.common.sharding import Shard
from rcattr.eval.groundedness import unsupported_tokens
from rcattr.eval.groundedness.answer_edits import edit_answers
from rcattr.eval.groundedness.context_signals import token_signals
from rcattr.eval.kv import data as kv_data
from rcattr.options import positive_int
from rcattr.prompting import ContextInput

SIGNALS = (
    "rc_context_heads",
    "rc_superiority",
    "rc_selected",
    "rc_groundedness",
    "rc_peak",
    "rc_peak_selected",
    "logprob",
    "neg_entropy",
    "lookback",
    "lookback_rc",
    "random",
)
CONDITIONS = ("own", "other")  # the positive class is "own"
TASKS = ("relevance", "unsupported")


@dataclass(frozen=True)
class RelevancePair:
    """A SQuAD v2 answerable question with its own paragraph and one of another article."""

    id: str
    question: str
    own: str
    other: str


def relevance_pairs(limit: int | None = None, seed: int = 0) -> list[RelevancePair]:
    """The first ``limit`` answerable SQuAD v2 dev questions, each paired with a paragraph drawn (seeded)
    from another article."""
    squad = kv_data.squad_articles()
    articles = [[paragraph["context"] for paragraph in article["paragraphs"]] for article in squad]
    rng = random.Random(seed)
    pairs: list[RelevancePair] = []
    for index, article in enumerate(squad):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa["is_impossible"]:
                    continue
                other_article = rng.choice([a for i, a in enumerate(articles) if i != index])
                pairs.append(
                    RelevancePair(qa["id"], qa["question"], paragraph["context"], rng.choice(other_article))
                )
                if len(pairs) == limit:
                    return pairs
    return pairs


def baseline_signals(model: PreTrainedModel, example: Example, rc_heads: torch.Tensor) -> dict[str, float]:
    """The answer-level means of :func:`token_signals`: mean log-probability, minus mean entropy, lookback
    ratios and peak superiority (all heads, and the ``[k, 2]`` RC-selected ones)."""
    tokens = token_signals(model, example, rc_heads)
    return {
        "rc_peak": float(tokens["peak"].mean()),
        "rc_peak_selected": float(tokens["peak_selected"].mean()),
        "logprob": float(tokens["logprob"].mean()),
        "neg_entropy": float(-tokens["entropy"].mean()),
        "lookback": float(tokens["lookback"].mean()),
        "lookback_rc": float(tokens["lookback_rc"].mean()),
    }


def answer_signals(
    attributor: RCAttributor, context: str, question: str, gen_args: dict[str, Any], rng: random.Random
) -> dict[str, Any]:
    """Generate the model's answer to ``question`` over ``context`` and compute every signal for it."""
    inp = ContextInput(context, question)
    result = attributor.attribute(inp, target=None, granularity="sentence", gen_args=gen_args)
    assert result.head_selection is not None and result.groundedness is not None
    head_scores = result.head_selection.scores.double()
    example = attributor.prepare(inp, target=result.answer, granularity="sentence")
    return {
        "answer": result.answer,
        "rc_context_heads": float((head_scores > 0.5).double().mean()),
        "rc_superiority": float(head_scores.mean()),
        "rc_selected": float(head_scores[tuple(result.head_selection.heads.T)].mean()),
        "rc_groundedness": float(result.groundedness.double().mean()),
        **baseline_signals(attributor.model, example, result.head_selection.heads),
        "random": rng.random(),
    }


def auroc_table(
    rows: Sequence[dict[str, Any]], reference: str = "lookback", n_boot: int = 2000, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Per signal, the AUROC of own (positive) against other, with a 95% bootstrap interval over questions
    (a resample keeps a question's two answers together), and its paired difference to ``reference``."""
    by_id: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_id.setdefault(row["id"], {})[row["condition"]] = row
    complete = [pair for pair in by_id.values() if set(pair) == set(CONDITIONS)]
    labels = np.array([1] * len(complete) + [0] * len(complete))
    draws = np.random.default_rng(seed).integers(0, len(complete), size=(n_boot, len(complete)))

    def aurocs(signal: str) -> tuple[float, np.ndarray]:
        own = np.array([pair["own"][signal] for pair in complete])
        other = np.array([pair["other"][signal] for pair in complete])
        resampled = [roc_auc_score(labels, np.concatenate([own[d], other[d]])) for d in draws]
        return float(roc_auc_score(labels, np.concatenate([own, other]))), np.array(resampled)

    base, base_draws = aurocs(reference)
    table: dict[str, dict[str, float]] = {}
    for signal in SIGNALS:
        value, resampled = (base, base_draws) if signal == reference else aurocs(signal)
        summary = resampled_summary(value, resampled, base, base_draws, reference)
        table[signal] = {**summary, "questions": len(complete)}
    return table


def markdown(table: dict[str, dict[str, float]], reference: str = "lookback") -> str:
    lines = [
        f"| signal | AUROC | 95% interval | minus {reference} (paired 95% interval) |",
        "|---|---:|---|---|",
        *(
            f"| {name} | {v['auroc']:.3f} | [{v['low']:.3f}, {v['high']:.3f}] | "
            f"{v[f'minus_{reference}']:+.3f} [{v['difference_low']:+.3f}, {v['difference_high']:+.3f}] |"
            for name, v in table.items()
        ),
    ]
    n = next(iter(table.values()))["questions"] if table else 0
    return (
        f"Context relevance, SQuAD v2 dev, {n} questions (own paragraph vs another article's)\n\n"
        + "\n".join(lines)
        + "\n"
    )


def run_relevance(
    attributor: RCAttributor | None, store: RunStore, args: argparse.Namespace
) -> dict[str, Any]:
    """The context-relevance rows (resuming; none computed without an attributor), and their AUROC table."""
    gen_args = {"max_new_tokens": args.max_new_tokens, "do_sample": False}
    pairs = relevance_pairs(args.limit, args.seed)
    keys = [f"{pair.id}:{condition}" for pair in pairs for condition in CONDITIONS]
    todo = set(store.todo("signals", keys, key=record_id)) if attributor is not None else set()
    if attributor is not None:
        announce_resume(store.out, len(keys) - len(todo), len(keys), "context-relevance answers")
    rng = random.Random(args.seed)
    with store.appending("signals") as write:
        for pair in tqdm(pairs, desc="context relevance", disable=not todo):
            for condition in CONDITIONS:
                key = f"{pair.id}:{condition}"
                draw = rng.random()  # drawn for every row, so a resumed run gives the same values
                if key not in todo or attributor is None:
                    continue
                context = pair.own if condition == "own" else pair.other
                row = answer_signals(attributor, context, pair.question, gen_args, random.Random(draw))
                write({"id": key, "question": pair.id, "condition": condition, **row})
    rows = [{**row, "id": row["question"]} for row in store.done("signals", keys, key=record_id).values()]
    return auroc_table(rows, seed=args.seed)


def run_unsupported(
    attributor: RCAttributor | None, store: RunStore, args: argparse.Namespace
) -> dict[str, dict[str, dict[str, float]]]:
    """The unsupported-token rows of each dataset (resuming; none computed without an attributor), and
    their token AUROC tables."""
    tables = {}
    for dataset in args.datasets:
        edited = edit_answers(load_attribution(dataset, limit=args.records), args.seed, args.max_edits)
        stem = f"tokens-{dataset}"
        keys = [e.record.id for e in edited]
        todo = set(store.todo(stem, keys, key=record_id)) if attributor is not None else set()
        if attributor is not None:
            announce_resume(store.out, len(keys) - len(todo), len(keys), f"edited {dataset} answers")
        with store.appending(stem) as write:
            for answer in tqdm(edited, desc=f"unsupported tokens ({dataset})", disable=not todo):
                if answer.record.id not in todo or attributor is None:
                    continue
                rng = random.Random(f"{args.seed}:{answer.record.id}")
                edits = [asdict(edit) for edit in answer.edits]
                write(
                    {
                        "id": answer.record.id,
                        "edits": edits,
                        **unsupported_tokens.token_rows(attributor, answer, rng),
                    }
                )
        rows = list(store.done(stem, keys, key=record_id).values())
        tables[dataset] = unsupported_tokens.token_auroc_table(rows, seed=args.seed)
    return tables


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.groundedness",
        description=(
            "Groundedness benchmarks: context relevance on SQuAD v2 (AUROC of answer-level context-reliance "
            "signals) and unsupported tokens in edited QuoteSum / Veri-Gran answers (token-level AUROC), "
            "RC against log-probability, entropy, lookback ratio and random."
        ),
    )
    parser.add_argument(
        "--task",
        nargs="+",
        choices=TASKS,
        default=list(TASKS),
        help="benchmarks to run (default: both)",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=200,
        help="context relevance: answerable questions (default 200)",
    )
    parser.add_argument(
        "--records",
        type=positive_int,
        default=None,
        help="unsupported tokens: records read per dataset, before keeping those with an edit (default all)",
    )
    parser.add_argument(
        "--out", default="runs/groundedness", help="run folder (resumes; default runs/groundedness)"
    )
    parser.add_argument(
        "--model", default=None, help="model path or hub id (default: the offline default model)"
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=32,
        help="context relevance: answer length cap (default 32)",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=("quotesum", "verigran"),
        default=["quotesum", "verigran"],
        help="unsupported tokens: datasets (default: both)",
    )
    parser.add_argument(
        "--max-edits", type=positive_int, default=2, help="unsupported tokens: edits per answer (default 2)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="other-paragraph draw, edits and random signal (default 0)"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: write the report from the rows on disk (the model is not loaded)",
    )
    args = parser.parse_args(argv)

    with run_folder(args.out, Shard(), args.report_only):
        run(args)


def run(args: argparse.Namespace) -> None:
    """The benchmarks of the command line ``args``, in its run folder (held by the caller)."""
    from rcattr.models import load_model

    store = RunStore(args.out, rows="records")
    settings = {"model": args.model, "max_new_tokens": args.max_new_tokens, "seed": args.seed}
    if "unsupported" in args.task:  # a context-relevance run folder from before the edits resumes as it was
        settings["max_edits"] = args.max_edits
    store.claim(settings)  # before the model loads: a folder of another run is refused at once
    torch.set_grad_enabled(False)
    attributor = None if args.report_only else RCAttributor(*load_model(args.model))
    results: dict[str, Any] = {}
    report = []
    if "relevance" in args.task:
        results["context_relevance"] = run_relevance(attributor, store, args)
        report.append(markdown(results["context_relevance"]))
    if "unsupported" in args.task:
        results["unsupported_tokens"] = run_unsupported(attributor, store, args)
        report.append(unsupported_tokens.markdown(results["unsupported_tokens"]))
    store.write_report(results, "\n".join(report))
    print("\n".join(report))
