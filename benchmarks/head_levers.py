"""Head-selection levers that need more than a rule over the head scores (issue 49), from per-head data.

Step 1 runs the attribution runner with one more method, ``per_head``: the ``heads`` method's pass (every head
scored, :func:`rcattr.eval.attribution.per_head.head_span_scores`, the default span scorer), saving per record
every head's scores, every head's span scores per output unit and BM25's (``OUT/per_head/ID.pt``). The run
folder resumes like any other. Step 2 scores each lever from those files, with paired 95% intervals (records
resampled) against the default (outlier heads) and BM25, and writes ``OUT/levers.md``:

* one selection per key-head group: the mean score of the query heads that share keys (grouped-query
  attention: 7 on Qwen2, 3 on SmolLM2, 4 on Gemma-3-270m), the outlier groups, all their heads;
* votes weighted by each head's agreement (Pearson, clamped at 0) with the outliers' vote, over a pool of the
  heads more than 1 (or 0) sd above the mean;
* votes weighted by each head's concentration (1 - normalised entropy of its span shares), over the outliers
  or the same pools;
* and, as checks against the runner's ``heads`` table, the default and BM25 where the heads disagree.

None of them is in rcattr: each lost or tied on some model (docs/benchmarks.md, "Three architectures").

    python benchmarks/head_levers.py --dataset verigran --limit 64 --out runs/levers/smollm2_verigran
    python benchmarks/head_levers.py --dataset quotesum --limit 100 --model gemma-3-270m --out runs/levers/gemma_qs
    python benchmarks/head_levers.py --score-only --out runs/levers/gemma_qs   # step 2 again
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rcattr.attribution.base import normalise
from rcattr.attribution.fusion import head_agreement, lexical_fusion
from rcattr.attribution.lexical import bm25_scores
from rcattr.attribution.scorers import AttentionScorer
from rcattr.eval.attribution.method import AttributionMethod, Row, context_input, output_units
from rcattr.eval.common.metrics import paired_difference
from rcattr.heads.scores import outlier_count, outlier_heads, top_heads

Data = dict[str, Any]
Lever = Callable[[Data], tuple[torch.Tensor, int]]  # a record's data -> ([U, S] unit scores, heads used)


@dataclass(frozen=True)
class PerHeadMethod(AttributionMethod[Any]):
    """Saves each record's per-head data under ``folder`` (its line only says which spans it has)."""

    folder: Path
    name: str = "per_head"

    def build(self, model: Any, tokenizer: Any, config: Any) -> Any:
        from rcattr.eval.attribution.methods import rc_attributor

        text = model.config.get_text_config()
        return rc_attributor(model, tokenizer, config), text.num_attention_heads // text.num_key_value_heads

    def row(self, built: Any, record: Any, config: Any) -> Row:
        from rcattr.eval.attribution.per_head import head_span_scores

        attributor, group = built
        scores = head_span_scores(
            attributor,
            context_input(record),
            record.answer,
            granularity=config.granularity,
            output_granularity=output_units(record),
            span_scorers={"default": AttentionScorer()},
        )
        data = {
            "scores": scores.every_head_score["superiority"].float(),
            "units": scores.units["default"].half(),  # [L, H, U, S]
            "bm25": bm25_scores(scores.example)[1].float(),  # [U, S]
            "span_source": [span.source for span in scores.example.context_spans],
            "gold": [span.source for span in record.gold],
            "group": group,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        torch.save(data, self.folder / f"{record.id}.pt")
        return {"source": [None] * len(record.gold), "location": [None] * len(record.gold)}


def _shares(data: Data, heads: torch.Tensor) -> torch.Tensor:
    """``[k, U, S]`` span shares of the ``[k, 2]`` heads."""
    return normalise(data["units"][heads[:, 0], heads[:, 1]].double())


def _outliers(data: Data) -> torch.Tensor:
    return outlier_heads(data["scores"])


def _pool(data: Data, sigmas: float) -> torch.Tensor:
    """The heads more than ``sigmas`` sd above the mean of all heads, at least the outliers."""
    flat = data["scores"].flatten().double()
    above = int((flat > flat.mean() + sigmas * flat.std(correction=0)).sum())
    return top_heads(data["scores"], max(above, outlier_count(data["scores"]), 1))


def default(data: Data) -> tuple[torch.Tensor, int]:
    heads = _outliers(data)
    return _shares(data, heads).sum(0), len(heads)


def key_groups(data: Data) -> tuple[torch.Tensor, int]:
    scores, group = data["scores"].double(), data["group"]
    layers, n_heads = scores.shape
    means = scores.reshape(layers, n_heads // group, group).mean(-1)  # [L, G]
    chosen = outlier_heads(means)  # (layer, group)
    heads = torch.cat(
        [
            torch.stack([torch.full((group,), layer), g * group + torch.arange(group)], 1)
            for layer, g in chosen.tolist()
        ]
    )
    return _shares(data, heads).sum(0), len(heads)


def agreement_pool(sigmas: float) -> Lever:
    def lever(data: Data) -> tuple[torch.Tensor, int]:
        heads = _pool(data, sigmas)
        shares = _shares(data, heads)  # [k, U, S]
        core = shares[: len(_outliers(data))].mean(0).flatten()
        weights = torch.stack([_correlation(head.flatten(), core) for head in shares]).clamp_min(0)
        if not bool((weights > 0).any()):
            weights = torch.ones(len(heads), dtype=torch.float64)
        return torch.einsum("k,kus->us", weights, shares), int((weights > 0).sum())

    return lever


def _correlation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a - a.mean(), b - b.mean()
    return (a * b).sum() / (a.norm() * b.norm()).clamp_min(1e-12)


def concentration(pool: float | None) -> Lever:
    def lever(data: Data) -> tuple[torch.Tensor, int]:
        heads = _outliers(data) if pool is None else _pool(data, pool)
        shares = _shares(data, heads)
        entropy = -(shares.clamp_min(1e-12).log() * shares).sum(-1)  # [k, U]
        weights = (1 - entropy / torch.log(torch.tensor(float(shares.shape[-1]))).clamp_min(1e-12)).clamp_min(
            0
        )
        return torch.einsum("ku,kus->us", weights, shares), len(heads)

    return lever


def lexical_gate(data: Data) -> tuple[torch.Tensor, int]:
    heads = _outliers(data)
    shares = _shares(data, heads)
    vote = normalise(shares.sum(0))
    return lexical_fusion(vote, data["bm25"], head_agreement(shares, None, vote)), len(heads)


LEVERS: dict[str, Lever] = {
    "default (outlier heads)": default,
    "default + BM25 where the heads disagree": lexical_gate,
    "outlier key-head groups": key_groups,
    "agreement-weighted, heads above 1 sd": agreement_pool(1.0),
    "agreement-weighted, heads above the mean": agreement_pool(0.0),
    "concentration-weighted outliers": concentration(None),
    "concentration-weighted, heads above 1 sd": concentration(1.0),
    "concentration-weighted, heads above the mean": concentration(0.0),
}


def _hits(units: torch.Tensor, data: Data) -> list[bool]:
    return [
        data["span_source"][top] == gold
        for top, gold in zip(units.argmax(-1).tolist(), data["gold"], strict=True)
    ]


def score(folder: Path) -> str:
    """The levers' table (markdown) from the per-head files of ``folder``."""
    records = [torch.load(path) for path in sorted(folder.glob("*.pt"))]
    if not records:
        raise SystemExit(f"no per-head files in {folder}: run step 1 first")
    hits: dict[str, list[list[bool]]] = {}
    counts: dict[str, list[int]] = {}
    for name, lever in LEVERS.items():
        results = [lever(data) for data in records]
        hits[name] = [_hits(units, data) for (units, _), data in zip(results, records, strict=True)]
        counts[name] = [count for _, count in results]
    hits["bm25"] = [_hits(data["bm25"], data) for data in records]
    counts["bm25"] = [0] * len(records)
    spans = sum(map(len, hits["bm25"]))
    lines = [
        f"{len(records)} records, {spans} spans. Accuracy, and paired differences in points [95% CI, records resampled].",
        "",
        "| lever | accuracy % | − default | − BM25 | heads: mean (fewest–most) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, rows in hits.items():
        accuracy = 100 * sum(map(sum, rows)) / spans
        against = [paired_difference(rows, hits[ref]) for ref in ("default (outlier heads)", "bm25")]
        cells = [f"{100 * d:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]" for d, low, high in against]
        used = counts[name]
        lines.append(
            f"| {name} | {accuracy:.1f} | {cells[0]} | {cells[1]} | "
            f"{sum(used) / len(used):.1f} ({min(used)}–{max(used)}) |"
        )
    return "\n".join([*lines, "", *_heads_alone(records)]) + "\n"


def _heads_alone(records: list[Data]) -> list[str]:
    """Each head alone: its accuracy over the records against its mean score, the data behind the table."""
    from scipy.stats import spearmanr

    correct = sum(
        (torch.tensor(data["span_source"])[_shares_all(data).argmax(-1)] == torch.tensor(data["gold"])).sum(
            -1
        )
        for data in records
    )  # [L, H]
    alone = correct.double() / sum(len(data["gold"]) for data in records)
    score = torch.stack([data["scores"].double() for data in records]).mean(0)
    n_heads = score.shape[1]

    def listed(order: torch.Tensor) -> str:
        return ", ".join(
            f"L{int(i) // n_heads}.H{int(i) % n_heads} {100 * alone.flatten()[i]:.0f}% ({score.flatten()[i]:.3f})"
            for i in order[:10]
        )

    rho = spearmanr(score.flatten().numpy(), alone.flatten().numpy()).statistic
    return [
        f"Each head alone (accuracy, mean P(X > Y)); Spearman of score and accuracy over the {score.numel()} heads: "
        f"{rho:.2f}.",
        "",
        f"- best alone: {listed(alone.flatten().argsort(descending=True))}",
        f"- highest scores: {listed(score.flatten().argsort(descending=True))}",
    ]


def _shares_all(data: Data) -> torch.Tensor:
    """``[L, H, U, S]`` every head's span shares."""
    return normalise(data["units"].double())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", choices=("quotesum", "verigran"))
    parser.add_argument("--limit", type=int)
    parser.add_argument("--model", help="a model name or path (default: the offline SmolLM2)")
    parser.add_argument("--out", type=Path, required=True, help="the run folder")
    parser.add_argument("--score-only", action="store_true", help="step 2 only, from the folder's files")
    args = parser.parse_args()
    if not args.score_only:
        if args.dataset is None:
            parser.error("--dataset is needed to run the passes (or --score-only)")
        from rcattr.eval.attribution.config import BenchmarkConfig
        from rcattr.eval.attribution.methods import default_methods
        from rcattr.eval.attribution.runner import AttributionBenchmark
        from rcattr.runtime.models import load_model

        methods = default_methods()
        methods.add(PerHeadMethod(args.out / "per_head"))
        config = BenchmarkConfig(args.dataset, methods=("per_head",), limit=args.limit, model=args.model)
        model, tokenizer = load_model(args.model)
        AttributionBenchmark(config, model, tokenizer, args.out, methods=methods).compute()
    table = score(args.out / "per_head")
    (args.out / "levers.md").write_text(table, encoding="utf-8")
    print(table)
    print(json.dumps({"written": str(args.out / "levers.md")}))


if __name__ == "__main__":
    main()
