"""Where ``attribute()``'s time goes beside the model's own forward, measured inside the same call (issue 74).

``benchmarks/bench_attribution.py`` divides ``attribute()``'s time by a separate plain forward's: on a shared
2-core machine one pair's ratio moves by ±15%, so a few points of overhead drown in it. Here each part is timed
inside one ``attribute()`` call (the same load for all of them) by wrapping the library's own steps:

* the capture hook (each layer's answer-row logits and the per-head rank statistics, :class:`~rcattr.runtime.capture.LogitCapture`),
  and within it the rank statistics (:class:`~rcattr.attribution.reduction.Reducer`);
* the model's own forward: the pass less the hook (its language-model head computes the answer's rows too, for the
  answer tokens' log-probabilities; timed apart);
* after the pass: the vote and the per-token signals (``RCAttributor._result``), and within it every head's lookback
  and peak rows that a support probe reads (``every_head_rows``) and the vote's BM25 where the heads disagree.

The overhead is ``(attribute − the model's own forward) / the model's own forward``. A plain forward
``model(ids, logits_to_keep=1)`` is interleaved with each call for the ratio of ``bench_attribution.py``.
The example is ``bench_attribution.py``'s (SQuAD v2 contexts, a 100-token answer).

    python benchmarks/bench_attribution_parts.py --context 2000 --repeats 7
    python benchmarks/bench_attribution_parts.py --context 8000 --repeats 3
    python benchmarks/bench_attribution_parts.py --context 2000 --repeats 7 --probe none   # no probe: no head rows
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from bench_attribution import _prompt_ids, _setup

import rcattr
from rcattr.attribution import attributor, fusion, reduction, token_signals
from rcattr.runtime import capture

PARTS = {
    "hook (logits and ranks)": (capture.LogitCapture, "_observe"),
    "ranks (in the hook)": (reduction.Reducer, "__call__"),
    "after the pass (vote, signals)": (attributor.RCAttributor, "_result"),
    "of which every head's rows (for the support probe)": (token_signals, "every_head_rows"),
    "of which BM25 where the heads disagree": (fusion, "fuse_where_heads_disagree"),
    "pass (forward and hook)": (attributor.RCAttributor, "run_pass"),
}


def _timed(owner: Any, name: str, key: str, spent: dict[str, float]) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - start

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--context", type=int, default=2000, help="context tokens (default 2000)")
    parser.add_argument("--answer", type=int, default=100, help="answer tokens (default 100)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved (forward, attribute) pairs")
    parser.add_argument("--model", help="a model name or path (default: the offline SmolLM2)")
    parser.add_argument(
        "--probe",
        choices=("shipped", "none"),
        default="shipped",
        help="RCAttributor's probe (default shipped)",
    )
    args = parser.parse_args()
    model, tokenizer, context, question, answer = _setup(args.context, args.answer, args.model)
    explainer = rcattr.RCAttributor(model, tokenizer, probe=None if args.probe == "none" else "shipped")
    source = rcattr.ContextInput(context, question)
    ids = torch.tensor([_prompt_ids(tokenizer, context, question, answer)[0]])
    spent: dict[str, float] = {}
    for key, (owner, name) in PARTS.items():
        _timed(owner, name, key, spent)
    head = {"seconds": 0.0, "start": 0.0}
    model.lm_head.register_forward_pre_hook(lambda module, inputs: head.update(start=time.perf_counter()))
    model.lm_head.register_forward_hook(
        lambda module, inputs, output: head.update(
            seconds=head["seconds"] + time.perf_counter() - head["start"]
        )
    )

    @torch.no_grad()
    def plain() -> None:
        model(ids, logits_to_keep=1)

    def attribute() -> None:
        explainer.attribute(source, target=answer, granularity="sentence")

    plain(), attribute()  # warm-up
    rows = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        plain()
        forward = time.perf_counter() - start
        spent.clear()
        head["seconds"] = 0.0
        start = time.perf_counter()
        attribute()
        total = time.perf_counter() - start
        own = spent["pass (forward and hook)"] - spent["hook (logits and ranks)"]
        rows.append(
            {
                "plain forward": forward,
                "attribute": total,
                "attribute / plain forward": total / forward,
                "model's own forward in attribute": own,
                "its language-model head (answer rows too)": head["seconds"],
                **spent,
                "overhead / the model's own forward": (total - own) / own,
            }
        )
    print(
        json.dumps(
            {
                "context_tokens": args.context,
                "tokens": ids.shape[1],
                "repeats": args.repeats,
                "median": {key: round(statistics.median(row[key] for row in rows), 4) for key in rows[0]},
                "each": {
                    key: [round(row[key], 3) for row in rows]
                    for key in ("attribute / plain forward", "overhead / the model's own forward")
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
