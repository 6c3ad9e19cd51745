"""Render the report of every committed record folder again, from its rows, with the code as it stands.

What it is for: a refactor changes no figure. Render every record folder before and after, and diff the two
output folders:

    python benchmarks/rerender_records.py --out /tmp/renders_before            # on the code before
    python benchmarks/rerender_records.py --out /tmp/renders_after --compare /tmp/renders_before

A record folder is a folder under ``docs/records/`` with a ``config.json``. Each is copied to a temporary
folder (its committed ``results.json`` and ``results.md`` left out), the benchmark that wrote it is told
from its settings and row files, and that benchmark's ``--report-only`` runs on the copy, in its own
process (``python -m rcattr.eval.NAME``, with this checkout first on ``PYTHONPATH``), with the command line
that reproduces the run's settings: those of ``config.json`` (the run store refuses a folder whose
settings differ), with the committed report's own where ``results.json`` keeps them (a resumed run's
methods), and those neither keeps (the citation and groundedness benchmarks' datasets, tasks and limits)
read off the row files. The two reports go to ``OUT/<folder relative to docs/records>/``.
Commands run from the checkout's root, where relative model paths in the settings
(``runs/models/...``) must resolve. The KV benchmarks' presses need kvpress: those folders run with
``--kvpress-python`` (default ``.venv-kvpress/bin/python``).

``--compare OTHER`` then diffs ``OUT`` against ``OTHER`` (another run's ``--out``; ``docs/records``
itself checks the renders against the committed reports), leaving out what holds timings: JSON keys and
Markdown lines that name seconds. Prints one line per folder and a summary; exits 1 if a folder failed to
render or a report differs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "docs" / "records"
REPORTS = ("results.json", "results.md")
TIMING = re.compile(r"second|tokens/s|s / example", re.IGNORECASE)  # keys and lines that hold timings
TIMEOUT_S = 3600


class Unrenderable(Exception):
    """The folder's benchmark cannot be told, or its settings cannot be given on its command line."""


@dataclass(frozen=True)
class Render:
    """The command line that renders one record folder again."""

    module: str
    args: list[str]
    needs_kvpress: bool = False


def record_folders(only: str | None) -> list[Path]:
    """Every record folder, relative to ``docs/records``, whose path contains ``only``."""
    folders = sorted(path.parent.relative_to(RECORDS) for path in RECORDS.rglob("config.json"))
    return [folder for folder in folders if only is None or only in str(folder)]


def row_files(folder: Path) -> dict[str, list[Path]]:
    """The row files of ``folder`` by stem (``X.jsonl``, ``X.jsonl.gz``, ``X.shard-I-of-N.jsonl``)."""
    stems: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("*.jsonl*")):
        stem = re.sub(r"(\.shard-\d+-of-\d+)?\.jsonl(\.gz)?$", "", path.name)
        stems.setdefault(stem, []).append(path)
    return stems


def row_ids(paths: Sequence[Path]) -> set[str]:
    """The distinct ``id`` of the rows in ``paths`` (a partial last line left out)."""
    ids = set()
    for path in paths:
        opener: Any = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as lines:
            for line in lines:
                try:
                    ids.add(str(json.loads(line)["id"]))
                except (json.JSONDecodeError, KeyError):
                    continue
    return ids


def option(name: str, value: Any) -> list[str]:
    """``[name, value]`` (lists comma-joined), or nothing when ``value`` is None (the default)."""
    if value is None:
        return []
    return [name, ",".join(map(str, value)) if isinstance(value, list) else str(value)]


def attribution(config: dict[str, Any]) -> Render:
    if config["max_tokens"] is None:
        raise Unrenderable("max_tokens null cannot be given on the command line")
    limits = config["method_limits"]  # each method of the run without a limit gets N=0 (lifts a default)
    method_limits = [f"{m}={limits.get(m, 0)}" for m in dict.fromkeys([*config["methods"], *limits])]
    args = [
        *option("--dataset", config["dataset"]),
        *option("--split", config["split"]),
        *option("--methods", config["methods"]),
        *option("--limit", config["limit"]),
        *[arg for item in method_limits for arg in ("--method-limit", item)],
        *option("--top-k", config["top_k"]),
        *option("--granularity", config["granularity"]),
        *option("--max-tokens", config["max_tokens"]),
        *option("--model", config["model"]),
        *option("--hidden-state-layer", config["hidden_state_layer"]),
        *option("--ig-steps", config["ig_steps"]),
        *option("--faithfulness", config["faithfulness"]),
        *option("--lds-samples", config["lds_samples"]),
        *option("--at2-estimator", config.get("at2_estimator")),
        *option("--batch-size", config.get("batch_size")),
        *option("--skip", config.get("skip")),  # issue 74's held-out records
    ]
    if long := config.get("long_context"):
        args += ["--context-tokens", str(long["tokens"])]
        args += ["--gold-position", long["position"], "--distractor-seed", str(long["seed"])]
    return Render("rcattr.eval.attribution", args)


