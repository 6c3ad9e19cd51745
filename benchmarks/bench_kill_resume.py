"""Kill benchmark runs at random points, resume them, and compare with an uninterrupted run; time how fast a
second run on a folder in use refuses.

    python benchmarks/bench_kill_resume.py [--runner attribution|groundedness] [--trials 20] [--limit 6]

One uninterrupted run of the runner (real model, real data) gives the reference rows and the mean time between
two rows. Each trial starts the same command on a fresh folder, sends it SIGKILL once it has written a number of
rows drawn uniformly (0 to all but one) and a delay drawn uniformly from that mean later, runs the command again, and checks that every record is on disk exactly
once and that the rows equal the reference's (timings aside). Then, ``--trials`` times, a second command on a
folder that a live run holds is timed from its start to its exit (it must refuse, naming the holder).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rcattr.eval.common.run_store import read_rows

TIMINGS = {"seconds"}


def _command(runner: str, limit: int, methods: str, out: Path) -> list[str]:
    if runner == "attribution":
        options = ["--dataset", "quotesum", "--methods", methods]
    else:
        options = ["--task", "relevance"]
    return [sys.executable, "-m", f"rcattr.eval.{runner}", *options, "--limit", str(limit), "--out", str(out)]


def _rows(out: Path) -> dict[str, list[dict]]:
    """Every file of rows of a run folder, by stem, timings left out."""
    folder = out / "records"
    stems = sorted({path.name.split(".")[0] for path in folder.glob("*.jsonl")})
    return {
        stem: [{k: v for k, v in row.items() if k not in TIMINGS} for row in read_rows(folder, stem)]
        for stem in stems
        if stem != "peak_memory"  # one line per method and run: a resumed run adds one
    }


def _rows_on_disk(out: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in (out / "records").glob("*.jsonl"))


def _row_times(out: Path, process: subprocess.Popen) -> list[float]:
    """When each row of a running command appeared in its run folder (polled until the command exits)."""
    times: list[float] = []
    while process.poll() is None:
        times += [time.monotonic()] * (_rows_on_disk(out) - len(times))
        time.sleep(0.01)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runner", choices=("attribution", "groundedness"), default="attribution")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--limit", type=int, default=6, help="records per run (default 6)")
    parser.add_argument(
        "--methods", default="random,bm25,rc", help="attribution methods (default random,bm25,rc)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="kill-resume-"))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}

    reference_out = root / "reference"
    process = subprocess.Popen(_command(args.runner, args.limit, args.methods, reference_out), **quiet)
    times = _row_times(reference_out, process)
    assert process.wait() == 0 and times, "the reference run failed"
    total = sum(map(len, (reference := _rows(reference_out)).values()))
    gap = (times[-1] - times[0]) / max(1, len(times) - 1)
    print(f"reference: {total} rows, {gap:.2f} s apart on average")

    failures = missed = 0
    for trial in range(args.trials):
        out = root / f"trial-{trial}"
        command = _command(args.runner, args.limit, args.methods, out)
        after_rows = rng.randrange(0, total)  # kill after this many rows, somewhere before the next one
        delay = rng.uniform(0, gap)
        process = subprocess.Popen(command, **quiet)
        while process.poll() is None and (not (out / "records").exists() or _rows_on_disk(out) < after_rows):
            time.sleep(0.005)
        time.sleep(delay)
        finished_first = process.poll() is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        on_disk = sum(map(len, _rows(out).values())) if (out / "records").exists() else 0
        resumed = subprocess.run(command, capture_output=True, text=True)
        rows = _rows(out)
        once = all(len({json.dumps(r.get("id")) for r in rs}) == len(rs) for rs in rows.values())
        same = rows == reference
        aside = len(list((out / "records").glob("*.partial")))
        failures += not (resumed.returncode == 0 and once and same)
        missed += finished_first
        print(
            f"trial {trial:2d}: killed {delay:4.2f} s after row {after_rows:2d}, {on_disk:3d} rows on disk, partial lines set aside: "
            f"{aside}; resumed: exit {resumed.returncode}, every record once: {once}, rows equal the reference: "
            f"{same}" + (" (the run had finished before the kill)" if finished_first else "")
        )

    refusals = []
    for trial in range(args.trials):
        out = root / f"busy-{trial}"
        holder = subprocess.Popen(_command(args.runner, args.limit, args.methods, out), **quiet)
        while not (out / ".lock").exists() or not (out / ".lock").stat().st_size:
            time.sleep(0.01)
        start = time.monotonic()
        second = subprocess.run(
            _command(args.runner, args.limit, args.methods, out), capture_output=True, text=True
        )
        refusals.append(time.monotonic() - start)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        refused = second.returncode != 0 and f"being written by pid {holder.pid}" in second.stderr
        failures += not refused
        if not refused:
            print(
                f"busy {trial}: the second run did not refuse: exit {second.returncode}, {second.stderr[-300:]}"
            )
    print(
        f"a second run on a folder in use: refused {args.trials} times, from its start to its exit median "
        f"{statistics.median(refusals):.2f} s, max {max(refusals):.2f} s"
    )
    print(f"kills that landed before the run's end: {args.trials - missed} of {args.trials}")
    print("all trials passed" if not failures else f"{failures} trial(s) failed")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
