"""Start-up cost: ``import rcattr``, ``from rcattr import RCAttributor`` and ``rcattr --help`` against
importing torch + transformers, each in a fresh interpreter, runs interleaved (the machine is noisy).

Two baselines: ``import torch, transformers`` (transformers imports its submodules lazily), and the
same plus ``transformers.PreTrainedModel``, which any code that loads a model imports.

Usage::

    python benchmarks/bench_import.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS: dict[str, list[str]] = {
    "import torch, transformers": [sys.executable, "-c", "import torch, transformers"],
    "... + transformers.PreTrainedModel": [
        sys.executable,
        "-c",
        "import torch, transformers; transformers.PreTrainedModel",
    ],
    "import rcattr": [sys.executable, "-c", "import rcattr"],
    "from rcattr import RCAttributor": [sys.executable, "-c", "from rcattr import RCAttributor"],
    "rcattr --help": [sys.executable, "-m", "rcattr", "--help"],
}


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per command (default 5)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():  # warm the file cache once
        _seconds(command)
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            times[name].append(_seconds(command))
    baseline = statistics.median(times["import torch, transformers"])
    print(f"median of {args.runs} fresh interpreters; ratio against `import torch, transformers`")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"  {name:36s} {median:6.2f} s  {median / baseline:5.2f}x")


if __name__ == "__main__":
    main()
