"""A compressed context saved and loaded in a new process: the same answers and bytes as in memory, the room it takes
on disk against the same context saved uncompressed, and loading and answering against prefilling again.

For each of ``--contexts`` SQuAD v2 dev articles (their leading paragraphs up to ``--context-tokens``, three
questions each, as ``benchmarks/bench_compress_once.py`` builds them): ``compress_context(..., ratio=R)`` answers
the questions greedily and is saved, and so is ``ratio=0`` (every entry kept, the same format); a fresh
interpreter then loads the saved context and answers the same questions, timed (the load alone, and with the
answers), against a fresh interpreter that compresses the document again and answers (both load the model first,
untimed). Printed: whether the answers and
bytes held agree, the saved sizes and their ratio, and the medians of the two timings and their ratio, measured
side by side in one run.

    python benchmarks/bench_saved_context.py --contexts 3
    python benchmarks/bench_saved_context.py --model gemma-3-270m --contexts 2
    python benchmarks/bench_saved_context.py --model runs/models/qwen2.5-coder-0.5b-instruct --contexts 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_compress_once import build_contexts

from rcattr import load_model
from rcattr.kvcache import CompressedContext, compress_context


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir())


def child(args: argparse.Namespace) -> None:
    """In a fresh interpreter: load the model, then (timed) load the saved context or compress the document
    again, and answer every question; print the answers, the bytes held and the seconds."""
    mode, source, questions = args.child
    model, tokenizer = load_model(args.model)
    start = time.perf_counter()
    if mode == "load":
        context = CompressedContext.load(source, model, tokenizer)
    else:
        context = compress_context(model, tokenizer, Path(source).read_text(), ratio=args.ratio)
    ready = time.perf_counter() - start
    answers = [context.generate(q, max_new_tokens=args.max_new_tokens) for q in json.loads(questions)]
    seconds = time.perf_counter() - start
    print(json.dumps({"answers": answers, "bytes": context.nbytes(), "ready": ready, "seconds": seconds}))


def in_new_process(args: argparse.Namespace, mode: str, source: Path, questions: list[str]) -> dict:
    command = [sys.executable, __file__, *sys.argv[1:], "--child", mode, str(source), json.dumps(questions)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="a model name or folder (default: the offline default)")
    parser.add_argument("--contexts", type=int, default=3)
    parser.add_argument("--context-tokens", type=int, default=2048)
    parser.add_argument("--ratio", type=float, default=0.5)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)  # MODE SOURCE QUESTIONS
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return
    model, tokenizer = load_model(args.model)
    print(f"{args.model or 'the default model'}, {args.context_tokens} tokens, ratio {args.ratio}")
    print(
        "| context | tokens | answers agree | bytes agree | saved MiB | uncompressed MiB | size ratio | load s "
        "| compress s | load / compress | load + answers s | compress + answers s | with answers |"
    )
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    sizes, times = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for number, built in enumerate(build_contexts(tokenizer, args.contexts, 3, args.context_tokens)):
            questions = [q.question for q in built.questions]
            context = compress_context(model, tokenizer, built.text, ratio=args.ratio)
            answers = [context.generate(q, max_new_tokens=args.max_new_tokens) for q in questions]
            saved = context.save(Path(scratch) / f"{number}-compressed")
            whole = compress_context(model, tokenizer, built.text, ratio=0.0).save(
                Path(scratch) / f"{number}-whole"
            )
            document = Path(scratch) / f"{number}.txt"
            document.write_text(built.text)
            loaded = in_new_process(args, "load", saved, questions)
            again = in_new_process(args, "compress", document, questions)
            size = folder_bytes(saved) / folder_bytes(whole)
            sizes.append(size)
            times.append(loaded["ready"] / again["ready"])
            print(
                f"| {built.title} | {context.n_tokens} | {loaded['answers'] == answers == again['answers']} "
                f"| {loaded['bytes'] == context.nbytes()} | {folder_bytes(saved) / 2**20:.1f} "
                f"| {folder_bytes(whole) / 2**20:.1f} | {size:.3f} | {loaded['ready']:.2f} | {again['ready']:.2f} "
                f"| {times[-1]:.2f} | {loaded['seconds']:.2f} | {again['seconds']:.2f} "
                f"| {loaded['seconds'] / again['seconds']:.2f} |"
            )
            context.close()
    print(
        f"\nmedian size ratio {statistics.median(sizes):.3f}; median load / compress {statistics.median(times):.2f}"
    )


if __name__ == "__main__":
    main()
