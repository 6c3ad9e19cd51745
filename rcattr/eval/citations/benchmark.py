"""The citation benchmark's command line and run: one line per record under ``OUT/records``, then the report.

    python -m rcattr.eval.citations --out runs/citations

Each record's gold answer is attributed by the default :class:`~rcattr.RCAttributor` to the record's
documents (``granularity="chunk"``), one output unit per answer sentence, and its line keeps what any
citation rule needs (:mod:`rcattr.eval.citations.rows`). The report (:mod:`rcattr.eval.citations.rules`)
chooses the rule on the dev part and gives precision and recall of the cited documents on both parts.
Rows are appended as they finish, so a run resumes where it stopped.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import torch
from tqdm.auto import tqdm

from rcattr.attributor import RCAttributor
from rcattr.eval.attribution.method import context_input
from rcattr.eval.citations import rules
from rcattr.eval.citations.foreign import foreign_markdown, foreign_tables
from rcattr.eval.citations.rows import foreign_sentence, held_back, sentence_rows
from rcattr.eval.common.datasets import DATA_HELP, AttributionRecord, load_attribution
from rcattr.eval.common.run_args import run_folder
from rcattr.eval.common.run_store import RunStore, announce_resume, record_id
from rcattr.eval.common.sharding import Shard
from rcattr.eval.groundedness.context_signals import token_statistics
from rcattr.eval.groundedness.sentence_signals import citation_signals
from rcattr.options import positive_int

DATASETS = ("quotesum", "verigran")
STEMS = ("sentences", "appended")  # the rows files: the gold answer's sentences; a foreign sentence appended


def run_dataset(
    dataset: str, attributor: RCAttributor | None, store: RunStore, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The lines of ``dataset``'s records (computing the missing ones unless ``attributor`` is None): each
    answer sentence, and in ``foreign`` the sentence of another question appended to the answer. A record
    whose prompt and answer take more than ``--max-tokens`` gets a line that says so."""
    pool = load_attribution(dataset)
    records = pool[: args.limit]
    keys = [record.id for record in records]
    for stem in STEMS:
        todo = set(store.todo(f"{stem}-{dataset}", keys, key=record_id)) if attributor is not None else set()
        if attributor is not None:
            announce_resume(store.out, len(keys) - len(todo), len(keys), f"{dataset} records ({stem})")
        with store.appending(f"{stem}-{dataset}") as write:
            for record in tqdm(records, desc=f"citations ({dataset}, {stem})", disable=not todo):
                if record.id in todo and attributor is not None:
                    sentence = foreign_sentence(record, pool, args.seed) if stem == "appended" else None
                    write(_line(attributor, record, sentence, args.max_tokens))
    answers, foreign = (store.done(f"{stem}-{dataset}", keys, key=record_id) for stem in STEMS)
    return [
        {**line, "foreign": foreign[key].get("sentences", [])} if key in foreign else line
        for key, line in answers.items()
    ]


def _line(
    attributor: RCAttributor, record: AttributionRecord, foreign: str | None, max_tokens: int
) -> dict[str, Any]:
    """One record's line: its answer's sentences, or with ``foreign`` appended, that sentence alone."""
    inp = context_input(record)
    answer = record.answer if foreign is None else f"{record.answer} {foreign}"
    length = attributor.prepare(inp, answer, "chunk").ids.shape[1]
    if length > max_tokens:
        return {"id": record.id, "skipped": f"{length} tokens, more than --max-tokens {max_tokens}"}
    units: str | list[tuple[int, int]] = (
        "sentence" if foreign is None else [(len(answer) - len(foreign), len(answer))]
    )
    result = attributor.attribute(inp, answer, granularity="chunk", output_granularity=units)
    statistics = token_statistics(attributor.model, attributor.prepare(inp, answer, "chunk"))
    citations = result.citations()
    rows = sentence_rows(result, record)
    for row in rows:  # each unit is one sentence, and so one citation
        (citation,) = [c for c in citations if c.start < row["end"] and row["start"] < c.end]
        row.update(citation_signals(result, citation, statistics))
    return {"id": record.id, "question": record.question, "held_back": held_back(record), "sentences": rows}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.citations",
        description=(
            "Citation benchmark: per answer sentence of the QuoteSum and Veri-Gran gold answers, the documents "
            "result.citations() cites against the gold labels. The rule (share of the best document, most "
            "sources, least context reliance) is chosen on the dev part (two questions in three) and checked "
            "on the held-back part; precision, recall and F1 with 95%% bootstrap intervals over records. "
            + DATA_HELP
        ),
    )
    parser.add_argument(
        "--out", default="runs/citations", help="run folder (resumes; default runs/citations)"
    )
    parser.add_argument(
        "--datasets", nargs="+", choices=DATASETS, default=list(DATASETS), help="datasets (default: both)"
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="first N records per dataset")
    parser.add_argument(
        "--model", default=None, help="model path or hub id (default: the offline default model)"
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        default=4096,
        help="skip records whose prompt and answer take more tokens (default 4096, as the attribution benchmark)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the appended sentences' draw and the bootstrap (default 0)"
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
    """The benchmark of the command line ``args``, in its run folder (held by the caller)."""
    from rcattr.models import load_model

    store = RunStore(args.out, rows="records")
    # before the model loads: a folder of another run is refused at once
    store.claim({"model": args.model, "max_tokens": args.max_tokens, "seed": args.seed})
    torch.set_grad_enabled(False)
    attributor = None if args.report_only else RCAttributor(*load_model(args.model))
    lines = {dataset: run_dataset(dataset, attributor, store, args) for dataset in args.datasets}
    results = rules.evaluate(lines, seed=args.seed)
    appended = foreign_tables(rules.labelled(lines), seed=args.seed)
    markdown = rules.markdown(results)
    if appended:  # rows with the sentences' support (issue 50)
        results["appended"] = appended
        markdown += "\n" + foreign_markdown(appended)
    store.write_report(results, markdown)
    print(markdown)
