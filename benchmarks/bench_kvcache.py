"""RCKVCache against transformers' DynamicCache on the default model: prefill time, decode time, bytes held.

The prompt is SQuAD v2 dev paragraphs (in file order) up to the asked number of tokens, followed by the
question of the last paragraph, chat-formatted. For every prompt length the variants run interleaved
in one process, ``--repeats`` times, and the medians are compared as ratios (the machine is noisy:
only side-by-side figures mean anything):

- ``default``: ``DynamicCache``, no eviction;
- ``rc``: ``RCKVCache(model, c, window)``, or ``RCKVCache(model, budget=B)`` with ``--budget``;
- ``rc+decode``: the same with decode-time eviction every ``--decode-every`` tokens (and
  ``rc+decode+question`` with the question's window too, :class:`~rcattr.eval.kv_long.question.QuestionWindow`,
  with ``--question-window``);
- ``snapkv``: kvpress's ``SnapKVPress`` at the compression ratio RCKVCache reached, when kvpress is
  importable (its environment pins transformers < 5.3), to compare the scoring cost at prefill. Its
  compression column is the ratio it was given; its bytes held are measured.
- with ``--ratio R``, what compressing a context once costs (issue 72): ``rc ratio``, ``RCKVCache(model,
  ratio=R)``; ``rc ratio+replay``, the same share scored against a replay of the prompt by
  the max attention weight (:func:`rcattr.kvcache.replay.replay_prefill` with ``SoftmaxMaxScorer``, a prefill of
  ``2n + p`` tokens; its decode starts from the prompt's last token again); ``rc ratio+distilled``, the same share
  scored by the replay score predicted from each layer's attention input (:class:`~rcattr.kvcache.distilled.DistilledScorer`
  with the predictor shipped for the model, where one ships); and ``kvzip``, kvpress's ``KVzipPress`` at ``R``, when
  kvpress is importable.

- with ``--prefill-chunk C``, a chunked prefill of ``C`` tokens per forward (:func:`rcattr.kvcache.chunked_prefill`,
  issue 73): ``default chunked`` (``DynamicCache``, uncompressed) and ``rc chunked`` (``rc``'s cache, each chunk
  cut before the next arrives), and ``rc ratio chunked`` with ``--ratio``.

Prefill is one ``model(prompt, **cache_argument(model, cache), logits_to_keep=1)``; decode feeds
``--new-tokens`` greedy tokens one at a time. ``bytes held`` is what each cache holds after decoding, ``peak``
the most it held at any point of the prefill (measured after every layer's update: an RCKVCache's eviction
comes after the attention, and one forward holds the whole prompt until its last layer has scored). With
``--isolate`` every variant and repeat runs in a process of its own, whose peak resident memory
(``VmHWM``: model, activations and cache) is reported too, and how far it grew above the resident memory after a
warm-up forward (``RSS growth``: what the prompt, its cache and its scoring cost the process). ``--variants`` keeps some of them; ``--model``
measures another model (e.g. a Qwen2 or Gemma-3 folder, at 16k and 32k tokens).

    python benchmarks/bench_kvcache.py --lengths 1000 4000 --c 1.0 --window 16
    python benchmarks/bench_kvcache.py --lengths 2000 --new-tokens 256 --decode-every 32 --budget 256 --question-window
    python benchmarks/bench_kvcache.py --lengths 2000 --ratio 0.5 --new-tokens 8
    python benchmarks/bench_kvcache.py --lengths 4000 8000 --ratio 0.5 --prefill-chunk 1024 --isolate \
        --variants default "default chunked" "rc ratio" "rc ratio chunked"
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from transformers import DynamicCache

from rcattr.eval.kv.data import load_squad
from rcattr.eval.kv.methods import attention_scale, local_name_or_path, replay_prompt_ids
from rcattr.eval.kv.scorers import SoftmaxMaxScorer
from rcattr.eval.kv_long.question import QuestionWindow
from rcattr.kvcache import (
    EvictionPolicy,
    Ratio,
    RCKVCache,
    Threshold,
    TokenBudget,
    cache_argument,
    cache_nbytes,
    chunked_prefill,
)
from rcattr.kvcache.distilled import DistilledScorer, ScorePredictor
from rcattr.kvcache.replay import replay_prefill
from rcattr.runtime.models import load_model

try:
    from kvpress import KVzipPress, SnapKVPress
except ImportError:  # kvpress needs transformers < 5.3
    KVzipPress = SnapKVPress = None


def squad_prompt(tokenizer, tokens: int) -> torch.Tensor:
    """``[1, n]`` chat-formatted ids (plain text for a model without a chat template): SQuAD v2 paragraphs up to
    about ``tokens`` tokens, then a question."""
    questions = {}  # paragraph -> its first answerable question
    for record in load_squad():
        questions.setdefault(record.context, record.question)
    context, question, used = [], "", 0
    for paragraph, first_question in questions.items():
        length = len(tokenizer(paragraph)["input_ids"])
        if used + length > tokens and context:
            break
        context.append(paragraph)
        used += length
        question = first_question
    content = "\n\n".join(context) + f"\n\nAnswer in a few words. Question: {question}"
    if tokenizer.chat_template is None:  # a base model (Gemma-3-270m)
        return tokenizer(content + "\nAnswer:", return_tensors="pt")["input_ids"]
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": content}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]


class PeakBytes:
    """The most bytes ``cache`` holds at any point, measured after every layer's update (a method of the instance
    that wraps its class's ``update``)."""

    def __init__(self, cache) -> None:
        self.peak = 0
        update = cache.update

        def measured(*args, **kwargs):
            out = update(*args, **kwargs)
            self.peak = max(self.peak, cache_nbytes(cache))
            return out

        cache.update = measured


