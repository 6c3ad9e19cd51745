"""The citation benchmark's run ([`CitationRun`][rcattr.eval.citations.benchmark.CitationRun]): one line per record under `OUT/records`, then the report
(the command line: [`rcattr.eval.citations.cli`][rcattr.eval.citations.cli]).

Each record's gold answer is attributed by the default [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] to the record's
documents (`granularity="chunk"`), one output unit per answer sentence, and its line keeps what any
citation rule needs ([`rcattr.eval.citations.rows`][rcattr.eval.citations.rows]). The report ([`rcattr.eval.citations.rules`][rcattr.eval.citations.rules])
chooses the rule on the dev part and gives precision and recall of the cited documents on both parts.
Rows are appended as they finish, so a run resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tqdm.auto import tqdm

from rcattr.attribution.head_statistics import token_statistics
from rcattr.eval.attribution.method import context_input
from rcattr.eval.citations import rules
from rcattr.eval.citations.foreign import foreign_markdown, foreign_tables
from rcattr.eval.citations.rows import foreign_sentence, held_back, sentence_rows
from rcattr.eval.common.datasets import BenchmarkRecord, load_attribution
from rcattr.eval.common.run_store import StoredRun, record_id
from rcattr.eval.groundedness.sentence_signals import citation_signals

if TYPE_CHECKING:
    from rcattr.attribution.attributor import RCAttributor

STEMS = ("sentences", "appended")  # the rows files: the gold answer's sentences; a foreign sentence appended


class CitationRun(StoredRun):
    """The citation benchmark's rows under `OUT/records` (`sentences-DATASET` and `appended-DATASET`), each
    record's computed when missing (the model loads only then), and the report from them.

    Parameters
    ----------
    out : str or Path
        The run folder.
    datasets : sequence of str
        From `DATASETS`.
    limit : int or None
        The first records of each dataset.
    model : str or None
        The model (None: the offline default).
    max_tokens : int
        A record whose prompt and answer take more gets a line that says so.
    seed : int
        The appended sentences' draw and the bootstrap.
    """

    def __init__(
        self,
        out: str | Path,
        datasets: Sequence[str],
        limit: int | None,
        model: str | None,
        max_tokens: int,
        seed: int,
    ) -> None:
        super().__init__(out, {"model": model, "max_tokens": max_tokens, "seed": seed}, (), rows="records")
        self.model, self.max_tokens, self.seed = model, max_tokens, seed
        self.pools = {dataset: load_attribution(dataset) for dataset in datasets}
        self.records = {dataset: pool[:limit] for dataset, pool in self.pools.items()}

    def _todo(self, dataset: str, stem: str) -> list[str]:
        return self.store.todo(f"{stem}-{dataset}", [r.id for r in self.records[dataset]], key=record_id)

    def missing(self) -> int:
        return sum(len(self._todo(dataset, stem)) for dataset in self.records for stem in STEMS)

    def size(self) -> int:
        return len(STEMS) * sum(map(len, self.records.values()))

    def compute(self) -> None:
        """Each dataset's missing lines: each answer sentence, and in `appended` the sentence of another
        question appended to the answer."""
        if not self.missing():
            return
        from rcattr.attribution.attributor import RCAttributor
        from rcattr.runtime.models import load_model

        torch.set_grad_enabled(False)
        attributor = RCAttributor(*load_model(self.model))
        for dataset, records in self.records.items():
            for stem in STEMS:
                todo = set(self._todo(dataset, stem))
                with self.store.appending(f"{stem}-{dataset}") as write:
                    for record in tqdm(records, desc=f"citations ({dataset}, {stem})", disable=not todo):
                        if record.id in todo:
                            pool = self.pools[dataset]
                            sentence = (
                                foreign_sentence(record, pool, self.seed) if stem == "appended" else None
                            )
                            write(_line(attributor, record, sentence, self.max_tokens))

    def lines(self, dataset: str) -> list[dict[str, Any]]:
        """The lines of `dataset` on disk, each with the `foreign` sentences of its appended line."""
        keys = [record.id for record in self.records[dataset]]
        answers, foreign = (self.store.done(f"{stem}-{dataset}", keys, key=record_id) for stem in STEMS)
        return [
            {**line, "foreign": foreign[key].get("sentences", [])} if key in foreign else line
            for key, line in answers.items()
        ]

    def report(self) -> dict[str, Any]:
        """The rule chosen on the dev part, its scores on both parts, and the appended sentences' table."""
        lines = {dataset: self.lines(dataset) for dataset in self.records}
        results = rules.evaluate(lines, seed=self.seed)
        appended = foreign_tables(rules.labelled(lines), seed=self.seed)
        markdown = rules.markdown(results)
        if appended:  # rows with the sentences' support
            results["appended"] = appended
            markdown += "\n" + foreign_markdown(appended)
        self.store.write_report(results, markdown)
        print(markdown)
        return results


def _line(
    attributor: RCAttributor, record: BenchmarkRecord, foreign: str | None, max_tokens: int
) -> dict[str, Any]:
    """One record's line: its answer's sentences, or with `foreign` appended, that sentence alone."""
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
