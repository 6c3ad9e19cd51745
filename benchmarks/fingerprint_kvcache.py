"""What RCKVCache decides, written down so that a refactor can be shown to change nothing.

For a set of caches (threshold, ratio, budget, scopes, decode-time eviction, a compressed turn, chunked
prefill) on real models it records the generated ids, every evicting layer's kept positions per head, the
per-chunk records and decode records, the compression ratios and the bytes held:

    python benchmarks/fingerprint_kvcache.py --out /tmp/kv_before.json            # on the code before
    python benchmarks/fingerprint_kvcache.py --out /tmp/kv_after.json --compare /tmp/kv_before.json

``--compare`` prints each case that differs and the count of differences, and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rcattr.kvcache import (
    DecodeEviction,
    EvictionPolicy,
    Ratio,
    RCKVCache,
    Threshold,
    TokenBudget,
    cache_argument,
    chunked_prefill,
)
from rcattr.runtime.models import load_model

PASSAGE = (
    "The Amazon river flows through Peru, Colombia and Brazil before it reaches the Atlantic Ocean. "
    "Its basin covers about seven million square kilometres, and the rainforest around it holds a tenth "
    "of the species known on Earth. The first European to travel its length was Francisco de Orellana, in "
    "1542. Manaus, a city of two million people, lies where the Rio Negro meets the Solimoes. "
)
QUESTION = " Question: who first travelled the length of the Amazon, and when? Answer:"

Case = Callable[[Any], RCKVCache]
CASES: dict[str, Case] = {
    "default": lambda model: RCKVCache(model),
    "threshold c=1": lambda model: RCKVCache(model, c=1.0),
    "threshold c=2 window 8": lambda model: RCKVCache(model, c=2.0, window=8),
    "ratio 0.5": lambda model: RCKVCache(model, ratio=0.5),
    "budget 96": lambda model: RCKVCache(model, budget=96),
    "budget 96 decode 8": lambda model: RCKVCache(model, budget=96, decode_every=8),
    "ratio 0.5 decode 8": lambda model: RCKVCache(model, ratio=0.5, decode_every=8),
    "threshold decode 8": lambda model: RCKVCache(model, c=1.0, decode_every=8),
    "ratio head scope": lambda model: RCKVCache(model, policy=EvictionPolicy(Ratio(0.6, scope="head"))),
    "threshold layer scope": lambda model: RCKVCache(
        model, policy=EvictionPolicy(Threshold(1.5, scope="layer"))
    ),
    "budget layer scope decode": lambda model: RCKVCache(
        model, policy=EvictionPolicy(TokenBudget(80, scope="layer"), decode=DecodeEviction(every=8))
    ),
    "paper": lambda model: RCKVCache.paper(model),
}


def digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]


def plain(value: Any) -> Any:
    """A JSON value for a record of the cache's state (tensors by their digest and shape)."""
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "sha": digest(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return repr(value)


def fingerprint(cache: RCKVCache, generated: torch.Tensor) -> dict[str, Any]:
    return {
        "generated": generated.tolist(),
        "compression_ratio": cache.compression_ratio,
        "head_ratio": plain(cache.head_compression_ratio),
        "nbytes": cache.nbytes(),
        "padding_nbytes": cache.padding_nbytes(),
        "full_nbytes": cache.full_nbytes(),
        "kept": plain(cache.kept_indices),
        "states": plain(cache.states),
        "evictions": plain(cache.evictions),
    }


@torch.no_grad()
def run_model(name: str | None) -> dict[str, Any]:
    model, tokenizer = load_model(name)
    prompt = tokenizer(PASSAGE * 3 + QUESTION, return_tensors="pt")
    turn = tokenizer(" More: " + PASSAGE, return_tensors="pt", add_special_tokens=False)
    out: dict[str, Any] = {}
    for label, make in CASES.items():
        cache = make(model)
        with cache:
            ids = model.generate(**prompt, **cache_argument(model, cache), max_new_tokens=24, do_sample=False)
            out[label] = fingerprint(cache, ids)
    cache = RCKVCache(model, ratio=0.5)
    with cache:
        model(**prompt, **cache_argument(model, cache))
        with cache.compressing():
            model(input_ids=turn["input_ids"], **cache_argument(model, cache))
        out["ratio 0.5 compressed turn"] = fingerprint(cache, turn["input_ids"])
    cache = RCKVCache(model, ratio=0.5)
    with cache:
        chunked_prefill(model, cache, prompt["input_ids"], chunk_size=64)
        out["ratio 0.5 chunked prefill 64"] = fingerprint(cache, prompt["input_ids"])
    return out


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        found = [f"{path}.{key}: only in one" for key in before.keys() ^ after.keys()]
        for key in before.keys() & after.keys():
            found += differences(before[key], after[key], f"{path}.{key}")
        return found
    return [] if before == after else [path]


def fingerprint_parser(doc: str) -> argparse.ArgumentParser:
    """The command line both fingerprint scripts share: ``--out`` and ``--compare``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--compare", type=Path, help="a JSON file written before, to diff against")
    return parser


def write_and_compare(prints: dict[str, Any], args: argparse.Namespace, count: int, what: str) -> None:
    """Write ``prints`` to ``--out``; with ``--compare``, print what differs and exit 1 when anything does."""
    args.out.write_text(json.dumps(prints, indent=1, sort_keys=True))
    print(f"{count} {what} written to {args.out}")
    if args.compare:
        found = differences(json.loads(args.compare.read_text()), prints)
        print("\n".join(found[:50]))
        print(f"{len(found)} differences in {count} {what}")
        sys.exit(1 if found else 0)


def main() -> None:
    parser = fingerprint_parser(__doc__ or "")
    parser.add_argument(
        "--models", nargs="+", default=["default", "gemma-3-270m"], help="models (default: SmolLM2, Gemma-3)"
    )
    args = parser.parse_args()
    prints = {name: run_model(None if name == "default" else name) for name in args.models}
    write_and_compare(prints, args, sum(len(cases) for cases in prints.values()), "cases")


if __name__ == "__main__":
    main()
