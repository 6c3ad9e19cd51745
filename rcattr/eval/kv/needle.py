"""Needle retrieval for the KV benchmark: RULER-style key–value needles in real prose, generated here.

A needle, `One of the special magic numbers for {key} is: {value}.` (RULER's single-needle format,
a two-word key and a seven-digit value), is placed at a controlled depth in a haystack of SQuAD v2
dev sentences (`squad_v2/dev-v2.0.json` of the benchmark data, read from a seeded offset, so each
prompt has prose of its own); the question asks for the key's value, and an answer is right when the
value stands in it as a whole number ([`rcattr.eval.kv.metrics.answer_match`][rcattr.eval.kv.metrics.answer_match]). Everything is drawn
from `seed`: no download, the same prompts on every machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

from rcattr.eval.kv.data import KVRecord, squad_paragraphs
from rcattr.text.segmentation import sentence_spans

NEEDLE = "One of the special magic numbers for {key} is: {value}."
QUESTION = "What is the special magic number for {key} mentioned in the provided text?"
NEEDLE_LENGTHS = (1024, 2048, 4096)
NEEDLE_DEPTHS = (0.1, 0.3, 0.5, 0.7, 0.9)
DEFAULT_PER_CELL = 4
_ADJECTIVES = (
    "ancient", "bitter", "brave", "calm", "clever", "crimson", "curious", "distant", "eager", "fragile",
    "gentle", "golden", "hollow", "humble", "jolly", "lively", "lonely", "lucky", "mellow", "nimble",
    "proud", "quiet", "rapid", "rusty", "silent", "silver", "sleepy", "steady", "tender", "wicked",
)  # fmt: skip
_NOUNS = (
    "anchor", "badger", "beacon", "blossom", "canyon", "cobbler", "compass", "falcon", "fountain",
    "glacier", "harbor", "lantern", "meadow", "orchard", "otter", "parrot", "pebble", "pigeon", "quarry",
    "raven", "saddle", "sparrow", "squirrel", "teapot", "thimble", "tractor", "walrus", "willow",
)  # fmt: skip


def haystack_sentences() -> list[str]:
    """Every sentence of the SQuAD v2 dev paragraphs, in file order."""
    return [span.text for paragraph in squad_paragraphs() for span in sentence_spans(paragraph["context"])]


def place_needle(
    sentences: Iterable[str], needle: str, count_tokens: Callable[[str], int], tokens: int, depth: float
) -> str:
    """A context of about `tokens` tokens: `sentences` from the first on, with `needle` after the
    sentence at `depth` (0: before the first, 1: after the last) of the haystack's tokens.

    The haystack takes whole sentences while the needle and they fit in `tokens`; sentences are joined
    by spaces, so a text's tokens are counted as the sum of its sentences' (`count_tokens` of each).
    """
    return place_needles(sentences, [(needle, depth)], count_tokens, tokens)


def place_needles(
    sentences: Iterable[str],
    needles: Sequence[tuple[str, float]],
    count_tokens: Callable[[str], int],
    tokens: int,
) -> str:
    """[`place_needle`][rcattr.eval.kv.needle.place_needle] with several `(needle, depth)`: the haystack takes whole sentences while every
    needle and they fit in `tokens`, and each needle goes after the sentence at its depth (needles at
    the same place in the order given)."""
    for _, depth in needles:
        if not 0.0 <= depth <= 1.0:
            raise ValueError(f"depth must lie in [0, 1], got {depth}")
    needed = sum(count_tokens(needle) for needle, _ in needles)
    budget = tokens - needed
    if budget <= 0:
        raise ValueError(f"a {tokens}-token context cannot hold the needles ({needed} tokens)")
    haystack: list[str] = []
    lengths: list[int] = []
    used = 0
    for sentence in sentences:
        cost = count_tokens(sentence)
        if used + cost > budget:
            break
        haystack.append(sentence)
        lengths.append(cost)
        used += cost
    if not haystack:
        raise ValueError(f"no haystack sentence fits a {tokens}-token context beside the needles")
    after: dict[int, list[str]] = {}
    for needle, depth in needles:
        target, before, at = depth * used, 0, 0
        while at < len(haystack) and abs(before + lengths[at] - target) < abs(before - target):
            before += lengths[at]
            at += 1
        after.setdefault(at, []).append(needle)
    pieces = [*after.get(0, [])]
    for i, sentence in enumerate(haystack, start=1):
        pieces += [sentence, *after.get(i, [])]
    return " ".join(pieces)


def load_needle(
    count_tokens: Callable[[str], int],
    limit: int | None = None,
    lengths: Sequence[int] = NEEDLE_LENGTHS,
    depths: Sequence[float] = NEEDLE_DEPTHS,
    seed: int = 0,
    sentences: Sequence[str] | None = None,
) -> list[KVRecord]:
    """`limit` needle prompts (default: 4 for every length and depth, 60 in all), cycling over the
    (length, depth) cells so that any `limit` covers them evenly: prompt 0 of every cell, then prompt 1, ...

    Each prompt draws its key (`"adjective-noun"`), its seven-digit value and its haystack's first
    sentence from `random.Random(seed)`; `count_tokens` measures text in the model's tokens.
    """
    sentences = haystack_sentences() if sentences is None else list(sentences)
    cells = [(tokens, depth) for tokens in lengths for depth in depths]
    draw = random.Random(seed)
    records = []
    for i in range(DEFAULT_PER_CELL * len(cells) if limit is None else limit):
        tokens, depth = cells[i % len(cells)]
        key = f"{draw.choice(_ADJECTIVES)}-{draw.choice(_NOUNS)}"
        value = str(draw.randrange(1_000_000, 10_000_000))
        start = draw.randrange(len(sentences))
        haystack = (
            sentences[(start + j) % len(sentences)] for j in range(len(sentences))
        )  # from start, once
        context = place_needle(haystack, NEEDLE.format(key=key, value=value), count_tokens, tokens, depth)
        record_id = f"needle-{tokens}-{depth:g}-{i // len(cells)}"
        records.append(KVRecord(record_id, context, QUESTION.format(key=key), (value,)))
    return records
