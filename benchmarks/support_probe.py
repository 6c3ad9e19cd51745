"""The support probe from AttributionBench run folders (issue 75): fit the one shipped for a model, and measure
how a probe fitted on one model's claims transfers to others'.

    python benchmarks/support_probe.py fit docs/records/attributionbench/smollm2_dev \\
        rcattr/grounding/probes/smollm2-135m-instruct.json
    python benchmarks/support_probe.py transfer docs/records/attributionbench/smollm2_dev \\
        docs/records/attributionbench/qwen_dev160 docs/records/attributionbench/gemma_dev

    python benchmarks/support_probe.py table docs/records/attributionbench/smollm2_dev ...

``fit``: the penalty chosen by question-grouped cross-validation on every claim of the folder
(:func:`rcattr.eval.groundedness.probe_report.best_c`), then the probe fitted on them all, for the folder's
model (``config.json``; the default model when it names none). ``transfer``: a probe on the head-free
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
from rcattr.grounding.probe import SupportProbe
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
    c = best_c(claims, labels, groups, seed)
    model = json.loads((folder / "config.json").read_text())["model"] or DEFAULT_MODEL
    probe = SupportProbe.fit(claims, labels, Path(model).name, c, groups, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    probe.save(out)
    cuts = ", ".join(f"{name} {cut:.3f}" for name, cut in probe.cuts.items())
    print(f"{len(rows)} claims of {probe.model} ({probe.layers} x {probe.heads} heads), C = {c}, cuts {cuts}: {out}")


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
    table_parser = commands.add_parser("table", help="the pooled rows of run folders' reports side by side")
    table_parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "fit":
        fit(args.folder, args.out, args.seed)
    elif args.command == "table":
        table(args.folders)
    else:
        transfer(args.source, args.targets, args.seed, args.n_boot)


if __name__ == "__main__":
    main()
