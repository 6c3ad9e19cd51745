"""The `sweep` method of the attribution benchmark: one RC pass per record that scores every head with
every span scorer the ablation needs ([`rcattr.eval.attribution.recipes`][rcattr.eval.attribution.recipes]).

Its line per record holds the top-k / bottom-k curve of the paper's Fig. 5 (source hits with the k heads of
highest, or lowest, RC score, for both of the paper's span scorers) and one scored line per recipe of the
ablation; each recipe becomes a row of the results table, and the curve `results["sweep"]` and
`sweep.png`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from transformers import PreTrainedModel

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.scorers import SpanScorer
from rcattr.eval.attribution.method import AttributionMethod, Row, context_input, output_units, scored_row
from rcattr.eval.attribution.per_head import HeadSpanScores, head_span_scores
from rcattr.eval.attribution.rc_span_scorers import RCScorer
from rcattr.eval.attribution.recipes import PAPER_SCORER, Recipe, RecipeScorer, ablation, current_labels
from rcattr.eval.common.datasets import BenchmarkRecord
from rcattr.eval.common.metrics import accuracy, source_hits
from rcattr.heads.scores import top_heads
from rcattr.options import TopK
from rcattr.protocols import TokenizerLike

if TYPE_CHECKING:
    from rcattr.eval.attribution.config import BenchmarkConfig

SWEEP_KS = (1, 2, 5, 10, 20, 30, 50, 100, 150, 200)
CURVE_SCORERS = {"attention": PAPER_SCORER, "rc": RCScorer()}  # Fig. 5: the paper's span scorers


@dataclass(frozen=True)
class SweepPass:
    """What the sweep runs on each record: the RC attributor, the ablation's recipes, the model's heads."""

    attributor: RCAttributor
    recipes: RecipeScorer
    total_heads: int

    def heads(self, scores: HeadSpanScores, direction: str, k: str) -> torch.Tensor:
        """The `k` (a number, or "all") heads of highest (`direction="top"`) or lowest RC score."""
        count = self.total_heads if k == "all" else min(int(k), self.total_heads)
        return top_heads(scores.every_head_score["superiority"], count, bottom=direction == "bottom")


@dataclass(frozen=True)
class SweepMethod(AttributionMethod[SweepPass]):
    """Every recipe of the ablation and the top-k / bottom-k curve from one RC pass per record.

    Parameters
    ----------
    attributor : callable
        `(model, tokenizer, config) -> RCAttributor`: the attributor whose per-head pass is swept.
    name : str, optional
        Default: `"sweep"`.
    recipes : callable, optional
        `top_k -> recipes`: the table's rows (default: the ablation, [`ablation`][rcattr.eval.attribution.recipes.ablation]).
    curve : mapping of str to SpanScorer, optional
        The span scorers of the top-k / bottom-k curve (default: the paper's two).
    """

    attributor: Callable[[PreTrainedModel, TokenizerLike, BenchmarkConfig], RCAttributor]
    name: str = "sweep"
    recipes: Callable[[TopK], list[Recipe]] = ablation
    curve: Mapping[str, SpanScorer] = field(default_factory=lambda: dict(CURVE_SCORERS))
    shared_pass: ClassVar[bool] = True

    def build(self, model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig) -> SweepPass:
        attributor = self.attributor(model, tokenizer, config)
        text = model.config.get_text_config()
        return SweepPass(
            attributor,
            RecipeScorer(self.recipes(config.top_k), attributor.model),
            text.num_hidden_layers * text.num_attention_heads,
        )

    def row(self, built: SweepPass, record: BenchmarkRecord, config: BenchmarkConfig) -> Row:
        return self.scored_row(built, self.head_pass(built, record, config), record, config)

    def scorers(self, built: SweepPass) -> dict[str, SpanScorer]:
        """The span scorers of the recipes and the curve, by key (a scorer of both is computed once, under its
        first key)."""
        return {**built.recipes.scorers, **{f"curve/{name}": s for name, s in self.curve.items()}}

    def head_pass(self, built: SweepPass, record: BenchmarkRecord, config: BenchmarkConfig) -> HeadSpanScores:
        """The record's pass: every head's scores, and its span scores by every scorer of [`scorers`][rcattr.eval.attribution.sweep.SweepMethod.scorers]."""
        return head_span_scores(
            built.attributor,
            context_input(record),
            record.answer,
            granularity=config.granularity,
            output_granularity=output_units(record),
            span_scorers=_shared(self.scorers(built)),
            unit_scores=built.recipes.unit_scores,
        )

    def scored_row(
        self, built: SweepPass, scores: HeadSpanScores, record: BenchmarkRecord, config: BenchmarkConfig
    ) -> Row:
        """The record's line from its pass: the curve's source hits and every recipe's scored row."""
        scorers = self.scorers(built)
        spans = scores.example.context_spans
        ks = [str(k) for k in SWEEP_KS if k < built.total_heads] + ["all"]
        curve = {}
        for scorer in self.curve:
            for direction in ("top", "bottom"):
                for k in ks:
                    units = scores.combine(
                        built.heads(scores, direction, k), shared_key(scorers, f"curve/{scorer}")
                    )[1]
                    curve[f"{scorer}/{direction}/{k}"] = source_hits(units, spans, record.gold)
        variants = {
            label: {**scored_row(answer, units, spans, record, config.granularity), "heads": heads}
            for label, (answer, units, heads) in built.recipes(scores).items()
        }
        return {"curve": curve, "variants": variants}

    def table(self, done: dict[str, Row]) -> dict[str, dict[str, Row]]:
        """One table row per recipe."""
        table: dict[str, dict[str, Row]] = {}
        for key, row in done.items():  # a line of before 0.2.0 under today's labels (current_labels)
            for stored, label in current_labels(row["variants"]).items():
                table.setdefault(label, {})[key] = row["variants"][stored]
        return table

    def results(self, done: dict[str, Row]) -> dict[str, Any]:
        """`NAME` (`sweep`): the accuracy of each point of the curve, `"SCORER/DIRECTION/K"`."""
        if not done:
            return {}
        rows = list(done.values())
        return {
            self.name: {
                key: accuracy([hit for row in rows for hit in row["curve"][key]])[0]
                for key in rows[0]["curve"]
            }
        }

    def figures(self, results: dict[str, Any], out: Path) -> None:
        """`NAME.png` (`sweep.png`): the curve."""
        if self.name in results:
            plot_sweep(results, out / f"{self.name}.png", self.name)


def _shared(scorers: dict[str, SpanScorer]) -> dict[str, SpanScorer]:
    """The scorers with equal settings computed once (the curve's reuse the recipes')."""
    unique: dict[str, SpanScorer] = {}
    for key, scorer in scorers.items():
        if scorer not in unique.values():
            unique[key] = scorer
    return unique


def shared_key(scorers: dict[str, SpanScorer], key: str) -> str:
    """The key under which a pass's span scores of `scorers[key]` are kept (a scorer named twice is computed
    once, under its first key)."""
    return next(name for name, scorer in _shared(scorers).items() if scorer == scorers[key])


def _curve(sweep: dict[str, float], scorer: str, direction: str) -> Iterator[tuple[int | str, float]]:
    for key, value in sweep.items():
        name, side, k = key.split("/")
        if name == scorer and side == direction:
            yield k, value


def plot_sweep(results: dict[str, Any], path: str | Path, method: str = "sweep") -> Path:
    """Accuracy against the number of heads k, top-k and bottom-k, for both span scorers (Fig. 5), from the
    curve of `results[method]`."""
    from matplotlib.figure import Figure  # not pyplot: no backend switch, no global figure state

    total = results["total_heads"]
    figure = Figure(figsize=(6.4, 4.0))
    axes = figure.subplots()
    for scorer, label in (("attention", "attention mass"), ("rc", "RC expectation")):
        for direction, style in (("top", "-o"), ("bottom", "--s")):
            points = list(_curve(results[method], scorer, direction))
            if not points:  # a method that draws the curve for one scorer only
                continue
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
