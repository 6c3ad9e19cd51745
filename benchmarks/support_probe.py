"""The support probe from AttributionBench run folders: fit the one shipped for a model, report the verdict
out of fold, and measure how a probe fitted on one model's claims transfers to others'.

    python benchmarks/support_probe.py fit docs/records/attributionbench/smollm2_dev \\
        rcattr/grounding/probes/smollm2-135m-instruct.json
    python benchmarks/support_probe.py verdict docs/records/attributionbench/smollm2_dev \\
        docs/records/attributionbench/gemma_dev docs/records/attributionbench/qwen_dev
    python benchmarks/support_probe.py transfer docs/records/attributionbench/smollm2_dev \\
        docs/records/attributionbench/qwen_dev160 docs/records/attributionbench/gemma_dev

    python benchmarks/support_probe.py table docs/records/attributionbench/smollm2_dev ...

``fit``: the probe (`rcattr.grounding.probe.SupportProbe.fit`, the heads' penalty its default) fitted on every
claim of the folder, for the folder's model (``config.json``; the default model when it names none), its
operating points cut on its out-of-fold probabilities. ``verdict``: the verdict's report
(`rcattr.eval.groundedness.verdict_report`), the same recipe fitted fold by fold, written to ``--out``.
``transfer``: a probe on the head-free
features (:func:`~rcattr.eval.groundedness.probe_report.pooled_features`) fitted on the first folder's claims
and applied to each other folder's, against the support there: AUROC, the marks' macro-F1 (below even odds),
caught and falsely marked, each with its 95% interval (whole questions drawn). ``table``: the pooled rows of
each folder's report (``results.json``) side by side, one block per model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from rcattr.eval.common.run_store import RunStore
from rcattr.eval.groundedness.attributionbench import STATUSES
from rcattr.eval.groundedness.probe_report import best_c, row_features, transfer_probabilities
from rcattr.eval.groundedness.source_report import markdown, source_tables
from rcattr.eval.groundedness.verdict_report import (
    held_out_sources,
    learning_curve,
    nested_verdicts,
    signal_table,
    stability,
)
from rcattr.grounding.probe import DEFAULT_C, OPERATING_POINTS, SupportProbe, vetoed
from rcattr.runtime.models import DEFAULT_MODEL


def joined_rows(folder: Path) -> list[dict[str, Any]]:
    """The folder's claim rows joined with their heads rows, those with both (none skipped)."""
    store = RunStore(folder, rows="records")
    heads = {row["id"]: row for row in store.rows("claim-heads") if "skipped" not in row}
    return [
        {**row, **heads[row["id"]]}
        for row in store.rows("claims")
        if row["id"] in heads and "skipped" not in row
    ]


