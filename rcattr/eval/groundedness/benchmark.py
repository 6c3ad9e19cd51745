"""The groundedness benchmarks (`python -m rcattr.eval.groundedness`): is the answer supported by the context?

    python -m rcattr.eval.groundedness --out runs/groundedness

Tasks, `--task` any of them (default all but `errors` and `attributionbench`):

- answer level, paired ([`rcattr.eval.groundedness.pairs`][rcattr.eval.groundedness.pairs]): `relevance` (own paragraph vs another
  article's), `unanswerable` (an answerable vs an unanswerable SQuAD v2 question over one paragraph) and
  `removed` (the paragraph with and without the answer's sentence). The model answers every question
  (greedy, up to `--max-new-tokens`); each answer-level signal ([`rcattr.eval.groundedness.answer_level`][rcattr.eval.groundedness.answer_level])
  gets the AUROC of telling the supported answer from the other, with a 95% bootstrap interval over pairs
  and the paired difference to the lookback ratio over all heads;
- token level: `unsupported` ([`rcattr.eval.groundedness.unsupported_tokens`][rcattr.eval.groundedness.unsupported_tokens]): edited QuoteSum and
  Veri-Gran gold answers, the token AUROC of every token signal and the flag rates of the result's cut-off;
- claim level: `errors` ([`rcattr.eval.groundedness.natural_errors`][rcattr.eval.groundedness.natural_errors]), the model's own SQuAD answers, and
  `attributionbench` ([`rcattr.eval.groundedness.attributionbench`][rcattr.eval.groundedness.attributionbench]), sentences of real answer engines
  labelled by people, the AUROC and macro-F1 of the library's support and marks, its levers and baselines
  ([`rcattr.eval.groundedness.claim_report`][rcattr.eval.groundedness.claim_report]).

Rows are appended to `OUT/records/*.jsonl` as they finish, so a run resumes where it stopped;
`OUT/results.json` and `results.md` are rewritten at the end.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import torch
from tqdm import tqdm

from rcattr.eval.common.datasets import load_attribution
from rcattr.eval.common.run_store import StoredRun, record_id
from rcattr.eval.groundedness import answer_level, natural_errors, self_calibration, unsupported_tokens
from rcattr.eval.groundedness.answer_edits import edit_answers
from rcattr.eval.groundedness.attributionbench import claim_row, heads_row, load_claims
from rcattr.eval.groundedness.claim_report import claim_report
from rcattr.eval.groundedness.pairs import TASKS as PAIRED_TASKS
from rcattr.eval.groundedness.pairs import PairedTask

if TYPE_CHECKING:
    from rcattr.attribution.attributor import RCAttributor


def rows_stem(task: PairedTask) -> str:
    """The rows file of a paired task (`signals` for context relevance, as the first runs wrote it)."""
    return "signals" if task.name == "relevance" else f"signals-{task.name}"


class GroundednessRun(StoredRun):
    """The groundedness benchmarks' rows under `OUT/records`, those missing computed with the default
    [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] (the model loads only then), and the report of every task asked for.

    `args` holds the command line's settings ([`rcattr.eval.groundedness.cli`][rcattr.eval.groundedness.cli]): `task`, `limit`,
    `records`, `model`, `max_new_tokens`, `datasets`, `max_edits`, `claims_file` and `seed`.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        settings = {"model": args.model, "max_new_tokens": args.max_new_tokens, "seed": args.seed}
        if (
            "unsupported" in args.task
        ):  # a context-relevance run folder from before the edits resumes as it was
            settings["max_edits"] = args.max_edits
        if "attributionbench" in args.task:
            settings["claims_file"] = str(args.claims_file)
        super().__init__(args.out, settings, (), rows="records")
        self.args = args
        self.gen_args = {"max_new_tokens": args.max_new_tokens, "do_sample": False}
        self.paired = [task for task in PAIRED_TASKS.values() if task.name in args.task]
        self.pairs = {task.name: task.pairs(args.limit, args.seed) for task in self.paired}
        self.edited = (
            {
                dataset: edit_answers(
                    load_attribution(dataset, limit=args.records), args.seed, args.max_edits
                )
                for dataset in args.datasets
            }
            if "unsupported" in args.task
            else {}
        )
        self.questions = natural_errors.questions(args.limit, args.seed) if "errors" in args.task else []
        self.claims = (
            load_claims(args.claims_file, args.records, args.seed) if "attributionbench" in args.task else []
        )
        self.made = self_calibration.made_claims(self.claims, args.seed) if self.claims else []
        self.keys = self._row_keys()

    def _row_keys(self) -> dict[str, list[str]]:
        """Every rows file of the run and the keys of its rows, in order."""
        keys = {
            rows_stem(task): [
                f"{pair.id}:{condition}" for pair in self.pairs[task.name] for condition in task.conditions
            ]
            for task in self.paired
        }
        keys.update(
            {f"tokens-{dataset}": [e.record.id for e in edited] for dataset, edited in self.edited.items()}
        )
        if self.questions:
            keys["errors"] = [record.id for record in self.questions]
        if self.claims:
            keys["claims"] = keys["claim-heads"] = [record.id for record in self.claims]
            keys["self-calibration"] = [key for key, _, _ in self.made]
        return keys

    def missing(self) -> int:
        return sum(len(self.store.todo(stem, keys, key=record_id)) for stem, keys in self.keys.items())

    def size(self) -> int:
        return sum(map(len, self.keys.values()))

    def compute(self) -> None:
        """Every task's rows not on disk yet."""
        if not self.missing():
            return
        from rcattr.attribution.attributor import RCAttributor
        from rcattr.runtime.models import load_model

        torch.set_grad_enabled(False)
        # the unsupervised status: the shipped probes were fitted on AttributionBench dev, which these tasks read
        attributor = RCAttributor(*load_model(self.args.model), probe=None)
        for task in self.paired:
            self._compute_paired(task, attributor)
        for dataset in self.edited:
            self._compute_unsupported(dataset, attributor)
        if self.questions:
            self._compute_errors(attributor)
        if self.claims:
            self._compute_claims(attributor)
            self._compute_made(attributor)

    def _todo(self, stem: str) -> set[str]:
        return set(self.store.todo(stem, self.keys[stem], key=record_id))

    def _compute_paired(self, task: PairedTask, attributor: RCAttributor) -> None:
        todo, rng = self._todo(rows_stem(task)), random.Random(self.args.seed)
        with self.store.appending(rows_stem(task)) as write:
            for pair in tqdm(self.pairs[task.name], desc=task.name, disable=not todo):
                for condition, answering in zip(
                    task.conditions, (pair.supported, pair.unsupported), strict=True
                ):
                    key = f"{pair.id}:{condition}"
                    draw = rng.random()  # drawn for every row, so a resumed run gives the same values
                    if key not in todo:
                        continue
                    row = answer_level.answer_signals(
                        attributor, answering, self.gen_args, random.Random(draw)
                    )
                    write({"id": key, "question": pair.id, "condition": condition, **row})

    def _compute_unsupported(self, dataset: str, attributor: RCAttributor) -> None:
        stem = f"tokens-{dataset}"
        todo = self._todo(stem)
        with self.store.appending(stem) as write:
            for answer in tqdm(
                self.edited[dataset], desc=f"unsupported tokens ({dataset})", disable=not todo
            ):
                if answer.record.id not in todo:
                    continue
                rng = random.Random(f"{self.args.seed}:{answer.record.id}")
                edits = [asdict(edit) for edit in answer.edits]
                write(
                    {
                        "id": answer.record.id,
                        "edits": edits,
                        **unsupported_tokens.token_rows(attributor, answer, rng),
                    }
                )

    def _compute_errors(self, attributor: RCAttributor) -> None:
        todo = self._todo("errors")
        with self.store.appending("errors") as write:
            for record in tqdm(self.questions, desc="natural errors", disable=not todo):
                if record.id in todo:
                    write({"id": record.id, **natural_errors.answer_row(attributor, record, self.gen_args)})

    def _compute_claims(self, attributor: RCAttributor) -> None:
        """Each claim's row and its per-head row; a run whose claims were written before the rows had heads
        computes the heads alone (one forward each)."""
        todo, todo_heads = self._todo("claims"), self._todo("claim-heads")
        with self.store.appending("claims") as write, self.store.appending("claim-heads") as write_heads:
            for index, record in enumerate(
                tqdm(self.claims, desc="AttributionBench claims", disable=not (todo or todo_heads))
            ):
                if record.id in todo:  # one claim in 8 times a plain forward too, the unit of cost
                    row, heads = claim_row(attributor, record, time_forward=index % 8 == 0)
                    write(row)
                    write_heads(heads)
                elif record.id in todo_heads:
                    write_heads(heads_row(attributor, record))

    def _compute_made(self, attributor: RCAttributor) -> None:
        todo = self._todo("self-calibration")
        with self.store.appending("self-calibration") as write:
            for key, inputs, answer in tqdm(self.made, desc="self-made claims", disable=not todo):
                if key in todo:
                    write(self_calibration.made_row(attributor, key, inputs, answer))

    def _rows(self, stem: str) -> list[dict[str, Any]]:
        return list(self.store.done(stem, self.keys[stem], key=record_id).values())

    def report(self) -> dict[str, Any]:
        """Each task's tables from the rows on disk, written as `results.json` and `results.md`."""
        seed = self.args.seed
        results: dict[str, Any] = {}
        report = []
        for task in self.paired:
            rows = [{**row, "id": row["question"]} for row in self._rows(rows_stem(task))]
            results[task.name] = answer_level.auroc_table(rows, task.conditions, seed=seed)
            report.append(answer_level.markdown(results[task.name], task.description))
        if self.edited:
            results["unsupported_tokens"] = {
                dataset: unsupported_tokens.token_auroc_table(self._rows(f"tokens-{dataset}"), seed=seed)
                for dataset in self.edited
            }
            report.append(unsupported_tokens.markdown(results["unsupported_tokens"]))
        if self.questions:
            results["natural_errors"], text = natural_errors.report(
                self._rows("errors"), self.questions, seed
            )
            report.append(text)
        if self.claims:
            results["attributionbench"], text = claim_report(
                self._rows("claims"),
                seed,
                heads=self._rows("claim-heads"),
                made=self._rows("self-calibration"),
            )
            report.append(text)
        self.store.write_report(results, "\n".join(report))
        print("\n".join(report))
        return results
