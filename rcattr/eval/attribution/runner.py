"""The attribution benchmark's runner: [`AttributionBenchmark`][rcattr.eval.attribution.runner.AttributionBenchmark] runs the methods of a registry over
a dataset, one line per (method, record) in its run folder, then writes the report from every line there."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm
from transformers import PreTrainedModel

from rcattr.baselines import RandomAttributor
from rcattr.eval.attribution.config import PROTOCOL, RESUMABLE_CHANGES, BenchmarkConfig
from rcattr.eval.attribution.faithfulness import faithfulness
from rcattr.eval.attribution.lengths import load_records
from rcattr.eval.attribution.long_context import distractor_passages, long_records, passage_tokens
from rcattr.eval.attribution.method import AttributionMethod, Row, context_input
from rcattr.eval.attribution.methods import AttributionMethods, default_methods
from rcattr.eval.attribution.report import markdown_table
from rcattr.eval.attribution.results import chunk_scores, summarise
from rcattr.eval.common.datasets import BenchmarkRecord
from rcattr.eval.common.memory import PeakMemory
from rcattr.eval.common.run_store import StoredRun, record_id
from rcattr.eval.common.sharding import Shard
from rcattr.protocols import TokenizerLike


class AttributionBenchmark(StoredRun):
    """Runs the methods of `config` over a dataset (or over `shard` of its records), writing one line per
    record and method under `out/records` (`METHOD.jsonl`, [`RunStore`][rcattr.eval.common.run_store.RunStore]).

    Parameters
    ----------
    config : BenchmarkConfig
        What the run measures; `config.methods` name methods of `methods`.
    model, tokenizer
        The model whose answers are attributed, and its tokenizer.
    out : str or Path
        The run folder; a run already there is resumed (its settings must match `config`).
    shard : Shard, optional
        The records this process runs. Default: all of them.
    methods : MethodRegistry, optional
        The methods the run may use, by name. Default: [`default_methods`][rcattr.eval.attribution.methods.default_methods].
        The report covers every method of the registry with lines in the folder.
    """

    def __init__(
        self,
        config: BenchmarkConfig,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        out: str | Path,
        shard: Shard | None = None,
        *,
        methods: AttributionMethods | None = None,
    ) -> None:
        self.methods = default_methods() if methods is None else methods
        self.methods.check(config.methods)  # refused before the folder is claimed
        super().__init__(out, asdict(config), RESUMABLE_CHANGES, rows="records", shard=shard)
        self.config, self.model, self.tokenizer = config, model, tokenizer
        text = model.config.get_text_config()
        self.total_heads = text.num_hidden_layers * text.num_attention_heads
        self.records, self.too_long = self._records()

    def _records(self) -> tuple[list[BenchmarkRecord], int]:
        """Records with gold spans that fit `max_tokens` and the model's window (stretched to the run's long
        context, when it has one), and how many did not."""
        loaded = load_records(self.config.dataset, self.config.split, self.config.lines())
        records = [r for r in loaded[self.config.skip or 0 :] if r.gold]
        sizer = RandomAttributor(self.model, self.tokenizer)

        def length(record: BenchmarkRecord) -> int | None:
            try:
                return int(sizer.prepare(context_input(record), record.answer, "chunk").ids.shape[1])
            except ValueError as error:
                if "window" not in str(error):
                    raise
                return None

        lengths = [length(record) for record in records]
        limit = self.config.max_tokens
        fitting = [
            r
            for r, n in zip(records, lengths, strict=True)
            if n is not None and (limit is None or n <= limit)
        ]
        stretch = self.config.long_context
        if stretch is not None:
            window = self.model.config.get_text_config().max_position_embeddings
            if stretch.tokens > window:
                raise ValueError(
                    f"--context-tokens {stretch.tokens} exceeds the model's window of {window} tokens"
                )
            fitting = long_records(
                fitting,
                stretch,
                distractor_passages(self.config.dataset, self.config.split),
                lambda record: length(record) or window + 1,
                passage_tokens(self.tokenizer),
            )
        self.prompt_tokens = [length(record) or 0 for record in fitting]
        return fitting, len(records) - len(fitting)

    def _done(self, step: str) -> dict[str, Row]:
        """`step`'s lines on disk (every shard's), by record id in the records' order."""
        return self.store.done(step, [record.id for record in self.records], record_id)

    def _steps(self) -> dict[str, list[BenchmarkRecord]]:
        """The records of each step of the whole run: every method, then the faithfulness pass."""
        steps = {method: self.records[: self.config.records_for(method)] for method in self.config.methods}
        if self.config.faithfulness:
            steps["faithfulness"] = [r for r in self.records[: self.config.faithfulness] if len(r.chunks) > 1]
        return steps

    def missing(self) -> int:
        """How many (step, record) runs are not on disk yet (all shards)."""
        return sum(
            len(self.store.todo(step, [r.id for r in records], record_id))
            for step, records in self._steps().items()
        )

    def size(self) -> int:
        """How many (step, record) runs the whole run has."""
        return sum(map(len, self._steps().values()))

    def compute(self) -> None:
        """Run this shard's records of every method, then its faithfulness pass."""
        for name in self.config.methods:
            self._run_method(self.methods[name])
        if self.config.faithfulness:
            self._run_faithfulness()

    def report(self) -> dict[str, Any]:
        """Write `results.json`, `results.md` and the methods' figures from every line on disk; returns
        the results."""
        results = self.results()
        self.store.write_report(results, markdown_table(results))
        for method in self.methods.values():
            method.figures(results, self.out)
        return results

    def _run_method(self, method: AttributionMethod[Any]) -> None:
        records = self.shard.take(self.records[: self.config.records_for(method.name)])
        done = self._done(method.name)
        todo = [record for record in records if record.id not in done]
        if not todo:
            return
        built = method.build(self.model, self.tokenizer, self.config)
        size = self.config.batch_size
        with (
            self.store.appending(method.name) as write,  # a partial row set aside first
            PeakMemory() as peak,
            tqdm(
                total=len(todo), desc=f"{self.config.dataset}/{method.name}{self.shard.label}", unit="record"
            ) as bar,
        ):
            for first in range(0, len(todo), size):
                batch = todo[first : first + size]
                start = time.perf_counter()
                rows = method.rows(built, batch, self.config)
                seconds = (time.perf_counter() - start) / len(batch)  # a batch's records share its time
                for record, row in zip(batch, rows, strict=True):
                    write({"id": record.id, **row, "seconds": seconds})
                bar.update(len(batch))
        with self.store.appending("peak_memory") as write:
            write({"method": method.name, "mib": peak.mib})

    def _run_faithfulness(self) -> None:
        if self.config.granularity != "chunk":
            raise ValueError("the faithfulness metrics remove whole sources: run with --granularity chunk")
        done = {name: self._done(name) for name in self.methods}
        finished = self._done("faithfulness")
        records = self.shard.take(self.records[: self.config.faithfulness])
        with self.store.appending("faithfulness") as write:
            for record in tqdm(records, desc=f"faithfulness{self.shard.label}", unit="record"):
                if record.id in finished or len(record.chunks) < 2:
                    continue
                metrics = faithfulness(
                    self.model,
                    self.tokenizer,
                    context_input(record),
                    record.answer,
                    chunk_scores(record.id, self.methods, done),
                    ks=(1, 3),
                    n_samples=self.config.lds_samples,
                )
                write({"id": record.id, "metrics": metrics})

    def results(self) -> dict[str, Any]:
        """Aggregate every line on disk into the `results.json` structure."""
        peaks: dict[str, float] = {}
        for row in self.store.rows("peak_memory"):  # the highest of every shard's runs
            peaks[row["method"]] = max(peaks.get(row["method"], 0.0), row["mib"])
        done = {name: self._done(name) for name in self.methods}
        on_disk = [name for name in dict.fromkeys([*self.config.methods, *done]) if done[name]]  # the table's
        header = {
            "config": {**asdict(self.config), "methods": on_disk},
            "model": self.model.config.name_or_path,
            "protocol": PROTOCOL,
            "total_heads": self.total_heads,
            "n_records": len(self.records),
            "skipped_too_long": self.too_long,
            "prompt_tokens": _spread(self.prompt_tokens),
            "documents": _spread([len(record.chunks) for record in self.records]),
        }
        return summarise(header, self.methods, done, peaks, self._done("faithfulness"))


def _spread(values: list[int]) -> dict[str, float]:
    """The mean, least and most of `values` (0s when there are none)."""
    return {
        "mean": sum(values) / max(len(values), 1),
        "min": min(values, default=0),
        "max": max(values, default=0),
    }
