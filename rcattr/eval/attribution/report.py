"""The attribution benchmark's `results.md`: the table of every method, and the notes a reader needs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


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
        *_long_context(results),
        "| method | accuracy (95% CI) | − default (paired 95% CI) | − paper (paired 95% CI) "
        "| default, same records | spans | records | s / example | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results["methods"].items():
        shared = " ¹" if row.get("from") else ""  # its time and memory are its pass's
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
        paper = (
            f" and `{results['paper_reference']}` (the paper's recipe)" if results["paper_reference"] else ""
        )
        notes[-1] += (
            " Differences are paired: both methods on the records they share, against "
            f"`{results['reference']}` (the default RCAttributor){paper}."
        )
    notes += [
        "",
        f"{results['n_records']} records with gold spans; {results['skipped_too_long']} longer than "
        f"{config['max_tokens']} tokens were left out.",
    ]
    if config.get("skip"):
        notes.append(
            f"The file's first {config['skip']} lines were left out (`--skip`): records held out of a run on them."
        )
    if any(row.get("from") == "sweep" for row in results["methods"].values()):
        notes.append(
            "¹ Computed from the sweep pass (one RC forward per record whose per-head scores serve every "
            "recipe of the ablation, rcattr.eval.attribution.recipes); its time and memory are the whole pass's. `rc` is "
            "the default RCAttributor on its own, `rc_paper` the paper's recipe."
        )
    if any(row.get("from") == "heads" for row in results["methods"].values()):
        notes.append(
            "¹ Computed from the heads pass (one RC forward per record whose per-head scores serve every "
            "head-selection rule, rcattr.eval.attribution.selection_rules); its time and memory are the whole pass's."
        )
    selected = {name: row["heads"] for name, row in results["methods"].items() if "heads" in row}
    if selected:
        notes += ["", "| recipe | heads per record: mean | fewest | most |", "|---|---|---|---|"]
        notes += [
            f"| {name} | {heads['mean']:.1f} | {heads['min']} | {heads['max']} |"
            for name, heads in selected.items()
        ]
    for name, row in results["methods"].items():
        if not row.get("from") and row["n_records"] < results["n_records"]:
            notes.append(f"{name}: first {row['n_records']} records only (cost; `--method-limit`).")
    if "faithfulness" in results:
        notes += _faithfulness_table(results["faithfulness"], results["reference"])
    return "\n".join(lines + notes) + "\n"


FAITHFULNESS_METRICS = ("drop@1", "drop@3", "lds")


def _faithfulness_table(faithfulness: dict[str, dict[str, Any]], reference: str | None) -> list[str]:
    """The faithfulness rows: each metric's mean [95% CI] and its paired difference to the default."""

    def cell(row: dict[str, Any], metric: str) -> str:
        text = f"{_format(row.get(metric), '.3f')} {_interval(row.get(metric + '_interval'), '.3f')}".strip()
        if metric + "_minus_reference" in row:
            difference = row[metric + "_minus_reference"]
            bounds = _interval(row.get(metric + "_minus_reference_interval"), "+.3f")
            text += f" ({_format(difference, '+.3f')} {bounds})"
        return text

    paired = (
        f"; in parentheses the paired difference to `{reference}` on the records both have"
        if reference
        else ""
    )
    return [
        "",
        "| method | drop@1 | drop@3 | LDS | records |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {' | '.join(cell(row, metric) for metric in FAITHFULNESS_METRICS)} | {row['n_records']} |"
            for name, row in faithfulness.items()
        ),
        "drop@k: log-probability drop of the answer when the top-k sources are removed (higher is better); LDS: "
        "Spearman correlation of the kept sources' summed scores with the answer's log-probability over random "
        f"half-ablations. [95% CI] over records{paired}.",
    ]


def _long_context(results: dict[str, Any]) -> list[str]:
    """The long context's line, when the run hid the records among distractors."""
    stretch = results["config"].get("long_context")
    if not stretch:
        return []
    tokens, documents = results["prompt_tokens"], results["documents"]
    return [
        f"Long context: each record's sources at the {stretch['position']} of distractor passages (the file's "
        f"other questions' and SQuAD v2 paragraphs, seed {stretch['seed']}) up to {stretch['tokens']:,} tokens: "
        f"{tokens['mean']:,.0f} tokens ({tokens['min']:,}–{tokens['max']:,}) and {documents['mean']:.1f} "
        f"documents ({documents['min']}–{documents['max']}) per prompt.",
        "",
    ]
