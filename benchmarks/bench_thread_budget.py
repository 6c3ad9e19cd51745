"""A process limited to one thread stays at one thread after rcattr's numba kernels (issue 48, case 1).

Each run is a fresh process that calls ``torch.set_num_threads(1)``, loads the default offline model
(SmolLM2-135M-Instruct), then times greedy ``generate`` of ``--new-tokens`` tokens and one ``attribute()`` of
the built-in demo example, once before and ``--repeats`` times after a first ``attribute()`` has run rcattr's
numba kernels. It prints torch's thread count after them and the ratio of the times after to those before.
Two processes are measured side by side, ``--repeats`` rounds interleaved: rcattr as it is (the kernels run
within the caller's thread budget and leave it as found) and, for reference, the same process with that
guard removed (``rcattr.stats.ranks._caller_threads`` a no-op: numba's OpenMP threads then set the count
torch shares to every core, as before the fix). With ``--load N``, N busy processes hold cores meanwhile, as
a machine running other work (or parallel benchmark shards) would: where oversubscription shows most.

    python benchmarks/bench_thread_budget.py --load 1 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys

_PROCESS = """
import contextlib, json, sys, time
import torch
torch.set_num_threads(1)
from rcattr import RCAttributor, load_model
from rcattr.demo import ANSWER, example_input
if sys.argv[1] == "unguarded":
    import rcattr.stats.ranks
    rcattr.stats.ranks._caller_threads = contextlib.nullcontext
new_tokens, repeats = int(sys.argv[2]), int(sys.argv[3])
model, tokenizer = load_model()
attributor = RCAttributor(model, tokenizer)
ids = tokenizer("The Eiffel Tower is", return_tensors="pt")["input_ids"]

def timed(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start

def generate():
    model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)

def attribute():
    attributor.attribute(example_input(), ANSWER)

before = {"generate": timed(generate)}
before["attribute"] = timed(attribute)  # the first: numba's threads start here
after = {"generate": [], "attribute": []}
for _ in range(repeats):
    after["generate"].append(timed(generate))
    after["attribute"].append(timed(attribute))
print(json.dumps({"threads": torch.get_num_threads(), "before": before, "after": after}))
"""


def _busy() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--new-tokens", type=int, default=32, help="tokens generated per generate (default 32)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timings after the first attribute() (default 3)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the two processes (default 1)")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the runs (default 0)")
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    runs: dict[str, list[dict]] = {"rcattr": [], "unguarded": []}
    try:
        for _ in range(args.rounds):
            for mode in runs:
                out = subprocess.run(
                    [sys.executable, "-c", _PROCESS, mode, str(args.new_tokens), str(args.repeats)],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        for hog in hogs:
            hog.terminate()
    print(f"{args.load} busy process(es); one thread asked for; median seconds (after / before)")
    print("| process | threads after | generate before | generate after | x | attribute after | x first |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, results in runs.items():
        threads = sorted({r["threads"] for r in results})
        gen_before = statistics.median(r["before"]["generate"] for r in results)
        gen_after = statistics.median(t for r in results for t in r["after"]["generate"])
        first = statistics.median(r["before"]["attribute"] for r in results)
        att_after = statistics.median(t for r in results for t in r["after"]["attribute"])
        print(
            f"| {mode} | {threads} | {gen_before:.2f} | {gen_after:.2f} | {gen_after / gen_before:.2f} | "
            f"{att_after:.2f} | {att_after / first:.2f} |"
        )


if __name__ == "__main__":
    main()
