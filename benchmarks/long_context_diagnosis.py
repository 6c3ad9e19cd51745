"""Why a long context hurts attribution: two per-head folders of ``benchmarks/head_levers.py`` (the same records,
short and among distractors) compared record by record (issue 74).

For every output unit of the records both folders hold, it reports

* **the heads**: how many the default selects (outliers among the heads that see), their mean layer, how many
  of the short pass's heads the long pass keeps;
* **where the vote goes**: the default's vote share (each unit's normalised vote, summed per document) on the gold
  document, on the record's own other documents (the gold's neighbours: the record's sources stay together among
  the distractors), on the first and last three documents, on the longest document, and on the other distractors;
  and, for every miss, which of those the vote's top document was;
* **rank or position**: the gold document's rank under the vote and under BM25, hits and misses apart;
* **selection or votes**: the long pass's votes with the short pass's heads (the same (layer, head) pairs):
  near the short accuracy, the drop is in which heads are chosen; near the long accuracy, the chosen heads' own
  votes go astray among the distractors. Each head alone, at both lengths, says which heads hold.

    python benchmarks/long_context_diagnosis.py --short runs/levers74/qwen_verigran_short \\
        --long runs/levers74/qwen_verigran_8k --out runs/levers74/qwen_verigran_diagnosis.md
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from head_levers import default_heads, document_scores, head_accuracy, head_shares  # the levers' default

from rcattr.attribution.spans import normalise
from rcattr.eval.common.metrics import paired_difference

Data = dict[str, Any]
PLACES = ("gold", "own other", "first 3", "last 3", "longest", "other")


@dataclass(frozen=True)
class Unit:
    """One output unit of one record at one length: where its vote went."""

    hit: bool
    place: str  # of the vote's top document
    shares: dict[str, float]  # vote share per place
    gold_rank: int
    bm25_rank: int
    distance: int  # context tokens between the gold document's end and the question


def _places(data: Data, own: range, gold: int) -> dict[int, str]:
    """Each document's place (a document in several places takes the first of :data:`PLACES`)."""
    n_docs = max(data["span_source"]) + 1
    lengths = torch.zeros(n_docs)
    lengths.index_add_(
        0, torch.tensor(data["span_source"]), torch.tensor(data["span_tokens"], dtype=torch.float)
    )
    longest = int(lengths.argmax())
    places = {}
    for doc in range(n_docs):
        if doc == gold:
            places[doc] = "gold"
        elif doc in own:
            places[doc] = "own other"
        elif doc < 3:
            places[doc] = "first 3"
        elif doc >= n_docs - 3:
            places[doc] = "last 3"
        elif doc == longest:
            places[doc] = "longest"
        else:
            places[doc] = "other"
    return places


def _rank(scores: torch.Tensor, doc: int) -> int:
    return int((scores > scores[doc]).sum()) + 1


def units_of(data: Data, vote: torch.Tensor, own: range) -> list[Unit]:
    """The units of one record from its ``[U, S]`` vote."""
    docs = normalise(document_scores(data, vote).clamp_min(0))
    bm25 = document_scores(data, data["bm25"])
    source, tokens = torch.tensor(data["span_source"]), torch.tensor(data["span_tokens"])
    out = []
    for unit, gold in enumerate(data["gold"]):
        places = _places(data, own, gold)
        shares = dict.fromkeys(PLACES, 0.0)
        for doc, place in places.items():
            shares[place] += float(docs[unit, doc])
        top = int(docs[unit].argmax())
        distance = int(tokens[source > gold].sum())
        out.append(
            Unit(top == gold, places[top], shares, _rank(docs[unit], gold), _rank(bm25[unit], gold), distance)
        )
    return out


def _mean_layer(heads: torch.Tensor) -> float:
    return float(heads[:, 0].double().mean())


def nearest_share(records: list[Data], tenth: float = 0.1) -> torch.Tensor:
    """``[L, H]`` each head's mean vote share on the last ``tenth`` of the documents (those nearest the question)."""
    total = 0
    for data in records:
        n_docs = max(data["span_source"]) + 1
        per_doc = document_scores(data, normalise(data["units"].double()).flatten(0, 1).flatten(0, 1))
        last = per_doc[:, n_docs - max(1, round(tenth * n_docs)) :].sum(-1)  # [L * H * U]
        total = total + last.view(*data["units"].shape[:3]).mean(-1)
    return total / len(records)


