"""The public entry points the leak tests run: each takes a tiny model, its tokenizer and a folder."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from pathlib import Path

import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.baselines import BASELINES
from rcattr.heads.selectors import TopHeads
from rcattr.kvcache import RCKVCache
from rcattr.runtime.capture import LogitCapture, LogitStore
from rcattr.runtime.compat import cache_argument
from rcattr.text.prompting import ContextInput
from rcattr.viz import save_head_heatmap, save_html
from tests.default_methods import baseline

INPUT = ContextInput(["The cat sat. It purred.", "Dogs bark loudly."], "What did the cat do?")
ANSWER = "It sat."

EntryPoint = Callable[[torch.nn.Module, object, Path], object]


def _generate_through_cache(model, tokenizer, tmp_path: Path) -> None:
    ids = torch.randint(3, 120, (1, 30))
    with RCKVCache(model, window=4) as cache:
        model.generate(ids, **cache_argument(model, cache), max_new_tokens=3, do_sample=False)


def _drop_an_open_cache(model, tokenizer, tmp_path: Path) -> None:
    cache = RCKVCache(model, window=4)
    model(torch.randint(3, 120, (1, 30)), **cache_argument(model, cache))
    del cache
    gc.collect()


def _capture(model, tokenizer, tmp_path: Path) -> None:
    with LogitCapture(model, LogitStore()):
        model(torch.randint(3, 120, (1, 12)))


def _explain_and_draw(model, tokenizer, tmp_path: Path) -> None:
    result = RCAttributor(model, tokenizer, TopHeads(4)).attribute(INPUT, ANSWER, granularity="chunk")
    save_html(result, tmp_path / "report.html")
    save_head_heatmap(result, tmp_path / "heads.png")


def _baseline(name: str, model, tokenizer, tmp_path: Path) -> None:
    baseline(name, model, tokenizer).attribute(INPUT, ANSWER, granularity="chunk")


ENTRY_POINTS: dict[str, EntryPoint] = {
    "RCKVCache in generate": _generate_through_cache,
    "RCKVCache dropped while open": _drop_an_open_cache,
    "LogitCapture": _capture,
    "RCAttributor.attribute, save_html, save_head_heatmap": _explain_and_draw,
    "RCAttributor.paper": lambda model, tokenizer, tmp_path: RCAttributor.paper(model, tokenizer).attribute(
        INPUT, ANSWER
    ),
    **{f"baseline {name}": functools.partial(_baseline, name) for name in sorted(BASELINES)},
}