def kv(config: dict[str, Any]) -> Render:
    args = [
        *option("--dataset", config["dataset"]),
        *option("--methods", config["methods"]),
        *option("--ratios", config["ratios"]),
        *option("--c", config["c"]),
        *option("--window", config["window"]),
        *option("--rc-variants", config.get("rc_variants")),
        *option("--limit", config["limit"]),
        *option("--context-tokens", config["context_tokens"]),
        *option("--max-new-tokens", config["max_new_tokens"]),
        *option("--model", config["model"]),
        # the keys issue 72 added, in config.json where they are not the default
        *option("--protocol", config.get("protocol")),
        *option("--questions", config.get("questions")),
        *option("--rc-ratios", config.get("rc_ratios")),
    ]
    return Render("rcattr.eval.kv", args, needs_kvpress=config["methods"] != ["rc"])  # the others are presses


def kv_long(config: dict[str, Any]) -> Render:
    args = [
        *option("--task", config["task"]),
        *option("--methods", config["methods"]),
        *option("--budget", config["budget"]["tokens"]),
        *option("--every", config["budget"]["every"]),
        *option("--limit", config["limit"]),
        *option("--context-tokens", config["context_tokens"]),
        *option("--prefix-tokens", config["prefix_tokens"]),
        *option("--max-new-tokens", config["max_new_tokens"]),
        *option("--model", config["model"]),
    ]
    presses = any(name.startswith("kvpress_") for name in config["methods"])
    return Render("rcattr.eval.kv_long", args, needs_kvpress=presses)


def citations(config: dict[str, Any], rows: dict[str, list[Path]]) -> Render:
    """Datasets and limit are not in ``config.json``: the datasets with rows, and their most records."""
    datasets = sorted(stem.removeprefix("sentences-") for stem in rows if stem.startswith("sentences-"))
    if not datasets:
        raise Unrenderable("no sentences-DATASET rows")
    limit = max(len(row_ids(paths)) for paths in rows.values())
    args = [
        *option("--model", config["model"]),
        *option("--max-tokens", config["max_tokens"]),
        *option("--seed", config["seed"]),
        "--datasets",
        *datasets,
        "--limit",
        str(limit),
    ]
    return Render("rcattr.eval.citations", args)