def diagnose(short: list[Data], long: list[Data]) -> str:
    """The diagnosis (markdown) of paired short and long per-head data."""
    rows: dict[str, list[list[Unit]]] = {"short": [], "long": [], "long, the short pass's heads": []}
    counts: dict[str, list[float]] = {"short": [], "long": []}
    layers: dict[str, list[float]] = {"short": [], "long": []}
    kept: list[float] = []
    for s, stretched in zip(short, long, strict=True):
        offset = stretched["gold"][0] - s["gold"][0]
        n_own = max(s["span_source"]) + 1
        heads_s, heads_l = default_heads(s), default_heads(stretched)
        rows["short"].append(units_of(s, head_shares(s, heads_s).sum(0), range(0, n_own)))
        own = range(offset, offset + n_own)
        rows["long"].append(units_of(stretched, head_shares(stretched, heads_l).sum(0), own))
        rows["long, the short pass's heads"].append(
            units_of(stretched, head_shares(stretched, heads_s).sum(0), own)
        )
        for name, heads in (("short", heads_s), ("long", heads_l)):
            counts[name].append(len(heads))
            layers[name].append(_mean_layer(heads))
        common = {tuple(h) for h in heads_s.tolist()} & {tuple(h) for h in heads_l.tolist()}
        kept.append(len(common) / len(heads_s))
    n_units = sum(len(r) for r in rows["short"])
    hits = {name: [[u.hit for u in r] for r in recs] for name, recs in rows.items()}
    lines = [
        f"{len(short)} records, {n_units} units (output spans); the default: outlier heads among those that see.",
        "",
        "| | accuracy % | − short [95% CI] | heads: mean (fewest–most) | mean layer |",
        "|---|---:|---:|---|---:|",
    ]
    for name in rows:
        accuracy = 100 * sum(map(sum, hits[name])) / n_units
        d, lo, hi = paired_difference(hits[name], hits["short"])
        chosen = "long" if name == "long" else "short"  # the last row votes with the short pass's heads
        heads, layer = counts[chosen], layers[chosen]
        lines.append(
            f"| {name} | {accuracy:.1f} | {100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] | "
            f"{statistics.mean(heads):.1f} ({min(heads):.0f}–{max(heads):.0f}) | {statistics.mean(layer):.1f} |"
        )
    lines += [
        "",
        f"The long pass keeps {100 * statistics.mean(kept):.0f}% of the short pass's heads (mean over records).",
        "",
        "Where the default's vote goes (mean share per unit, %), and where the top document of each miss lies:",
        "",
        "| | " + " | ".join(PLACES) + " | misses |",
        "|---|" + "---:|" * (len(PLACES) + 1),
    ]
    for name in ("short", "long"):
        units = [u for r in rows[name] for u in r]
        shares = [100 * statistics.mean(u.shares[p] for u in units) for p in PLACES]
        misses = [u for u in units if not u.hit]
        lines.append(f"| vote share, {name} | " + " | ".join(f"{v:.1f}" for v in shares) + " | |")
        where = [sum(u.place == p for u in misses) for p in PLACES]
        lines.append(
            f"| misses' top document, {name} | " + " | ".join(map(str, where)) + f" | {len(misses)} |"
        )
    lines += [
        "",
        "The gold document's rank (median; mean) under the vote and under BM25, and its distance from the question "
        "(context tokens after it, median):",
        "",
    ]
    lines += ["| | units | vote rank | BM25 rank | distance |", "|---|---:|---:|---:|---:|"]
    for name in ("short", "long"):
        units = [u for r in rows[name] for u in r]
        for label, group in (
            ("hits", [u for u in units if u.hit]),
            ("misses", [u for u in units if not u.hit]),
        ):
            if group:
                vote = [u.gold_rank for u in group]
                bm25 = [u.bm25_rank for u in group]
                lines.append(
                    f"| {name}, {label} | {len(group)} | {statistics.median(vote):.0f}; {statistics.mean(vote):.1f} | "
                    f"{statistics.median(bm25):.0f}; {statistics.mean(bm25):.1f} | "
                    f"{statistics.median(u.distance for u in group):.0f} |"
                )
    alone_s, alone_l = head_accuracy(short), head_accuracy(long)
    score_s = torch.stack([d["scores"].double() for d in short]).mean(0)
    score_l = torch.stack([d["scores"].double() for d in long]).mean(0)
    n_heads = alone_s.shape[1]

    def listed(order: torch.Tensor) -> str:
        return ", ".join(
            f"L{int(i) // n_heads}.H{int(i) % n_heads} {100 * alone_s.flatten()[i]:.0f}→{100 * alone_l.flatten()[i]:.0f}% "
            f"({score_s.flatten()[i]:.3f}→{score_l.flatten()[i]:.3f})"
            for i in order[:10]
        )

    lines += [
        "",
        "Each head alone, short → long (accuracy %, mean P(X > Y)):",
        "",
        f"- best alone, short: {listed(alone_s.flatten().argsort(descending=True))}",
        f"- best alone, long: {listed(alone_l.flatten().argsort(descending=True))}",
        f"- highest scores, long: {listed(score_l.flatten().argsort(descending=True))}",
    ]
    from scipy.stats import spearmanr

    nearest = nearest_share(long)
    rho = spearmanr(nearest.flatten().numpy(), alone_l.flatten().numpy()).statistic
    top = score_l.flatten().argsort(descending=True)[:10]
    lines += [
        "",
        f"Long: each head's share of its vote on the last tenth of the documents against its accuracy alone, Spearman "
        f"over the {nearest.numel()} heads: {rho:.2f}. The 10 highest-scoring heads (share, accuracy alone): "
        + ", ".join(
            f"L{int(i) // n_heads}.H{int(i) % n_heads} {100 * nearest.flatten()[i]:.0f}% / {100 * alone_l.flatten()[i]:.0f}%"
            for i in top
        ),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--short", type=Path, required=True, help="a head_levers.py run folder, short contexts"
    )
    parser.add_argument("--long", type=Path, required=True, help="the same records among distractors")
    parser.add_argument("--out", type=Path, help="write the markdown here too")
    args = parser.parse_args()
    ids = sorted(
        {p.stem for p in (args.short / "per_head").glob("*.pt")}
        & {p.stem for p in (args.long / "per_head").glob("*.pt")}
    )
    if not ids:
        raise SystemExit("the two folders share no per-head file: run benchmarks/head_levers.py on both")
    short = [torch.load(args.short / "per_head" / f"{i}.pt") for i in ids]
    long = [torch.load(args.long / "per_head" / f"{i}.pt") for i in ids]
    text = diagnose(short, long)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