def run(model, ids: torch.Tensor, make_cache: Callable, fill: Callable, new_tokens: int) -> dict:
    """One variant: ``prefill`` seconds (``fill(cache)``: the next token ``[1, 1]``), ``decode`` seconds per
    token, the ``peak`` bytes held during the prefill, the bytes ``held`` after decoding, the ``compression``
    (an RCKVCache's own), and the ``padding`` share of the bytes held."""
    cache = make_cache()
    peak = PeakBytes(cache)
    start = time.perf_counter()
    token = fill(cache)
    prefill = time.perf_counter() - start
    peak_bytes = peak.peak
    start = time.perf_counter()
    for _ in range(new_tokens):
        token = model(token, **cache_argument(model, cache)).logits[:, -1:].argmax(-1)
    decode = (time.perf_counter() - start) / new_tokens
    held = cache_nbytes(cache)
    rc = isinstance(cache, RCKVCache)
    return {
        "prefill": prefill,
        "decode": decode,
        "peak": peak_bytes,
        "held": held,
        "compression": cache.compression_ratio if rc else None,
        "padding": cache.padding_nbytes() / held if rc else 0.0,
    }


def resident(field: str = "VmHWM") -> int:
    """This process's peak (``VmHWM``) or current (``VmRSS``) resident memory in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def prefill(model, ids: torch.Tensor, press: Callable = contextlib.nullcontext) -> Callable:
    """Fill a cache with ``ids`` in one forward, inside ``press()``; the next greedy token."""

    def fill(cache) -> torch.Tensor:
        with press():
            return model(ids, **cache_argument(model, cache), logits_to_keep=1).logits[:, -1:].argmax(-1)

    return fill


def chunked(model, ids: torch.Tensor, chunk: int) -> Callable:
    """Fill a cache with ``ids``, ``chunk`` tokens per forward (:func:`chunked_prefill`); the next greedy token."""

    def fill(cache) -> torch.Tensor:
        return chunked_prefill(model, cache, ids, chunk_size=chunk).argmax(-1, keepdim=True)

    return fill


def replayed(model, ids: torch.Tensor) -> Callable:
    """Fill an RCKVCache with ``ids`` scored against a replay of them; decoding starts from the last token."""
    prompt = replay_prompt_ids(model)

    def fill(cache) -> torch.Tensor:
        replay_prefill(model, cache, ids, prompt)
        return ids[:, -1:]

    return fill


def variants(
    model,
    ids: torch.Tensor,
    c: float,
    window: int,
    ratio: float | None,
    decode_every: int | None,
    budget: int | None,
    question_window: bool,
    once_ratio: float | None,
    chunk: int | None,
) -> Iterator[tuple[str, Callable, Callable]]:
    threshold = {"c": c} if budget is None else {"budget": budget}  # with a budget, at prefill too
    plain = prefill(model, ids)
    yield "default", lambda: DynamicCache(config=model.config), plain
    yield "rc", lambda: RCKVCache(model, window=window, **threshold), plain
    if chunk is not None:
        yield "default chunked", lambda: DynamicCache(config=model.config), chunked(model, ids, chunk)
        if budget is None:  # a chunked prefill cuts each chunk on its own, which a budget of the whole cannot
            yield (
                "rc chunked",
                lambda: RCKVCache(model, window=window, **threshold),
                chunked(model, ids, chunk),
            )
    if decode_every is not None:
        yield (
            "rc+decode",
            lambda: RCKVCache(model, window=window, decode_every=decode_every, **threshold),
            plain,
        )
        if question_window:  # the long-generation benchmark's rc_question
            rule = TokenBudget(budget) if budget is not None else Threshold(c)
            decode = QuestionWindow(decode_every, None if budget is not None else Threshold(c, scope="layer"))
            policy = EvictionPolicy(rule, decode=decode)
            yield (
                "rc+decode+question",
                lambda: RCKVCache(model, window=window, policy=policy),
                plain,
            )
    if SnapKVPress is not None and ratio is not None:
        press = SnapKVPress(compression_ratio=ratio, window_size=window)
        yield "snapkv", lambda: DynamicCache(config=model.config), prefill(model, ids, lambda: press(model))
    if once_ratio is not None:
        yield "rc ratio", lambda: RCKVCache(model, window=window, ratio=once_ratio), plain
        if chunk is not None:
            yield (
                "rc ratio chunked",
                lambda: RCKVCache(model, window=window, ratio=once_ratio),
                chunked(model, ids, chunk),
            )
        predictor = ScorePredictor.shipped(model)
        if predictor is not None:  # the replay's score predicted from each layer's attention input
            distilled = EvictionPolicy(Ratio(once_ratio), DistilledScorer(predictor=predictor))
            yield "rc ratio+distilled", lambda: RCKVCache(model, window=window, policy=distilled), plain
        # the replay's best scorer (KVzip's statistic); RC's mean over the window would compare every key with
        # the replay's w x w own logits
        replay = EvictionPolicy(Ratio(once_ratio), SoftmaxMaxScorer(scale=attention_scale(model)))
        yield "rc ratio+replay", lambda: RCKVCache(model, window=window, policy=replay), replayed(model, ids)
        if KVzipPress is not None:
            kvzip = KVzipPress(compression_ratio=once_ratio)

            @contextlib.contextmanager
            def pressing() -> Iterator[None]:
                with local_name_or_path(model), kvzip(model):
                    yield

            yield "kvzip", lambda: DynamicCache(config=model.config), prefill(model, ids, pressing)


def measure(model, tokenizer, args: argparse.Namespace, length: int) -> Iterator[tuple[str, dict]]:
    """Every variant ``args`` asks for, once, at a prompt of about ``length`` tokens, in this process."""
    ids = squad_prompt(tokenizer, length)
    ratio = None
    if SnapKVPress is not None and (args.variants is None or "snapkv" in args.variants):
        probe = RCKVCache(model, c=args.c, window=args.window)  # SnapKV runs at the ratio RCKVCache reaches
        model(ids, **cache_argument(model, probe), logits_to_keep=1)
        ratio = round(probe.compression_ratio, 2)
    for name, make_cache, fill in variants(
        model,
        ids,
        args.c,
        args.window,
        ratio,
        args.decode_every,
        args.budget,
        args.question_window,
        args.ratio,
        args.prefill_chunk,
    ):
        if args.variants is None or name in args.variants:
            yield (
                name,
                run(model, ids, make_cache, fill, args.new_tokens)
                | {
                    "tokens": ids.shape[1],
                    "ratio": {"snapkv": ratio, "kvzip": args.ratio}.get(name),
                },
            )


def isolated(args: argparse.Namespace, length: int, name: str) -> dict:
    """``name`` measured once at ``length`` in a process of its own (its peak resident memory is its own)."""
    command = [sys.executable, __file__, *sys.argv[1:], "--child", str(length), name]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 4000], help="prompt tokens")
    parser.add_argument("--c", type=float, default=1.0)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32, help="greedy tokens decoded after prefill")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--decode-every",
        type=int,
        default=None,
        help="add RCKVCache with decode-time eviction every N tokens",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="entries per key head: rc and rc+decode keep this budget (instead of --c) at prefill too",
    )
    parser.add_argument(
        "--ratio",
        type=float,
        default=None,
        help="add what compressing once costs: RCKVCache(model, ratio=R), the same with a replay, KVzip at R",
    )
    parser.add_argument(
        "--question-window",
        action="store_true",
        help="add rc+decode+question: decode-time eviction also against the question's window",
    )
    parser.add_argument(
        "--prefill-chunk",
        type=int,
        default=None,
        help="add a chunked prefill of this many tokens per forward: default chunked, rc chunked (and rc ratio "
        "chunked with --ratio)",
    )
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="run every variant and repeat in a process of its own and report its peak resident memory",
    )
    parser.add_argument(
        "--variants", nargs="+", default=None, help="measure only these variants (and default)"
    )
    parser.add_argument("--model", default=None, help="a model name or folder (default: the offline default)")
    parser.add_argument(
        "--child", nargs=2, default=None, help=argparse.SUPPRESS
    )  # LENGTH NAME, for --isolate
    args = parser.parse_args()
    if args.question_window and args.decode_every is None:
        parser.error(
            "--question-window needs --decode-every: the question's window scores decode-time eviction"
        )
    if args.isolate and args.variants is None:
        parser.error("--isolate needs --variants: the names of the variants each process measures")
    if args.variants is not None and "default" not in args.variants:
        args.variants.insert(0, "default")  # every ratio is to it

    torch.set_grad_enabled(False)
    if args.child is not None:
        length, name = int(args.child[0]), args.child[1]
        model, tokenizer = load_model(args.model)
        model(
            torch.randint(100, 1000, (1, 256))
        )  # warm-up: the kernels' first allocations are not the cache's
        Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
        start = resident("VmRSS")
        args.variants = [name]
        ((_, measured),) = measure(model, tokenizer, args, length)
        print(json.dumps(measured | {"rss": resident(), "growth": resident() - start}))
        return
    if not args.isolate:
        model, tokenizer = load_model(args.model)
        model(torch.tensor([[1, 2, 3]]))  # warm-up
    print(
        f"transformers cache vs RCKVCache(c={args.c}, window={args.window}) on {args.model or 'the default model'}; "
        f"kvpress: {SnapKVPress is not None}; chunk: {args.prefill_chunk}; isolated: {args.isolate}"
    )
    print(
        "| prompt tokens | variant | prefill s | prefill / default | decode ms/token | decode / default "
        "| compression | bytes held | bytes / default | peak in prefill | peak / default | peak RSS "
        "| RSS / default | RSS growth | growth / default | padding share |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        results: dict[str, list[dict]] = {}
        for _ in range(args.repeats):
            if args.isolate:
                for name in args.variants:
                    results.setdefault(name, []).append(isolated(args, length, name))
            else:
                for name, measured in measure(model, tokenizer, args, length):
                    results.setdefault(name, []).append(measured)
        base = results["default"]
        for name, measured in results.items():
            print(row(name, measured, base))


def row(name: str, measured: list[dict], base: list[dict]) -> str:
    """One line of the table: medians of ``measured``, and their ratios to the medians of ``base``."""

    def median(runs: list[dict], key: str) -> float:
        return statistics.median(run[key] for run in runs)

    first = measured[-1]
    compression = first["compression"] if first["compression"] is not None else first["ratio"] or 0.0
    rss = (
        f"{median(measured, 'rss') / 2**20:.0f} MiB | {median(measured, 'rss') / median(base, 'rss'):.3f} "
        f"| {median(measured, 'growth') / 2**20:.0f} MiB | {median(measured, 'growth') / median(base, 'growth'):.3f}"
        if "rss" in first
        else "- | - | - | -"
    )
    return (
        f"| {first['tokens']} | {name} | {median(measured, 'prefill'):.3f} "
        f"| {median(measured, 'prefill') / median(base, 'prefill'):.2f} | {median(measured, 'decode') * 1e3:.1f} "
        f"| {median(measured, 'decode') / median(base, 'decode'):.2f} | {compression:.3f} "
        f"| {first['held'] / 2**20:.1f} MiB | {first['held'] / base[-1]['held']:.3f} "
        f"| {first['peak'] / 2**20:.1f} MiB | {first['peak'] / base[-1]['peak']:.3f} | {rss} | {first['padding']:.3f} |"
    )


if __name__ == "__main__":
    main()