def groundedness(config: dict[str, Any], rows: dict[str, list[Path]]) -> Render:
    """Tasks, datasets and limit are not in ``config.json``: the tasks and datasets with rows, and the most
    pairs (two rows each) or questions of a task."""
    paired = {"signals": "relevance", "signals-unanswerable": "unanswerable", "signals-removed": "removed"}
    tasks = [paired[stem] for stem in paired if stem in rows]
    datasets = sorted(stem.removeprefix("tokens-") for stem in rows if stem.startswith("tokens-"))
    tasks += ["unsupported"] if datasets else []
    tasks += ["errors"] if "errors" in rows else []
    tasks += ["attributionbench"] if "claims" in rows else []
    if not tasks:
        raise Unrenderable(f"no rows of a groundedness task ({', '.join(rows) or 'no row files'})")
    counts = [len(row_ids(rows[stem])) // 2 for stem in paired if stem in rows]
    counts += [len(row_ids(rows["errors"]))] if "errors" in rows else []
    args = [
        *option("--model", config["model"]),
        *option("--max-new-tokens", config["max_new_tokens"]),
        *option("--seed", config["seed"]),
        *option("--max-edits", config.get("max_edits")),
        *option("--claims-file", config.get("claims_file")),
        "--task",
        *tasks,
        *(["--datasets", *datasets] if datasets else []),
        *option("--limit", max(counts, default=None)),
    ]
    return Render("rcattr.eval.groundedness", args)


def render_command(folder: Path) -> Render:
    """How the benchmark that wrote ``folder`` renders it again, told from its settings' keys."""
    config = json.loads((folder / "config.json").read_text())
    if (folder / "results.json").exists():  # the committed report's own settings, where it keeps them: a run
        # resumed with more methods claims them all (kv/kv-squad-100: KVgrad on 27 of its 100 records)
        config |= json.loads((folder / "results.json").read_text()).get("config", {})
    rows = row_files(folder / "records") | row_files(folder)
    if not rows:
        raise Unrenderable("no row files (records*.jsonl[.gz]) to render from")
    if {"dataset", "split", "method_limits"} <= config.keys():
        return attribution(config)
    if {"dataset", "ratios", "c"} <= config.keys():
        return kv(config)
    if {"task", "budget"} <= config.keys():
        return kv_long(config)
    if config.keys() == {"model", "max_tokens", "seed"}:
        return citations(config, rows)
    if {"model", "max_new_tokens", "seed"} <= config.keys():
        return groundedness(config, rows)
    raise Unrenderable(f"no benchmark has the settings {sorted(config)}")


def render(relative: Path, out: Path, python: str, kvpress_python: str) -> str | None:
    """Render ``docs/records/relative`` into ``out/relative``; None, or why it failed."""
    try:
        command = render_command(RECORDS / relative)
    except Unrenderable as error:
        return str(error)
    if command.needs_kvpress and not Path(kvpress_python).exists():
        return f"its presses need kvpress: no {kvpress_python} (--kvpress-python)"
    with tempfile.TemporaryDirectory(prefix="rerender-") as scratch:
        copy = Path(scratch) / "run"
        shutil.copytree(RECORDS / relative, copy, ignore=shutil.ignore_patterns(*REPORTS))
        interpreter = kvpress_python if command.needs_kvpress else python
        argv = [interpreter, "-m", command.module, *command.args, "--out", str(copy), "--report-only"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        try:
            done = subprocess.run(
                argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            return f"no report after {TIMEOUT_S} s"
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
            return f"exit {done.returncode}: {lines[-1]}"
        missing = [name for name in REPORTS if not (copy / name).exists()]
        if missing:
            return f"exit 0 but no {', '.join(missing)} written"
        (out / relative).mkdir(parents=True, exist_ok=True)
        for name in REPORTS:
            shutil.copyfile(copy / name, out / relative / name)
    return None


def without_timings(path: Path) -> Any:
    """The report at ``path`` less its timings: JSON keys, or Markdown lines, that name seconds."""
    text = path.read_text()
    if path.suffix == ".md":
        return [line for line in text.splitlines() if not TIMING.search(line)]

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not TIMING.search(k)}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(text))


def compare(out: Path, other: Path, folders: Sequence[Path]) -> list[str]:
    """The reports of ``folders`` that differ between ``out`` and ``other`` (timings left out), each with
    how: one line per file."""
    differences = []
    for folder in folders:
        for name in REPORTS:
            mine, theirs = out / folder / name, other / folder / name
            if mine.exists() != theirs.exists():
                differences.append(f"{folder / name}: only in {out if mine.exists() else other}")
            elif mine.exists() and without_timings(mine) != without_timings(theirs):
                differences.append(f"{folder / name}: differs")
    return differences


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path, help="where the reports go (OUT/FOLDER/results.*)")
    parser.add_argument("--only", help="only the record folders whose path (under docs/records) holds this")
    parser.add_argument("--compare", type=Path, metavar="OTHER_DIR", help="then diff OUT against OTHER_DIR")
    parser.add_argument(
        "--python", default=sys.executable, help="the benchmarks' interpreter (default: this)"
    )
    parser.add_argument(
        "--kvpress-python",
        default=str(ROOT / ".venv-kvpress" / "bin" / "python"),
        help="the interpreter of the KV folders whose methods are kvpress presses (default .venv-kvpress)",
    )
    args = parser.parse_args(argv)
    folders = record_folders(args.only)
    failed: dict[Path, str] = {}
    start = time.perf_counter()
    for folder in folders:
        began = time.perf_counter()
        error = render(folder, args.out, args.python, args.kvpress_python)
        took = f"({time.perf_counter() - began:.0f} s)"
        print(f"{folder}: ok {took}" if error is None else f"{folder}: FAILED {took}: {error}", flush=True)
        if error is not None:
            failed[folder] = error
    print(
        f"{len(folders) - len(failed)} of {len(folders)} record folders rendered into {args.out}, "
        f"{len(failed)} failed, in {time.perf_counter() - start:.0f} s"
    )
    differences = compare(args.out, args.compare, folders) if args.compare else []
    for line in differences:
        print(line)
    if args.compare:
        print(f"{len(differences)} report(s) differ from {args.compare} (timings left out)")
    return 1 if failed or differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
