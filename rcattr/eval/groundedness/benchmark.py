"""The groundedness benchmarks (``python -m rcattr.eval.groundedness``): is the answer supported by the context?

    python -m rcattr.eval.groundedness --out runs/groundedness

Four tasks, ``--task`` any of them (default all):

- answer level, paired (:mod:`rcattr.eval.groundedness.pairs`): ``relevance`` (own paragraph vs another
  article's), ``unanswerable`` (an answerable vs an unanswerable SQuAD v2 question over one paragraph) and
  ``removed`` (the paragraph with and without the answer's sentence). The model answers every question
  (greedy, up to ``--max-new-tokens``); each answer-level signal (:mod:`rcattr.eval.groundedness.answer_level`)
  gets the AUROC of telling the supported answer from the other, with a 95% bootstrap interval over pairs
  and the paired difference to the lookback ratio over all heads;
- token level: ``unsupported`` (:mod:`rcattr.eval.groundedness.unsupported_tokens`): edited QuoteSum and
  Veri-Gran gold answers, the token AUROC of every token signal and the flag rates of the result's cut-off.

Rows are appended to ``OUT/records/*.jsonl`` as they finish, so a run resumes where it stopped;
``OUT/results.json`` and ``results.md`` are rewritten at the end.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import torch
from tqdm import tqdm

from rcattr.attributor import RCAttributor
from rcattr.eval.common.datasets import load_attribution
from rcattr.eval.common.run_args import run_folder
from rcattr.eval.common.run_store import RunStore, announce_resume, record_id
from rcattr.eval.common.sharding import Shard
from rcattr.eval.groundedness import answer_level, natural_errors, unsupported_tokens
from rcattr.eval.groundedness.answer_edits import edit_answers
from rcattr.eval.groundedness.pairs import TASKS as PAIRED_TASKS
from rcattr.eval.groundedness.pairs import PairedTask
from rcattr.options import positive_int

TASKS = (*PAIRED_TASKS, "unsupported", "errors")
DEFAULT_TASKS = TASKS[:-1]


def rows_stem(task: PairedTask) -> str:
    """The rows file of a paired task (``signals`` for context relevance, as the first runs wrote it)."""
    return "signals" if task.name == "relevance" else f"signals-{task.name}"


def run_paired(
    task: PairedTask, attributor: RCAttributor | None, store: RunStore, args: argparse.Namespace
) -> dict[str, Any]:
    """A paired task's rows (resuming; none computed without an attributor) and their AUROC table."""
    gen_args = {"max_new_tokens": args.max_new_tokens, "do_sample": False}
    pairs = task.pairs(args.limit, args.seed)
    keys = [f"{pair.id}:{condition}" for pair in pairs for condition in task.conditions]
    stem = rows_stem(task)
    todo = set(store.todo(stem, keys, key=record_id)) if attributor is not None else set()
    if attributor is not None:
        announce_resume(store.out, len(keys) - len(todo), len(keys), f"{task.name} answers")
    rng = random.Random(args.seed)
    with store.appending(stem) as write:
        for pair in tqdm(pairs, desc=task.name, disable=not todo):
            for condition, answering in zip(task.conditions, (pair.supported, pair.unsupported), strict=True):
                key = f"{pair.id}:{condition}"
                draw = rng.random()  # drawn for every row, so a resumed run gives the same values
                if key not in todo or attributor is None:
                    continue
                row = answer_level.answer_signals(attributor, answering, gen_args, random.Random(draw))
                write({"id": key, "question": pair.id, "condition": condition, **row})
    rows = [{**row, "id": row["question"]} for row in store.done(stem, keys, key=record_id).values()]
    return answer_level.auroc_table(rows, task.conditions, seed=args.seed)


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


def run_errors(
    attributor: RCAttributor | None, store: RunStore, args: argparse.Namespace
) -> tuple[dict[str, Any], str]:
    """The natural-error rows (:mod:`rcattr.eval.groundedness.natural_errors`), resuming (none computed
    without an attributor), and their tables and markdown."""
    gen_args = {"max_new_tokens": args.max_new_tokens, "do_sample": False}
    records = natural_errors.questions(args.limit, args.seed)
    keys = [record.id for record in records]
    todo = set(store.todo("errors", keys, key=record_id)) if attributor is not None else set()
    if attributor is not None:
        announce_resume(store.out, len(keys) - len(todo), len(keys), "SQuAD answers")
    with store.appending("errors") as write:
        for record in tqdm(records, desc="natural errors", disable=not todo):
            if record.id in todo and attributor is not None:
                write({"id": record.id, **natural_errors.answer_row(attributor, record, gen_args)})
    rows = list(store.done("errors", keys, key=record_id).values())
    return natural_errors.report(rows, records, args.seed)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.groundedness",
        description=(
            "Groundedness benchmarks: is the model's answer supported by the context? Answer level on SQuAD v2 "
            "(relevance: own vs another article's paragraph; unanswerable: answerable vs unanswerable "
            "questions; removed: the paragraph with vs without the answer sentence), AUROC of answer-level "
            "signals; token level on edited QuoteSum / Veri-Gran answers (unsupported), token AUROC and the "
            "result's flag rates. RC against log-probability, entropy, lookback ratio and random."
        ),
    )
    parser.add_argument(
        "--task",
        nargs="+",
        choices=TASKS,
        default=list(DEFAULT_TASKS),
        help="benchmarks to run (default: all but errors, the natural errors of issue 50)",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=200,
        help="answer-level tasks: pairs per task, or questions for errors (default 200)",
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
        help="answer-level tasks: answer length cap (default 32)",
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
        "--seed", type=int, default=0, help="other-paragraph draw, edits and random signals (default 0)"
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
    for task in PAIRED_TASKS.values():
        if task.name in args.task:
            results[task.name] = run_paired(task, attributor, store, args)
            report.append(answer_level.markdown(results[task.name], task.description))
    if "unsupported" in args.task:
        results["unsupported_tokens"] = run_unsupported(attributor, store, args)
        report.append(unsupported_tokens.markdown(results["unsupported_tokens"]))
    if "errors" in args.task:
        results["natural_errors"], text = run_errors(attributor, store, args)
        report.append(text)
    store.write_report(results, "\n".join(report))
    print("\n".join(report))
