"""The compress-once protocol's `results.json` and `results.md`: per cache setting, the means over the
contexts every setting has finished, and paired differences whose bootstrap draws **contexts** (the questions
of one context share its cache): answer match and ROUGE-L against the full cache, VER and answer match against KVzip at
the same ratio, and each RCKVCache variant against the default recipe at the same ratio and window."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rcattr.eval.common.metrics import paired_difference, paired_mean_difference
from rcattr.eval.kv.variants import DEFAULT_RECIPE

__all__ = ["once_markdown", "summarise_once"]

ONCE_METRICS = (
    "compression_ratio",
    "bytes_ratio",
    "ver",
    "match",
    "rougeL",
    "rouge1",
    "identical",
    "prefill_cost",
)


def _grouped(rows: Sequence[dict[str, Any]], contexts: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each context, in `contexts` order, questions in id order."""
    by_context: dict[str, list[dict[str, Any]]] = {context: [] for context in contexts}
    for row in sorted(rows, key=lambda row: row["id"]):
        if row["context_id"] in by_context:
            by_context[row["context_id"]].append(row)
    return by_context


def _difference(
    rows: dict[str, list[dict[str, Any]]], reference: dict[str, list[dict[str, Any]]], metric: str
) -> list[float]:
    """`[difference, low, high]`: `metric` of `rows` minus that of `reference`, contexts resampled."""
    if metric == "match":
        hits = [[bool(row["match"]) for row in questions] for questions in rows.values()]
        base = [[bool(row["match"]) for row in questions] for questions in reference.values()]
        return list(paired_difference(hits, base))
    means = [float(np.mean([row[metric] for row in questions])) for questions in rows.values()]
    base_means = [float(np.mean([row[metric] for row in questions])) for questions in reference.values()]
    return list(paired_mean_difference(means, base_means))


def _default_twin(setting: dict[str, Any], methods: dict[str, Any]) -> str | None:
    """The label of RCKVCache's default recipe at the same cut and window as `setting` (a variant's)."""
    for label, row in methods.items():
        other = row["setting"]
        if (
            row["name"] == "rc"
            and other.get("variant") == DEFAULT_RECIPE
            and other.get("window") == setting.get("window")
            and other.get("ratio") == setting.get("ratio")
            and other.get("c") == setting.get("c")
        ):
            return label
    return None


def summarise_once(
    rows: Sequence[dict[str, Any]], labels: Sequence[str], header: dict[str, Any]
) -> dict[str, Any]:
    """The `results.json` structure from the (method, question) `rows` of the method `labels`."""
    per_label: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        per_label.setdefault(row["method"], []).append(row)
    present = [label for label in labels if label in per_label]
    question_sets = [{(row["context_id"], row["id"]) for row in per_label[label]} for label in present]
    common = set.intersection(*question_sets) if question_sets else set()
    contexts = sorted({context for context, _ in common})
    grouped = {
        label: _grouped(
            [row for row in per_label[label] if (row["context_id"], row["id"]) in common], contexts
        )
        for label in present
    }
    methods: dict[str, Any] = {}
    for label in present:
        chosen = [row for questions in grouped[label].values() for row in questions]
        first = chosen[0] if chosen else per_label[label][0]
        methods[label] = {
            "name": first["name"],
            "setting": first["setting"],
            "n_questions": len(chosen),
            **{
                metric: float(np.mean([float(row.get(metric, math.nan)) for row in chosen]))
                if chosen
                else math.nan
                for metric in ONCE_METRICS
            },
        }
    comparisons: dict[str, Any] = {}
    kvzip = {row["setting"].get("ratio"): label for label, row in methods.items() if row["name"] == "kvzip"}
    for label, row in methods.items():
        if label == "full" or not contexts:
            continue
        against: dict[str, Any] = {}
        if "full" in methods:
            against["full"] = {
                metric: _difference(grouped[label], grouped["full"], metric) for metric in ("match", "rougeL")
            }
        twin = kvzip.get(row["setting"].get("ratio"))
        if twin is not None and twin != label:
            against["kvzip"] = {
                metric: _difference(grouped[label], grouped[twin], metric) for metric in ("ver", "match")
            }
        default = _default_twin(row["setting"], methods) if row["name"] == "rc" else None
        if default is not None and default != label:
            against["default"] = {
                "label": default,
                **{
                    metric: _difference(grouped[label], grouped[default], metric)
                    for metric in ("ver", "match")
                },
            }
        comparisons[label] = against
    return {
        **header,
        "n_contexts": len(contexts),
        "n_questions": len(common),
        "incomplete": sorted(label for label in present if len(per_label[label]) > len(common)),
        "methods": methods,
        "comparisons": comparisons,
    }


def _interval(values: Sequence[float] | None, spec: str = "+.3f") -> str:
    if not values or math.isnan(values[0]):
        return "—"
    value, low, high = values
    return f"{value:{spec}} [{low:{spec}}, {high:{spec}}]"


def _cut(row: dict[str, Any]) -> str:
    setting = row["setting"]
    cut = (
        f"r = {setting['ratio']:g}"
        if "ratio" in setting
        else f"c = {setting['c']:g}"
        if "c" in setting
        else "—"
    )
    variant = setting.get("variant")
    return cut if variant is None else f"{cut}, {variant}"


def once_markdown(results: dict[str, Any]) -> str:
    """`results.md`: one table of every cache setting, then the notes."""
    lines = [
        f"# KV benchmark, compress once: {results['config']['dataset']} ({results['model']})",
        "",
        f"{results['n_contexts']} contexts of up to {results['config']['context_tokens']} tokens, "
        f"{results['n_questions']} questions. Protocol: {results['protocol']}.",
        "",
        "| method | setting | evicted | bytes held | VER | answer match | ROUGE-L | same answer as full "
        "| prefill × full | match − full | ROUGE-L − full | VER − KVzip | match − KVzip |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    comparisons = results["comparisons"]
    for label, row in results["methods"].items():
        against = comparisons.get(label, {})
        kvzip = against.get("kvzip", {})
        lines.append(
            f"| {row['name']} | {_cut(row)} | {row['compression_ratio']:.1%} | {row['bytes_ratio']:.1%} "
            f"| {row['ver']:.4f} | {row['match']:.3f} | {row['rougeL']:.3f} | {row['identical']:.3f} "
            f"| {row['prefill_cost']:.2f} | {_interval(against.get('full', {}).get('match'))} "
            f"| {_interval(against.get('full', {}).get('rougeL'))} "
            f"| {_interval(kvzip.get('ver'), '+.4f')} | {_interval(kvzip.get('match'))} |"
        )
    levers = {label: against["default"] for label, against in comparisons.items() if "default" in against}
    if levers:
        lines += [
            "",
            f"RCKVCache variants against the default recipe ({DEFAULT_RECIPE}) at the same cut and window:",
            "",
            "| variant | against | VER difference | answer match difference |",
            "|---|---|---:|---:|",
        ]
        lines += [
            f"| {label} | {lever['label']} | {_interval(lever['ver'], '+.4f')} | {_interval(lever['match'])} |"
            for label, lever in levers.items()
        ]
    lines += [
        "",
        "Differences are paired, with 95% bootstrap intervals over contexts (a context's questions share its "
        "cache). `prefill × full`: the setting's prefill time over the full cache's prefill of the same context "
        "in the same run (the compression's cost; answers are timed apart).",
    ]
    if results["incomplete"]:
        lines.append(
            f"Not finished on every context (means over the common ones): {', '.join(results['incomplete'])}."
        )
    return "\n".join(lines) + "\n"
