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
  ``2n + p`` tokens; its decode starts from the prompt's last token again); and ``kvzip``, kvpress's ``KVzipPress`` at ``R``, when kvpress is importable.

Prefill is one ``model(prompt, **cache_argument(model, cache), logits_to_keep=1)``; decode feeds
``--new-tokens`` greedy tokens one at a time. Bytes are what each cache holds after decoding.

    python benchmarks/bench_kvcache.py --lengths 1000 4000 --c 1.0 --window 16
    python benchmarks/bench_kvcache.py --lengths 2000 --new-tokens 256 --decode-every 32 --budget 256 --question-window
    python benchmarks/bench_kvcache.py --lengths 2000 --ratio 0.5 --new-tokens 8
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator

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
)
from rcattr.kvcache.replay import replay_prefill
from rcattr.runtime.models import load_model

try:
    from kvpress import KVzipPress, SnapKVPress
except ImportError:  # kvpress needs transformers < 5.3
    KVzipPress = SnapKVPress = None


def squad_prompt(tokenizer, tokens: int) -> torch.Tensor:
    """``[1, n]`` chat-formatted ids: SQuAD v2 paragraphs up to about ``tokens`` tokens, then a question."""
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
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": content}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]


def run(model, ids: torch.Tensor, make_cache: Callable, fill: Callable, new_tokens: int):
    """Prefill seconds (``fill(cache)``: the next token ``[1, 1]``), decode seconds per token, and the cache
    after decoding."""
    cache = make_cache()
    start = time.perf_counter()
    token = fill(cache)
    prefill = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(new_tokens):
        token = model(token, **cache_argument(model, cache)).logits[:, -1:].argmax(-1)
    return prefill, (time.perf_counter() - start) / new_tokens, cache


def prefill(model, ids: torch.Tensor, press: Callable = contextlib.nullcontext) -> Callable:
    """Fill a cache with ``ids`` in one forward, inside ``press()``; the next greedy token."""

    def fill(cache) -> torch.Tensor:
        with press():
            return model(ids, **cache_argument(model, cache), logits_to_keep=1).logits[:, -1:].argmax(-1)

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
) -> Iterator[tuple[str, Callable, Callable]]:
    threshold = {"c": c} if budget is None else {"budget": budget}  # with a budget, at prefill too
    plain = prefill(model, ids)
    yield "default", lambda: DynamicCache(config=model.config), plain
    yield "rc", lambda: RCKVCache(model, window=window, **threshold), plain
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
    args = parser.parse_args()
    if args.question_window and args.decode_every is None:
        parser.error(
            "--question-window needs --decode-every: the question's window scores decode-time eviction"
        )

    torch.set_grad_enabled(False)
    model, tokenizer = load_model()
    model(torch.tensor([[1, 2, 3]]))  # warm-up
    print(
        f"transformers cache vs RCKVCache(c={args.c}, window={args.window}); kvpress: {SnapKVPress is not None}"
    )
    print(
        "| prompt tokens | variant | prefill s | prefill / default | decode ms/token | decode / default "
        "| compression | bytes held | bytes / default | padding share |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        ids = squad_prompt(tokenizer, length)
        probe = RCKVCache(model, c=args.c, window=args.window)
        model(ids, **cache_argument(model, probe), logits_to_keep=1)
        ratio = round(probe.compression_ratio, 2)
        times: dict[str, list[tuple[float, float]]] = {}
        caches = {}
        for _ in range(args.repeats):
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
            ):
                seconds, decode, caches[name] = run(model, ids, make_cache, fill, args.new_tokens)
                times.setdefault(name, []).append((seconds, decode))
        base_prefill = statistics.median(t[0] for t in times["default"])
        base_decode = statistics.median(t[1] for t in times["default"])
        base_bytes = cache_nbytes(caches["default"])
        for name, measured in times.items():
            seconds = statistics.median(t[0] for t in measured)
            decode = statistics.median(t[1] for t in measured)
            cache = caches[name]
            held = cache_nbytes(cache)
            compression = (
                cache.compression_ratio
                if isinstance(cache, RCKVCache)
                else {"snapkv": ratio, "kvzip": args.ratio}.get(name, 0.0)
            )
            padding = cache.padding_nbytes() / held if isinstance(cache, RCKVCache) else 0.0
            print(
                f"| {ids.shape[1]} | {name} | {seconds:.3f} | {seconds / base_prefill:.2f} | {decode * 1e3:.1f} "
                f"| {decode / base_decode:.2f} | {compression:.3f} | {held / 2**20:.1f} MiB "
                f"| {held / base_bytes:.3f} | {padding:.3f} |"
            )


if __name__ == "__main__":
    main()
