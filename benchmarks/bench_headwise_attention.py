"""The attention of a packed :class:`~rcattr.kvcache.headwise.HeadwiseLayer`: one call of the model's kernel
per key head (the reference ``loop``, ``_attend_per_head``) against one batched call over every key head.

The candidates:

- ``folded`` (what ``attend`` runs for one query, :func:`~rcattr.kvcache.headwise._attend_folded`): still one
  call per key head, of torch's sdpa with the head's query heads as the rows of one head, where transformers'
  sdpa takes its GQA path (one query only: `skip` for a chunk);
- ``block`` (:func:`attend_block`, here): one sdpa call over the packed slots as one key head, with a
  ``[B, H, q, S]`` mask that shows each query head its own key head's segment;
- ``padded`` (:func:`attend_padded`, here): the segments copied into ``[B, kv_heads, Smax, d]``, then one sdpa
  call with each key head batched with its own query heads.

Both batched calls lost on the CPU (issue 73), so they live here, checked against the loop before every timing,
for a machine where kernel launches cost more (a GPU) to measure again.

For each model shape, context and query length it builds a packed layer whose key heads kept unequal
shares, from a fixed seed, of half the context overall (each head between about a quarter and three
quarters of it; with ``--batch`` above 1, row r keeps r tenths fewer, so shorter rows hold pad slots and
every call has a mask), then stores the ``q`` new tokens, and times the whole attention of those tokens
(visibility included) per layer: ``q = 1`` a decoded token, ``q = 512`` a prefill chunk after an eviction.
The methods run side by side, ``--repeats`` rounds interleaved on one thread; the table gives the loop's
median and each candidate's median as a ratio to it (below 1: faster), and the peak memory one call adds to
the process (resident set, read from ``/proc/self/status``; allocations under about 32 MiB may reuse freed
memory and not show). ``block`` computes logits for every query head over every slot, ``kv_heads`` times the
work of the loop; where that exceeds ``--block-gflop`` it is skipped (``skip`` in the table).

    python benchmarks/bench_headwise_attention.py --queries 1 --repeats 9
    python benchmarks/bench_headwise_attention.py --queries 1 --batch 2 --repeats 9
    python benchmarks/bench_headwise_attention.py --queries 1 --contexts 4096 16384 --attn eager --repeats 9
    python benchmarks/bench_headwise_attention.py --queries 512 --models smollm2-135m qwen2-0.5b --repeats 5
    python benchmarks/bench_headwise_attention.py --queries 512 --models llama3-8b --repeats 5  # 3 minutes
    python benchmarks/bench_headwise_attention.py --queries 512 --models llama3-8b --contexts 4096 \
        --candidates block --block-gflop 200 --repeats 3  # 1.6 GiB more memory
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention

from rcattr.kvcache.headwise import HeadwiseLayer, _attend_folded, _attend_per_head, _visible_slots
from rcattr.runtime.attention import AttentionCall

SHAPES = {  # query heads, key heads, head_dim
    "smollm2-135m": (9, 3, 64),
    "qwen2-0.5b": (14, 2, 64),
    "llama3-8b": (32, 8, 128),
}


def attend_block(layer: HeadwiseLayer, call: AttentionCall, visible: torch.Tensor | None) -> torch.Tensor:
    """``[B, q, H, d]`` as the loop gives it, in one call of torch's sdpa over the packed
    slots as a single key head: query head h sees the slots of key head ``h // group`` only, through a
    ``[B, H, q, S]`` mask. Every query head computes logits over all ``S`` slots, ``kv_heads`` times the
    work of the per-head calls."""
    query = call.query
    batch, heads, q_len, dim = query.shape
    group = heads // layer.kv_heads
    slots = call.key.shape[-2]
    lengths = torch.tensor(
        [segment.stop - segment.start for segment in layer.segments()], device=query.device
    )
    owner = torch.arange(layer.kv_heads, device=query.device).repeat_interleave(lengths, output_size=slots)
    mine = owner == torch.arange(heads, device=query.device)[:, None] // group  # [H, S]
    mask = mine[None, :, None] if visible is None else mine[None, :, None] & visible  # [B or 1, H, q, S]
    # one key head: every query row, of every head, as a row of that head (sdpa's GQA path is slower on CPU)
    output = torch.nn.functional.scaled_dot_product_attention(
        query.reshape(batch, 1, heads * q_len, dim),
        call.key,
        call.value,
        attn_mask=mask.reshape(mask.shape[0], 1, heads * q_len, slots),
        scale=call.scaling,
    )
    return output.reshape(batch, heads, q_len, -1).transpose(1, 2).contiguous()


def attend_padded(layer: HeadwiseLayer, call: AttentionCall, visible: torch.Tensor | None) -> torch.Tensor:
    """``[B, q, H, d]`` as the loop gives it, in one call of torch's sdpa: the segments copied
    into ``[B, kv_heads, Smax, d]`` (the slots past a segment's end masked), each key head batched with its
    own query heads. The copy costs a pass over the keys and values, and every head attends over ``Smax``
    slots."""
    query = call.query
    batch, heads, q_len, dim = query.shape
    kv_heads, group = layer.kv_heads, heads // layer.kv_heads
    segments = layer.segments()
    longest = max(segment.stop - segment.start for segment in segments)
    offsets = torch.arange(longest, device=query.device)
    starts = torch.tensor([segment.start for segment in segments], device=query.device)[:, None]
    stops = torch.tensor([segment.stop for segment in segments], device=query.device)[:, None]
    inside = starts + offsets < stops  # [Hkv, Smax]
    index = (starts + offsets).clamp_max(stops - 1).flatten()  # past a segment's end: its last slot, masked
    key = call.key[:, 0].index_select(1, index).view(batch * kv_heads, 1, longest, -1)
    value = call.value[:, 0].index_select(1, index).view(batch * kv_heads, 1, longest, -1)
    mask: torch.Tensor | None = None
    if visible is not None:
        picked = visible[:, 0].index_select(-1, index).view(batch, q_len, kv_heads, longest)
        mask = (picked.transpose(1, 2) & inside[:, None]).reshape(batch * kv_heads, 1, q_len, longest)
    elif not inside.all():
        mask = inside.repeat(batch, 1)[:, None, None]
    if q_len == 1:  # a group's queries as one head's rows: sdpa's GQA path is slower on CPU for one query
        output = torch.nn.functional.scaled_dot_product_attention(
            query.reshape(batch * kv_heads, 1, group, dim), key, value, attn_mask=mask, scale=call.scaling
        )
        return output.reshape(batch, 1, heads, -1)
    output = torch.nn.functional.scaled_dot_product_attention(
        query.reshape(batch * kv_heads, group, q_len, dim),
        key,
        value,
        attn_mask=mask,
        scale=call.scaling,
        enable_gqa=True,
    )
    return output.reshape(batch, heads, q_len, -1).transpose(1, 2).contiguous()


CANDIDATES: dict[str, Callable[[HeadwiseLayer, AttentionCall, torch.Tensor | None], torch.Tensor]] = {
    "folded": _attend_folded,
    "block": attend_block,
    "padded": attend_padded,
}
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def packed_call(
    shape: tuple[int, int, int], context: int, q_len: int, batch: int, attn: str, seed: int
) -> tuple[HeadwiseLayer, AttentionCall]:
    """A layer whose key heads kept unequal random shares of half of ``context`` tokens (row r of ``batch`` r
    tenths fewer), then stored ``q_len`` new ones, and the attention call of those tokens (plain causality,
    the model's options)."""
    heads, kv_heads, dim = shape
    generator = torch.Generator().manual_seed(seed)
    with torch.device("meta"):  # the module's attributes only, no weights
        module = LlamaAttention(
            LlamaConfig(hidden_size=heads * dim, num_attention_heads=heads, num_key_value_heads=kv_heads),
            layer_idx=0,
        )
    layer = HeadwiseLayer()
    layer.update(*torch.randn(2, batch, kv_heads, context, dim, generator=generator))
    shares = 0.25 + 0.5 * torch.rand(kv_heads, generator=generator)
    budgets = (shares * (0.5 * kv_heads * context / shares.sum())).round().long().clamp(1, context)
    keeps = []
    for budget in budgets.tolist():
        keep = torch.zeros(batch, context, dtype=torch.bool)
        for row in range(batch):
            keep[row, torch.randperm(context, generator=generator)[: budget - row * budget // 10]] = True
        keeps.append(keep)
    layer.keep_slots(keeps)
    keys, values = layer.update(*torch.randn(2, batch, kv_heads, q_len, dim, generator=generator))
    query = torch.randn(batch, q_len, heads, dim, generator=generator).transpose(1, 2)  # as the model's
    options = {"dropout": 0.0, "scaling": module.scaling}
    call = AttentionCall(module, query, keys, values, None, attn, kwargs=options)
    return layer, call.starting_at(layer.seen - q_len)


def _status_mib(field: str) -> float:
    line = next(line for line in _STATUS.read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def peak_extra_mib(run: Callable[[], object]) -> float | None:
    """MiB the process's peak resident set grows by during ``run()``; None where it cannot be reset."""
    try:
        _CLEAR_REFS.write_text("5")  # resets the peak (VmHWM) to the current resident set
    except OSError:
        return None
    before = _status_mib("VmRSS")
    run()
    return _status_mib("VmHWM") - before


def _candidate(name: str, layer: HeadwiseLayer, call: AttentionCall) -> torch.Tensor:
    """The candidate ``name``'s attention, visibility included (as the loop's is)."""
    return CANDIDATES[name](layer, call, _visible_slots(layer, call))


def measure(
    layer: HeadwiseLayer, call: AttentionCall, methods: list[str], repeats: int
) -> dict[str, tuple[float, float | None]]:
    """Per method, its median seconds over ``repeats`` interleaved rounds and the peak MiB one call adds."""
    runs: dict[str, Callable[[], torch.Tensor]] = {
        "loop": partial(_attend_per_head, layer, call, _visible_slots(layer, call))
    }
    for name in methods:
        runs[name] = partial(_candidate, name, layer, call)
    want = runs["loop"]()
    for name in methods:  # warm-up, and a check that it computes what the loop does
        torch.testing.assert_close(runs[name](), want, rtol=1e-4, atol=1e-5)
    memory = {name: peak_extra_mib(run) for name, run in runs.items()}
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for round_ in range(repeats):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:  # rotate the order
            start = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(times[name]), memory[name]) for name in runs}


def _mib(extra: float | None) -> str:
    return "n/a" if extra is None else f"{max(extra, 0.0):.0f}"  # the resident set may shrink a little


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--contexts", nargs="+", type=int, default=[4096, 8192, 16384, 32768])
    parser.add_argument("--queries", nargs="+", type=int, default=[1, 512])
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa", help="the model's kernel")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--block-gflop", type=float, default=40.0, help="skip 'block' past this work a call")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    columns = " | ".join(f"{name} / loop" for name in args.candidates)
    memory = " | ".join(f"{name} MiB" for name in ["loop", *args.candidates])
    print(f"| model | context | q | slots per head | loop ms | {columns} | {memory} |")
    print("|" + "---|" * (5 + 2 * len(args.candidates) + 1))
    for model in args.models:
        heads, _, dim = SHAPES[model]
        for context in args.contexts:
            for q_len in args.queries:
                layer, call = packed_call(SHAPES[model], context, q_len, args.batch, args.attn, args.seed)
                slots = [segment.stop - segment.start for segment in layer.segments()]
                block_gflop = 4 * heads * q_len * sum(slots) * dim / 1e9
                methods = [
                    m
                    for m in args.candidates
                    if (m != "block" or block_gflop <= args.block_gflop) and (m != "folded" or q_len == 1)
                ]
                results = measure(layer, call, methods, args.repeats)
                loop = results["loop"][0]
                ratios = [f"{results[m][0] / loop:.2f}" if m in results else "skip" for m in args.candidates]
                extra = [_mib(results[m][1]) if m in results else "skip" for m in ["loop", *args.candidates]]
                print(
                    f"| {model} | {context} | {q_len} | {min(slots)}–{max(slots)} | {loop * 1e3:.2f} | "
                    + " | ".join(ratios + extra)
                    + " |",
                    flush=True,
                )
                del layer, call


if __name__ == "__main__":
    main()
