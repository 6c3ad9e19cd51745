"""The attribution benchmark: every method side by side on QuoteSum or Veri-Gran.

    python -m rcattr.eval.attribution --dataset quotesum --split dev --out runs/quotesum

Protocol (the RCStat paper's): the gold answer is teacher-forced, the context is the numbered
sources (``Document [i]: ...``) followed by the question, and each gold span of the answer is one
output unit; its prediction is the source of the highest-scoring context span (chunk-level
accuracy, paper Table 1). Each method writes one line per record to ``OUT/records/METHOD.jsonl``
as it goes, so an interrupted run resumes where it stopped; ``--shard I/N`` and ``accelerate launch``
split the records among processes (``rcattr.eval.sharding``) and the report merges them. ``sweep``
is one RC pass per record that scores every head with both span scorers: it gives the top-k / bottom-k curve of the paper's
Fig. 5 and the RC variants of the table (attention over RC top-k, bottom-k and all heads; RC
expectation as the span scorer). ``results.json``, ``results.md`` and ``sweep.png`` are rewritten
at the end from every record on disk.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.attributor import HeadSpanScores, RCAttributor
from rcattr.base import SpanAttributor
from rcattr.baselines import (
    AblationAttributor,
    AttentionAttributor,
    BM25Attributor,
    HiddenStateAttributor,
    HybridAttributor,
    IntegratedGradientsAttributor,
    RandomAttributor,
)
from rcattr.eval.datasets import DATA_HELP, AttributionRecord, load_attribution
from rcattr.eval.faithfulness import faithfulness
from rcattr.eval.memory import PeakMemory
from rcattr.eval.metrics import (
    accuracy,
    bootstrap_interval,
    location_hits,
    paired_difference,
    source_hits,
)
from rcattr.eval.recipes import DEFAULT, PAPER, PAPER_SCORER, RecipeScorer, ablation
from rcattr.eval.runs import add_run_arguments, check_methods, claim_run_folder, load_run_model, parse_methods
from rcattr.eval.sharding import Processes, Shard, read_rows, run_sharded
from rcattr.heads import HeadCount, top_heads
from rcattr.options import parse_head_count
from rcattr.prompting import ContextInput
from rcattr.scorers import RCScorer, SpanScorer
from rcattr.segmentation import TextSpan

METHODS = (
    "rc",
    "rc_paper",
    "sweep",
    "attention",
    "hidden_state",
    "ig",
    "bm25",
    "ablation",
    "random",
    "hybrid",
)  # built in
DEFAULT_METHOD_LIMITS = {"ig": 5, "ablation": 50}  # records; IG costs n_answer_tokens x n_steps passes
RESUMABLE_CHANGES = ("methods", "limit", "method_limits", "faithfulness")  # may differ when resuming
SWEEP_KS = (1, 2, 5, 10, 20, 30, 50, 100, 150, 200)
CURVE_SCORERS = {"attention": PAPER_SCORER, "rc": RCScorer()}  # Fig. 5: the paper's span scorers
PROTOCOL = (
    "gold answer teacher-forced; context = the numbered sources and the question (chat template); "
    "one output unit per gold span; prediction = source of the top-scoring context span"
)


@dataclass(frozen=True)
class BenchmarkConfig:
    """What a run measures; a resumed run must have the same."""

    dataset: str
    split: str = "dev"
    methods: tuple[str, ...] = METHODS
    limit: int | None = None
    method_limits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_METHOD_LIMITS))
    top_k: HeadCount = "outliers"
    granularity: str = "chunk"
    max_tokens: int | None = 4096
    model: str | None = None
    hidden_state_layer: int | None = None
    ig_steps: int = 16
    faithfulness: int = 0
    lds_samples: int = 32

    def records_for(self, method: str) -> int | None:
        """How many records ``method`` runs on (the expensive ones may run on fewer)."""
        own = self.method_limits.get(method)
        if own is None:
            return self.limit
        return own if self.limit is None else min(self.limit, own)


MethodBuilder = Callable[[PreTrainedModel, TokenizerLike, BenchmarkConfig], SpanAttributor]


def _rc(model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig) -> RCAttributor:
    text = model.config.get_text_config()
    top_k = config.top_k
    if isinstance(top_k, int):
        top_k = min(top_k, text.num_hidden_layers * text.num_attention_heads)
    return RCAttributor(model, tokenizer, top_k=top_k)


METHOD_BUILDERS: dict[str, MethodBuilder] = {
    "rc": _rc,
    "rc_paper": lambda model, tokenizer, config: RCAttributor.paper(model, tokenizer),
    "sweep": _rc,  # the same attributor's per-head pass
    "attention": lambda model, tokenizer, config: AttentionAttributor(model, tokenizer),
    "hidden_state": lambda model, tokenizer, config: HiddenStateAttributor(
        model, tokenizer, layer=config.hidden_state_layer
    ),
    "ig": lambda model, tokenizer, config: IntegratedGradientsAttributor(
        model, tokenizer, n_steps=config.ig_steps
    ),
    "bm25": lambda model, tokenizer, config: BM25Attributor(model, tokenizer),
    "ablation": lambda model, tokenizer, config: AblationAttributor(model, tokenizer),
    "random": lambda model, tokenizer, config: RandomAttributor(model, tokenizer),
    "hybrid": lambda model, tokenizer, config: HybridAttributor(model, tokenizer),
}


def register_method(name: str, builder: MethodBuilder) -> None:
    """Make ``name`` a method of the benchmark: ``builder(model, tokenizer, config)`` returns its
    :class:`~rcattr.base.SpanAttributor`, which then runs through the same protocol as the built-in ones."""
    if name in (*METHODS, "faithfulness", "peak_memory"):  # the last two name files of a run folder
        raise ValueError(f"{name!r} is a built-in method name; choose another")
    METHOD_BUILDERS[name] = builder


def build_method(
    name: str, model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig
) -> SpanAttributor:
    """The attributor behind a method name (``sweep`` uses an RCAttributor's per-head pass)."""
    check_methods([name], list(METHOD_BUILDERS))
    return METHOD_BUILDERS[name](model, tokenizer, config)


def _input(record: AttributionRecord) -> ContextInput:
    return ContextInput(record.chunks, record.question)


def _units(record: AttributionRecord) -> list[tuple[int, int]]:
    return [(span.start, span.end) for span in record.gold]


class AttributionBenchmark:
    """Runs the methods of ``config`` over a dataset (or over ``shard`` of its records), writing per-record
    lines under ``out``."""

    def __init__(
        self,
        config: BenchmarkConfig,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        out: str | Path,
        shard: Shard | None = None,
    ) -> None:
        check_methods(config.methods, list(METHOD_BUILDERS))
        self.config, self.model, self.tokenizer = config, model, tokenizer
        self.shard = shard or Shard()
        self.out = Path(out)
        self.records_dir = self.out / "records"
        self.records_dir.mkdir(parents=True, exist_ok=True)
        claim_run_folder(self.out, asdict(self.config), RESUMABLE_CHANGES)
        n_heads = model.config.get_text_config()
        self.total_heads = n_heads.num_hidden_layers * n_heads.num_attention_heads
        self.records, self.too_long = self._records()
        self._recipes: RecipeScorer | None = None

    def _records(self) -> tuple[list[AttributionRecord], int]:
        """Records with gold spans that fit ``max_tokens`` and the model's window, and how many did not."""
        records = [
            r for r in load_attribution(self.config.dataset, self.config.split, self.config.limit) if r.gold
        ]
        sizer = RandomAttributor(self.model, self.tokenizer)
        fitting = []
        for record in records:
            try:
                length = sizer.prepare(_input(record), record.answer, "chunk").ids.shape[1]
            except ValueError as error:
                if "window" not in str(error):
                    raise
                continue
            if self.config.max_tokens is None or length <= self.config.max_tokens:
                fitting.append(record)
        return fitting, len(records) - len(fitting)

    def _done(self, method: str) -> dict[str, dict[str, Any]]:
        """``method``'s rows on disk (every shard's), by record id in the records' order."""
        rows = {row["id"]: row for row in read_rows(self.records_dir, method)}
        return {record.id: rows[record.id] for record in self.records if record.id in rows}

    def _todo(self) -> dict[str, list[AttributionRecord]]:
        """The records each step still has to run, the faithfulness pass included (all shards)."""
        steps = {method: self.records[: self.config.records_for(method)] for method in self.config.methods}
        if self.config.faithfulness:
            steps["faithfulness"] = [r for r in self.records[: self.config.faithfulness] if len(r.chunks) > 1]
        todo = {}
        for step, records in steps.items():
            done = self._done(step)
            todo[step] = [r for r in records if r.id not in done]
        return todo

    def missing(self) -> int:
        """How many (step, record) runs are not on disk yet."""
        return sum(map(len, self._todo().values()))

    def run(self) -> dict[str, Any]:
        """Run every method (skipping records already on disk), then the faithfulness pass; returns the results."""
        self.compute()
        return self.report()

    def compute(self) -> None:
        """Run this shard's records of every method, then its faithfulness pass."""
        for method in self.config.methods:
            self._run_method(method)
        if self.config.faithfulness:
            self._run_faithfulness()

    def report(self) -> dict[str, Any]:
        """Write ``results.json``, ``results.md`` and ``sweep.png`` from every record on disk; returns the results."""
        results = self.results()
        (self.out / "results.json").write_text(json.dumps(results, indent=2))
        (self.out / "results.md").write_text(markdown_table(results))
        if "sweep" in results:
            plot_sweep(results, self.out / "sweep.png")
        return results

    def _run_method(self, method: str) -> None:
        attributor = build_method(method, self.model, self.tokenizer, self.config)
        done = self._done(method)
        records = self.shard.take(self.records[: self.config.records_for(method)])
        todo = [r for r in records if r.id not in done]
        if not todo:
            return
        with PeakMemory() as peak, open(self.shard.path(self.records_dir, method), "a") as sink:
            for record in tqdm(todo, desc=f"{self.config.dataset}/{method}{self.shard.label}", unit="record"):
                start = time.perf_counter()
                if method == "sweep":
                    assert isinstance(attributor, RCAttributor)
                    row = self._sweep_row(attributor, record)
                else:
                    row = self._method_row(attributor, record)
                row["seconds"] = time.perf_counter() - start
                sink.write(json.dumps({"id": record.id, **row}) + "\n")
                sink.flush()
        with open(self.shard.path(self.records_dir, "peak_memory"), "a") as sink:
            sink.write(json.dumps({"method": method, "mib": peak.mib}) + "\n")

    def _method_row(self, attributor: SpanAttributor, record: AttributionRecord) -> dict[str, Any]:
        result = attributor.attribute(
            _input(record),
            record.answer,
            granularity=self.config.granularity,
            output_granularity=_units(record),
        )
        assert result.token_attr is not None
        return self._scored(result.seq_attr, result.token_attr, result.context_spans, record)

    def _scored(
        self, answer: torch.Tensor, units: torch.Tensor, spans: Sequence[TextSpan], record: AttributionRecord
    ) -> dict[str, Any]:
        """A record's line: hits per gold span from ``units [n_gold, n_spans]``, and the chunk scores."""
        row: dict[str, Any] = {
            "source": source_hits(units, spans, record.gold),
            "location": location_hits(units, spans, record),
        }
        if self.config.granularity == "chunk":
            row["chunk_scores"] = answer.tolist()
        return row

    def _heads(self, scores: HeadSpanScores, direction: str, k: str) -> torch.Tensor:
        count = self.total_heads if k == "all" else min(int(k), self.total_heads)
        return top_heads(scores.every_head_score["superiority"], count, bottom=direction == "bottom")

    def _sweep_row(self, attributor: RCAttributor, record: AttributionRecord) -> dict[str, Any]:
        recipes = self._recipe_scorer(attributor)
        scorers = {**recipes.scorers, **{f"curve/{name}": s for name, s in CURVE_SCORERS.items()}}
        scores = attributor.head_span_scores(
            _input(record),
            record.answer,
            granularity=self.config.granularity,
            output_granularity=_units(record),
            span_scorers=_shared(scorers),
        )
        spans = scores.example.context_spans
        ks = [str(k) for k in SWEEP_KS if k < self.total_heads] + ["all"]
        curve = {}
        for scorer in CURVE_SCORERS:
            for direction in ("top", "bottom"):
                for k in ks:
                    heads = self._heads(scores, direction, k)
                    units = scores.combine(heads, _shared_key(scorers, f"curve/{scorer}"))[1]
                    curve[f"{scorer}/{direction}/{k}"] = source_hits(units, spans, record.gold)
        variants = {
            label: self._scored(answer, units, spans, record)
            for label, (answer, units) in recipes(scores).items()
        }
        return {"curve": curve, "variants": variants}

    def _recipe_scorer(self, attributor: RCAttributor) -> RecipeScorer:
        if self._recipes is None:
            self._recipes = RecipeScorer(ablation(self.config.top_k), attributor.model, attributor.tokenizer)
        return self._recipes

    def _method_scores(
        self, record_id: str, tables: dict[str, dict[str, dict[str, Any]]]
    ) -> dict[str, torch.Tensor]:
        scores = {}
        for method, rows in tables.items():
            row = rows.get(record_id)
            if row is None:
                continue
            if method == "sweep":
                for label, variant in row["variants"].items():
                    scores[label] = torch.tensor(variant["chunk_scores"])
            else:
                scores[method] = torch.tensor(row["chunk_scores"])
        return scores

    def _run_faithfulness(self) -> None:
        if self.config.granularity != "chunk":
            raise ValueError("the faithfulness metrics remove whole sources: run with --granularity chunk")
        tables = {method: self._done(method) for method in METHOD_BUILDERS}
        done = self._done("faithfulness")
        records = self.shard.take(self.records[: self.config.faithfulness])
        with open(self.shard.path(self.records_dir, "faithfulness"), "a") as sink:
            for record in tqdm(records, desc=f"faithfulness{self.shard.label}", unit="record"):
                if record.id in done or len(record.chunks) < 2:
                    continue
                scores = self._method_scores(record.id, tables)
                metrics = faithfulness(
                    self.model,
                    self.tokenizer,
                    _input(record),
                    record.answer,
                    scores,
                    ks=(1, 3),
                    n_samples=self.config.lds_samples,
                )
                sink.write(json.dumps({"id": record.id, "metrics": metrics}) + "\n")
                sink.flush()

    def results(self) -> dict[str, Any]:
        """Aggregate every record on disk into the ``results.json`` structure."""
        peaks: dict[str, float] = {}
        for row in read_rows(self.records_dir, "peak_memory"):  # the highest of every shard's runs
            peaks[row["method"]] = max(peaks.get(row["method"], 0.0), row["mib"])
        methods: dict[str, Any] = {}
        hits: dict[str, dict[str, list[bool]]] = {}  # table row -> record id -> source hits
        sweep: dict[str, Any] = {}
        for method in METHOD_BUILDERS:  # every method with records on disk, run now or before
            done = self._done(method)
            rows = list(done.values())
            if not rows:
                continue
            timing = {
                "n_records": len(rows),
                "seconds_per_example": sum(row["seconds"] for row in rows) / len(rows),
                "peak_memory_mib": peaks.get(method),
            }
            if method == "sweep":
                for label in rows[0]["variants"]:
                    methods[label] = {
                        **_summary([row["variants"][label] for row in rows]),
                        **timing,
                        "from": "sweep",
                    }
                    hits[label] = {key: row["variants"][label]["source"] for key, row in done.items()}
                sweep = {
                    key: accuracy([hit for row in rows for hit in row["curve"][key]])[0]
                    for key in rows[0]["curve"]
                }
            else:
                methods[method] = {**_summary(rows), **timing}
                hits[method] = {key: row["source"] for key, row in done.items()}
        reference = self._reference(hits, "rc", DEFAULT)
        paper = self._reference(hits, "rc_paper", PAPER)
        for name, row in methods.items():
            row["interval"] = bootstrap_interval(list(hits[name].values()))
            if reference is not None:
                row.update(_against(hits[name], hits[reference]))
            if paper is not None:
                row["difference_to_paper"], *bounds = _paired(hits[name], hits[paper])
                row["difference_to_paper_interval"] = tuple(bounds)
        results: dict[str, Any] = {
            "config": asdict(self.config),
            "model": self.model.config.name_or_path,
            "protocol": PROTOCOL,
            "total_heads": self.total_heads,
            "n_records": len(self.records),
            "skipped_too_long": self.too_long,
            "reference": reference,
            "paper_reference": paper,
            "methods": methods,
        }
        if sweep:
            results["sweep"] = sweep
        faithful = self._done("faithfulness")
        if faithful:
            results["faithfulness"] = _faithfulness_summary([row["metrics"] for row in faithful.values()])
        return results

    @staticmethod
    def _reference(hits: dict[str, dict[str, list[bool]]], method: str, lever: str) -> str | None:
        """The row a method is compared with: ``method`` run alone or its recipe row in the sweep,
        whichever covers more records (the one run alone on a tie). A reference run on a subset
        (``--method-limit rc_paper=20``) would pair every comparison on that subset only."""
        recipe = next(recipe.label for recipe in ablation() if recipe.lever == lever)
        present = [name for name in (method, recipe) if name in hits]
        return max(present, key=lambda name: len(hits[name]), default=None)


def _paired(hits: dict[str, list[bool]], reference: dict[str, list[bool]]) -> tuple[float, float, float]:
    """``(difference, low, high)`` of ``hits`` against ``reference`` on the records both have."""
    shared = [key for key in hits if key in reference]
    return paired_difference([hits[key] for key in shared], [reference[key] for key in shared])


def _against(hits: dict[str, list[bool]], reference: dict[str, list[bool]]) -> dict[str, Any]:
    """The reference's accuracy on the records ``hits`` covers, and the paired difference to it."""
    theirs = [reference[key] for key in hits if key in reference]
    difference, low, high = _paired(hits, reference)
    return {
        "rc_default_same_records": accuracy([hit for row in theirs for hit in row])[0],
        "difference_to_default": difference,
        "difference_to_default_interval": (low, high),
    }


def _shared(scorers: dict[str, SpanScorer]) -> dict[str, SpanScorer]:
    """The scorers with equal settings computed once (the curve's reuse the recipes')."""
    unique: dict[str, SpanScorer] = {}
    for key, scorer in scorers.items():
        if scorer not in unique.values():
            unique[key] = scorer
    return unique


def _shared_key(scorers: dict[str, SpanScorer], key: str) -> str:
    """The key under which :func:`_shared` kept ``scorers[key]``."""
    return next(name for name, scorer in _shared(scorers).items() if scorer == scorers[key])


def _summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    score, n_spans = accuracy([hit for row in rows for hit in row["source"]])
    location, n_located = accuracy([hit for row in rows for hit in row["location"]])
    return {"accuracy": score, "n_spans": n_spans, "location_accuracy": location, "n_located": n_located}


def _faithfulness_summary(rows: Sequence[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Mean of each metric per method over the records where it is defined (nan ignored)."""
    out: dict[str, dict[str, float]] = {}
    for method in dict.fromkeys(name for row in rows for name in row):
        present = [row[method] for row in rows if method in row]
        values: dict[str, list[float]] = {}
        for metrics in present:
            for metric, value in metrics.items():
                if value is not None and not math.isnan(value):
                    values.setdefault(metric, []).append(value)
        out[method] = {metric: sum(v) / len(v) for metric, v in values.items()}
        out[method]["n_records"] = len(present)
    return out


def _format(value: float | None, spec: str) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _interval(bounds: Sequence[float] | None, spec: str) -> str:
    if bounds is None or any(math.isnan(bound) for bound in bounds):
        return ""
    return f"[{format(bounds[0], spec)}, {format(bounds[1], spec)}]"


def markdown_table(results: dict[str, Any]) -> str:
    """The results as Markdown: one row per method, then the notes a reader needs to trust them."""
    config = results["config"]
    lines = [
        f"## {config['dataset']} {config['split']}: chunk-level attribution accuracy",
        "",
        f"Model: `{results['model']}`. Protocol: {results['protocol']}. Context spans: {config['granularity']}.",
        "",
        "| method | accuracy (95% CI) | − default (paired 95% CI) | − paper (paired 95% CI) "
        "| default, same records | spans | records | s / example | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results["methods"].items():
        shared = " ¹" if row.get("from") == "sweep" else ""
        accuracy_cell = f"{_format(row['accuracy'], '.1%')} {_interval(row['interval'], '.1%')}"
        cells = [
            "reference"
            if name == reference
            else f"{_format(row.get(key), '+.1%')} {_interval(row.get(key + '_interval'), '+.1%')}"
            for key, reference in (
                ("difference_to_default", results["reference"]),
                ("difference_to_paper", results["paper_reference"]),
            )
        ]
        lines.append(
            f"| {name} | {accuracy_cell} | {' | '.join(cells)} | {_format(row.get('rc_default_same_records'), '.1%')} | "
            f"{row['n_spans']} | {row['n_records']} | "
            f"{_format(row['seconds_per_example'], '.2f')}{shared} | {_format(row['peak_memory_mib'], '.0f')}{shared} |"
        )
    notes = [
        "",
        "Intervals: percentile bootstrap over records (2,000 resamples; a record's spans stay together).",
    ]
    if results["reference"] is not None:
        notes[-1] += (
            " Differences are paired: both methods on the records they share, against "
            f"`{results['reference']}` (the default RCAttributor) and `{results['paper_reference']}` "
            "(the paper's recipe)."
        )
    notes += [
        "",
        f"{results['n_records']} records with gold spans; {results['skipped_too_long']} longer than "
        f"{config['max_tokens']} tokens were left out.",
    ]
    if any(row.get("from") == "sweep" for row in results["methods"].values()):
        notes.append(
            "¹ Computed from the sweep pass (one RC forward per record whose per-head scores serve every "
            "recipe of the ablation, rcattr.eval.recipes); its time and memory are the whole pass's. `rc` is "
            "the default RCAttributor on its own, `rc_paper` the paper's recipe."
        )
    for name, row in results["methods"].items():
        if row.get("from") != "sweep" and row["n_records"] < results["n_records"]:
            notes.append(f"{name}: first {row['n_records']} records only (cost; `--method-limit`).")
    if "faithfulness" in results:
        notes += ["", "| method | drop@1 | drop@3 | LDS | records |", "|---|---|---|---|---|"]
        for name, row in results["faithfulness"].items():
            notes.append(
                f"| {name} | {_format(row.get('drop@1'), '.3f')} | {_format(row.get('drop@3'), '.3f')} | "
                f"{_format(row.get('lds'), '.3f')} | {row['n_records']} |"
            )
        notes.append(
            "drop@k: log-probability drop of the answer when the top-k sources are removed (higher is better)."
        )
    return "\n".join(lines + notes) + "\n"


def _curve(sweep: dict[str, float], scorer: str, direction: str) -> Iterator[tuple[int | str, float]]:
    for key, value in sweep.items():
        name, side, k = key.split("/")
        if name == scorer and side == direction:
            yield k, value


def plot_sweep(results: dict[str, Any], path: str | Path) -> Path:
    """Accuracy against the number of heads k, top-k and bottom-k, for both span scorers (Fig. 5)."""
    from matplotlib.figure import Figure  # not pyplot: no backend switch, no global figure state

    total = results["total_heads"]
    figure = Figure(figsize=(6.4, 4.0))
    axes = figure.subplots()
    for scorer, label in (("attention", "attention mass"), ("rc", "RC expectation")):
        for direction, style in (("top", "-o"), ("bottom", "--s")):
            points = list(_curve(results["sweep"], scorer, direction))
            ks = [total if k == "all" else int(k) for k, _ in points]
            axes.plot(
                ks, [100 * v for _, v in points], style, label=f"{label}, {direction}-k heads", markersize=4
            )
    axes.set_xscale("log")
    axes.set_xlabel("heads used (k)")
    axes.set_ylabel("chunk-level accuracy (%)")
    axes.set_title(
        f"{results['config']['dataset']} {results['config']['split']}: accuracy vs k ({results['model']})"
    )
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=150)
    return Path(path)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.attribution",
        description="Attribution benchmark: every method on QuoteSum or Veri-Gran, gold answer teacher-forced.",
        epilog=DATA_HELP,
    )
    parser.add_argument("--dataset", required=True, choices=("quotesum", "verigran"))
    parser.add_argument("--split", default="dev")
    add_run_arguments(parser, METHODS)
    parser.add_argument(
        "--method-limit",
        action="append",
        default=[],
        metavar="METHOD=N",
        help="run METHOD on the first N records only (default: "
        + ", ".join(f"{m}={n}" for m, n in DEFAULT_METHOD_LIMITS.items())
        + "; N=0 lifts the limit); repeatable",
    )
    parser.add_argument(
        "--top-k",
        type=parse_head_count,
        default="outliers",
        help="the default RC method's heads: a number, or 'outliers' (the default; see RCAttributor)",
    )
    parser.add_argument("--granularity", default="chunk", choices=("chunk", "sentence", "token"))
    parser.add_argument(
        "--max-tokens", type=int, default=4096, help="leave out longer records (default 4096)"
    )
    parser.add_argument("--hidden-state-layer", type=int, help="layer for hidden_state (default: middle)")
    parser.add_argument("--ig-steps", type=int, default=16, help="integrated-gradients steps (default 16)")
    parser.add_argument(
        "--faithfulness",
        type=int,
        default=0,
        metavar="N",
        help="ContextCite drop@k and LDS on the first N records",
    )
    parser.add_argument("--lds-samples", type=int, default=32, help="random ablations per record for LDS")
    return parser


def config_from_args(args: argparse.Namespace) -> BenchmarkConfig:
    methods = parse_methods(args.methods, METHODS)
    limits = dict(DEFAULT_METHOD_LIMITS)
    for item in args.method_limit:
        name, _, count = item.partition("=")
        if name not in METHODS or not count.isdigit():
            raise SystemExit(
                f"--method-limit wants METHOD=N with METHOD in {', '.join(METHODS)}, got {item!r}"
            )
        limits[name] = int(count)
    return BenchmarkConfig(
        dataset=args.dataset,
        split=args.split,
        methods=methods,
        limit=args.limit,
        method_limits={name: count for name, count in limits.items() if count},
        top_k=args.top_k,
        granularity=args.granularity,
        max_tokens=args.max_tokens,
        model=args.model,
        hidden_state_layer=args.hidden_state_layer,
        ig_steps=args.ig_steps,
        faithfulness=args.faithfulness,
        lds_samples=args.lds_samples,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = config_from_args(args)
    processes = Processes.start(args.shard)
    model, tokenizer = load_run_model(config.model, args.device_map, processes)
    benchmark = AttributionBenchmark(config, model, tokenizer, args.out, processes.shard)
    results = run_sharded(benchmark, processes, args.report_only)
    if results is not None:
        print(markdown_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