def fit(folder: Path, out: Path, seed: int) -> None:
    rows = joined_rows(folder)
    claims, labels = [row_features(row) for row in rows], np.array([row["label"] for row in rows])
    groups = [row["question"] for row in rows]
    model = json.loads((folder / "config.json").read_text())["model"] or DEFAULT_MODEL
    probe = SupportProbe.fit(claims, labels, Path(model).name, DEFAULT_C, groups, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    probe.save(out)
    cuts = ", ".join(f"{name} {cut:.3f}" for name, cut in probe.cuts.items())
    print(f"{len(rows)} claims of {probe.model} ({probe.layers} x {probe.heads} heads), cuts {cuts}: {out}")


def transfer(source: Path, targets: list[Path], seed: int, n_boot: int) -> None:
    fitted = joined_rows(source)
    features, labels = [row_features(row) for row in fitted], np.array([row["label"] for row in fitted])
    c = best_c(
        features, labels, [row["question"] for row in fitted], seed
    )  # the penalty, on the source alone
    print(f"fitted on {source} ({len(fitted)} claims, C = {c}), head-free features\n")
    for target in targets:
        rows = joined_rows(target)
        probability = transfer_probabilities(features, labels, [row_features(row) for row in rows], c)
        values = [
            {"support": row["support"], "probe": float(p)} for row, p in zip(rows, probability, strict=True)
        ]
        marks = [
            {"support": row["status"] != STATUSES[0], "probe": p < 0.5}
            for row, p in zip(rows, probability, strict=True)
        ]
        tables = source_tables(
            rows,
            values,
            marks,
            np.array([row["label"] for row in rows]),
            [row["question"] for row in rows],
            n_boot,
            seed,
        )
        print(f"applied to {target} ({len(rows)} claims):\n")
        print("\n".join(markdown(tables, cross_validated=())) + "\n")


def verdict(folders: list[Path], out: Path, seed: int, n_boot: int, refits: int) -> None:
    """The verdict's report per run folder: out of fold, per source, on held-out sources, its learning curve
    and its stability, written to ``out/<folder>.json`` and ``.md``."""
    out.mkdir(parents=True, exist_ok=True)
    for folder in folders:
        rows = joined_rows(folder)
        claims = [row_features(row) for row in rows]
        labels = np.array([row["label"] for row in rows])
        groups, sources = [row["question"] for row in rows], [row["source"] for row in rows]
        nested = nested_verdicts(claims, labels, groups, seed)
        values = {
            "coverage": np.array([claim.coverage for claim in claims]),
            "support": np.array([claim.support for claim in claims]),
            "heads": nested["heads"],
            "probe": nested["probe"],
            "verdict": vetoed(nested["probe"], claims),
        }
        marks = {
            "coverage": values["coverage"] < 0.5,
            "support": np.array([row["status"] != STATUSES[0] for row in rows]),
            **{f"verdict_{point}": nested[f"marked_{point}"] for point in OPERATING_POINTS},
            "probe_balanced": nested["marked_balanced_without_veto"],
        }
        by_source = {"all": signal_table(values, marks, labels, groups, n_boot, seed)}
        for source in sorted(set(sources)):
            keep = np.array([s == source for s in sources])
            by_source[source] = signal_table(
                {k: v[keep] for k, v in values.items()},
                {k: v[keep] for k, v in marks.items()},
                labels[keep],
                [g for g, k in zip(groups, keep, strict=True) if k],
                n_boot,
                seed,
            )
        report = {
            "claims": len(rows),
            "sources": by_source,
            "held_out_sources": held_out_sources(claims, labels, groups, sources, seed),
            "learning_curve": learning_curve(claims, labels, groups, seed),
            "stability": stability(claims, labels, groups, sources, seed, refits),
        }
        (out / f"{folder.name}.json").write_text(json.dumps(report, indent=1))
        (out / f"{folder.name}.md").write_text(verdict_markdown(folder.name, report))
        print(verdict_markdown(folder.name, report))


def verdict_markdown(name: str, report: dict[str, Any]) -> str:
    """The report of one run folder as markdown tables."""

    def cell(v: dict[str, float], key: str, form: str = "{:.3f}") -> str:
        return f"{form.format(v[key])} [{form.format(v[key + '_low'])}, {form.format(v[key + '_high'])}]"

    lines = [
        f"**{name}** ({report['claims']} claims; 10 question-grouped folds; 95% intervals over whole questions)",
        "",
        "| source | signal | AUROC | minus coverage (paired) |",
        "|---|---|---|---|",
    ]
    for source, table in report["sources"].items():
        for signal in ("coverage", "support", "heads", "probe", "verdict"):
            v = table[signal]
            difference = (
                f"{v['minus_coverage']:+.3f} [{v['difference_low']:+.3f}, {v['difference_high']:+.3f}]"
            )
            lines.append(
                f"| {source} | {signal} | {v['auroc']:.3f} [{v['low']:.3f}, {v['high']:.3f}] | {difference} |"
            )
    lines += [
        "",
        "| source | marks | macro-F1 | unattributable caught | attributable marked |",
        "|---|---|---|---|---|",
    ]
    for source, table in report["sources"].items():
        for signal in ("coverage", "support", "probe_balanced", *(f"verdict_{p}" for p in OPERATING_POINTS)):
            v = table[signal]
            lines.append(
                f"| {source} | {signal} | {cell(v, 'macro_f1')} | {cell(v, 'caught', '{:.1%}')} | "
                f"{cell(v, 'falsely_marked', '{:.1%}')} |"
            )
    lines += [
        "",
        "| held-out source | claims | verdict AUROC | its heads' level alone | coverage AUROC | refits: verdict mean ± sd |",
        "|---|---:|---:|---:|---:|---|",
    ]
    spread = report["stability"]["held_out_auroc"]
    for source, v in report["held_out_sources"].items():
        lines.append(
            f"| {source} | {v['claims']} | {v['verdict']:.3f} | {v['heads']:.3f} | {v['coverage']:.3f} | "
            f"{spread[source]['mean']:.3f} ± {spread[source]['sd']:.3f} |"
        )
    curve = ", ".join(f"{share}: {value:.3f}" for share, value in report["learning_curve"].items())
    lines += [
        "",
        f"Learning curve (share of each fold's training questions: out-of-fold verdict AUROC): {curve}",
        "",
    ]
    coefficients = ", ".join(
        f"{k} {v['mean']:+.2f} ± {v['sd']:.2f}" for k, v in report["stability"]["coefficients"].items()
    )
    lines.append(
        f"Combined level's standardised coefficients over {report['stability']['refits']} refits: {coefficients}"
    )
    return "\n".join(lines) + "\n"


def table(folders: list[Path]) -> None:
    lines = []
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())["attributionbench"]
        pooled = results["sources"]["all"]
        lines += [f"**{folder.name}** ({pooled['claims']} claims)", ""]
        lines += markdown({"all": pooled}, cross_validated=("logprob",))
        lines.append("")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fit_parser = commands.add_parser("fit", help="fit the probe on a run folder's claims and write it")
    fit_parser.add_argument("folder", type=Path)
    fit_parser.add_argument("out", type=Path)
    transfer_parser = commands.add_parser("transfer", help="fit on one run folder, apply to others")
    transfer_parser.add_argument("source", type=Path)
    transfer_parser.add_argument("targets", type=Path, nargs="+")
    transfer_parser.add_argument("--n-boot", type=int, default=2000)
    verdict_parser = commands.add_parser("verdict", help="the verdict's report on run folders, out of fold")
    verdict_parser.add_argument("folders", type=Path, nargs="+")
    verdict_parser.add_argument("--out", type=Path, default=Path("docs/records/attributionbench/verdict"))
    verdict_parser.add_argument("--n-boot", type=int, default=1000)
    verdict_parser.add_argument("--refits", type=int, default=10)
    table_parser = commands.add_parser("table", help="the pooled rows of run folders' reports side by side")
    table_parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "fit":
        fit(args.folder, args.out, args.seed)
    elif args.command == "verdict":
        verdict(args.folders, args.out, args.seed, args.n_boot, args.refits)
    elif args.command == "table":
        table(args.folders)
    else:
        transfer(args.source, args.targets, args.seed, args.n_boot)


if __name__ == "__main__":
    main()
