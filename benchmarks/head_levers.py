"""Head-selection and vote levers that need more than a rule over the head scores (issues 49 and 74), from
per-head data.

Step 1 runs the attribution runner (every option of ``python -m rcattr.eval.attribution`` but ``--out``, e.g.
``--context-tokens 8192``; methods ``heads,bm25,hidden_state`` unless ``--methods`` says) with its ``heads``
method saving per record every head's score, the default span scorer's per-unit span scores of every head,
each layer's reach and BM25's scores (``OUT/per_head/ID.pt``); its rows are the runner's ``heads`` rows, and
the folder resumes like any other run. Step 2 scores each lever of :data:`LEVERS` from those files, with
paired 95% intervals (records resampled) against the default (outlier heads among those that see) and BM25,
and writes ``OUT/levers.md`` (and the same figures in ``OUT/levers.json``). ``benchmarks/long_context_diagnosis.py`` compares two such folders (short and
long) record by record.

None of the levers is in rcattr: each lost or tied on some model (docs/benchmarks/attribution.md, "Three architectures",
and docs/benchmarks/long-contexts.md, "Long retrievals").

    python benchmarks/head_levers.py --dataset verigran --limit 64 --out runs/levers/smollm2_verigran
    python benchmarks/head_levers.py --dataset verigran --limit 44 --context-tokens 8192 \
        --model runs/models/qwen2.5-coder-0.5b-instruct --out runs/levers/qwen_verigran_8k
    python benchmarks/head_levers.py --score-only --out runs/levers/qwen_verigran_8k   # step 2 again
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rcattr.attribution.fusion import head_agreement, lexical_fusion
from rcattr.attribution.lexical import bm25_scores
from rcattr.attribution.spans import normalise
from rcattr.eval.attribution.method import Row
from rcattr.eval.attribution.sweep import SweepMethod, SweepPass, shared_key
from rcattr.eval.common.metrics import paired_difference
from rcattr.heads.scores import min_heads, outlier_count, outlier_heads, seeing_heads, top_heads

Data = dict[str, Any]
Lever = Callable[[Data], tuple[torch.Tensor, int]]  # a record's data -> ([U, S] unit scores, heads used)
Selection = Callable[[Data], torch.Tensor]  # a record's data -> [k, 2] the heads (layer, head) that vote


@dataclass(frozen=True)
class PerHeadSweep(SweepMethod):
    """The runner's ``heads`` method (its rows unchanged) that also saves each record's per-head data under
    ``folder`` as ``ID.pt``: every head's ``[L, H]`` score, the default scorer's ``[L, H, U, S]`` unit span
    scores, each layer's ``[L]`` reach, BM25's ``[U, S]``, each span's source and token count, the gold sources."""

    folder: Path = Path("per_head")

    def row(self, built: SweepPass, record: Any, config: Any) -> Row:
        scores = self.head_pass(built, record, config)
        default = built.recipes.recipes[1]  # selection_ablation's rows: the paper's recipe, then the default
        default_key = shared_key(self.scorers(built), default.scorer_key)
        text = built.attributor.model.config.get_text_config()
        example = scores.example
        data = {
            "scores": scores.every_head_score["superiority"].float(),
            "units": scores.units[default_key].float(),  # [L, H, U, S]
            "reach": scores.reach,
            "bm25": bm25_scores(example)[1].float(),  # [U, S]
            "span_source": [span.source for span in example.context_spans],
            "span_tokens": [len(tokens) for tokens in example.context_ranges],
            "gold": [span.source for span in record.gold],
            "group": text.num_attention_heads // text.num_key_value_heads,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        torch.save(data, self.folder / f"{record.id}.pt")
        return self.scored_row(built, scores, record, config)


def per_head_methods(folder: Path) -> Any:
    """The runner's built-in methods with ``heads`` saving its per-head data under ``folder``."""
    from rcattr.eval.attribution.methods import RUN_FILES, default_methods
    from rcattr.eval.common.registry import MethodRegistry

    built_in = default_methods()
    heads = built_in["heads"]
    assert isinstance(heads, SweepMethod)
    dumping = PerHeadSweep(heads.attributor, "heads", heads.recipes, heads.curve, folder=folder)
    return MethodRegistry(
        [dumping if name == "heads" else m for name, m in built_in.items()], reserved=RUN_FILES
    )


def head_shares(data: Data, heads: torch.Tensor) -> torch.Tensor:
    """``[k, U, S]`` span shares of the ``[k, 2]`` heads."""
    return normalise(data["units"][heads[:, 0], heads[:, 1]].double())


def _seeing(data: Data) -> torch.Tensor | None:
    """``[L, H]`` the heads that see the whole context from the answer (None: all, or no reach saved)."""
    reach = data.get("reach")
    if reach is None:
        return None
    seeing = seeing_heads(reach, data["scores"].shape[1])
    return None if bool(seeing.all()) else seeing


def default_heads(data: Data) -> torch.Tensor:
    """The default's heads: the outliers among the heads that see (rcattr's ``OutlierHeads``)."""
    return outlier_heads(data["scores"], among=_seeing(data))


def _pool(data: Data, sigmas: float) -> torch.Tensor:
    """The heads more than ``sigmas`` sd above the mean of all heads, at least the outliers."""
    flat = data["scores"].flatten().double()
    above = int((flat > flat.mean() + sigmas * flat.std(correction=0)).sum())
    return top_heads(data["scores"], max(above, outlier_count(data["scores"]), 1))


def voting(select: Selection) -> Lever:
    """The vote of the heads ``select`` picks."""

    def lever(data: Data) -> tuple[torch.Tensor, int]:
        heads = select(data)
        return head_shares(data, heads).sum(0), len(heads)

    return lever


def floor(count: int = 1, share: float = 0.0, stated: bool = False) -> Lever:
    """The outliers among the heads that see, at least ``count`` of them, ``share`` of the heads that see and,
    if ``stated``, the stated minimum below which a result is flagged ``few_heads`` (``min_heads``: 5% of all
    the model's heads) (the best by score): a selection that does not thin out as the context grows."""

    def lever(data: Data) -> tuple[torch.Tensor, int]:
        seeing = _seeing(data)
        n_seeing = data["scores"].numel() if seeing is None else int(seeing.sum())
        least = max(count, round(share * n_seeing), min_heads(data["scores"].numel()) if stated else 0)
        heads = default_heads(data)
        if len(heads) < least:
            heads = top_heads(data["scores"], min(least, n_seeing), among=seeing)
        return head_shares(data, heads).sum(0), len(heads)

    return lever


def score_weighted(data: Data) -> tuple[torch.Tensor, int]:
    """Every head that sees above the mean of those that see, its vote weighted by its score's z above it."""
    seeing = _seeing(data)
    scores = data["scores"].double()
    pool = scores.flatten() if seeing is None else scores[seeing]
    z = (scores - pool.mean()) / pool.std(correction=0).clamp_min(1e-12)
    if seeing is not None:
        z = z.masked_fill(~seeing, 0)
    heads = (z > 0).nonzero()
    return torch.einsum("k,kus->us", z[heads[:, 0], heads[:, 1]], head_shares(data, heads)), len(heads)


def top_span_votes(data: Data) -> tuple[torch.Tensor, int]:
    """The default's heads, each giving one vote to its own top span per unit (not its share of every span):
    many documents cannot dilute a head's vote; shares break ties."""
    heads = default_heads(data)
    shares = head_shares(data, heads)
    votes = torch.nn.functional.one_hot(shares.argmax(-1), shares.shape[-1]).sum(0).double()
    return votes + 1e-3 * shares.mean(0), len(heads)


def against_every_head(data: Data) -> tuple[torch.Tensor, int]:
    """The default's vote less what every head that sees gives each span (a positional or length prior all heads
    share: recent documents, long ones), per unit."""
    heads = default_heads(data)
    seeing = _seeing(data)
    every = normalise(data["units"].double())  # [L, H, U, S]
    background = (every.flatten(0, 1) if seeing is None else every[seeing]).mean(0)  # [U, S]
    return head_shares(data, heads).mean(0) - background, len(heads)


def document_scores(data: Data, units: torch.Tensor) -> torch.Tensor:
    """``[U, D]``: the ``[U, S]`` span scores summed per document."""
    source = torch.tensor(data["span_source"])
    out = torch.zeros(units.shape[0], int(source.max()) + 1, dtype=torch.float64)
    return out.index_add_(1, source, units.double())


def document_sum(data: Data) -> tuple[torch.Tensor, int]:
    """The default's vote summed over each document's spans (the runner takes the document of the best span)."""
    units, count = voting(default_heads)(data)
    return document_scores(data, units)[:, data["span_source"]], count  # each span scores its document's sum


def layer_centred(data: Data) -> tuple[torch.Tensor, int]:
    """The outliers of the scores centred per layer, among the heads that see: a layer whose heads all score high
    (Qwen2's first layers, whose logits favour the nearest keys) does not crowd the others out."""
    scores = data["scores"].double()
    centred = scores - scores.mean(1, keepdim=True)
    heads = outlier_heads(centred, among=_seeing(data))
    return head_shares(data, heads).sum(0), len(heads)


def recent_share(data: Data, tail: float = 0.25) -> torch.Tensor:
    """``[L, H]`` each head's mean vote share on the spans in the last ``tail`` of the context's tokens (those
    nearest the question)."""
    tokens = torch.tensor(data["span_tokens"], dtype=torch.float64)
    end = tokens.cumsum(0)
    recent = end > (1 - tail) * float(end[-1])
    return normalise(data["units"].double())[..., recent].sum(-1).mean(-1)


def _allowed_heads(data: Data, allowed: torch.Tensor) -> torch.Tensor:
    """``[k, 2]`` the outliers among the ``[L, H]`` allowed heads that see (all that see when none is allowed)."""
    seeing = _seeing(data)
    among = allowed if seeing is None else allowed & seeing
    if not bool(among.any()):
        among = seeing
    return outlier_heads(data["scores"], among=among)


def not_positional(limit: float) -> Lever:
    """The outliers among the heads that see and give at most ``limit`` of their vote to the last quarter of the
    context: a head whose vote follows distance, not content, does not vote."""

    return voting(lambda data: _allowed_heads(data, recent_share(data) <= limit))


def distance_correlation(data: Data) -> torch.Tensor:
    """``[L, H]`` each head's Spearman correlation, over the record's spans, between a span's place (its last
    token's) and the head's vote per token on it (mean over units): near 1 for a head whose vote grows towards
    the question whatever the spans say, a test of position that needs no label and no quarter (ordinal ranks:
    equal votes are ranked in span order)."""
    tokens = torch.tensor(data["span_tokens"], dtype=torch.float64)
    density = normalise(data["units"].double()).mean(-2) / tokens  # [L, H, S]
    ranks = density.argsort(-1).argsort(-1).double()
    place = tokens.cumsum(0).argsort().argsort().double()
    ranks, place = ranks - ranks.mean(-1, keepdim=True), place - place.mean()
    return (ranks * place).sum(-1) / (ranks.norm(dim=-1) * place.norm()).clamp_min(1e-12)


def distance_bound(limit: float | None = None, z: float | None = None) -> Callable[[int], float]:
    """The highest :func:`distance_correlation` a head may have over ``S`` spans: ``limit``, or ``z`` standard
    errors of a correlation over the record's spans (``z / sqrt(S - 1)``: a test that tightens as the documents
    grow many)."""
    if (limit is None) == (z is None):
        raise ValueError("give one of limit and z")
    return lambda n_spans: limit if z is None else z / max(n_spans - 1, 1) ** 0.5


def not_distance_driven(data: Data, bound: Callable[[int], float]) -> torch.Tensor:
    """``[L, H]`` the heads whose :func:`distance_correlation` is within the :func:`distance_bound`."""
    return distance_correlation(data) <= bound(len(data["span_tokens"]))


def not_distance_driven_heads(limit: float | None = None, z: float | None = None) -> Selection:
    """The outliers among the heads that see and are :func:`not_distance_driven`."""
    bound = distance_bound(limit, z)

    def select(data: Data) -> torch.Tensor:
        return _allowed_heads(data, not_distance_driven(data, bound))

    return select


def less_distance_driven_heads(z: float) -> Selection:
    """The default's outliers less those that are not :func:`not_distance_driven` within ``z`` standard errors
    (all of them when none is left): the outliers still stand out from every head that sees, and only heads the
    default already scores are tested."""
    bound = distance_bound(z=z)

    def select(data: Data) -> torch.Tensor:
        heads = default_heads(data)
        kept = not_distance_driven(data, bound)[heads[:, 0], heads[:, 1]]
        return heads[kept] if bool(kept.any()) else heads

    return select


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
    return head_shares(data, heads).sum(0), len(heads)


def agreement_pool(sigmas: float) -> Lever:
    def lever(data: Data) -> tuple[torch.Tensor, int]:
        heads = _pool(data, sigmas)
        shares = head_shares(data, heads)  # [k, U, S]
        core = shares[: len(default_heads(data))].mean(0).flatten()
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
        heads = default_heads(data) if pool is None else _pool(data, pool)
        shares = head_shares(data, heads)
        entropy = -(shares.clamp_min(1e-12).log() * shares).sum(-1)  # [k, U]
        weights = (1 - entropy / torch.log(torch.tensor(float(shares.shape[-1]))).clamp_min(1e-12)).clamp_min(
            0
        )
        return torch.einsum("ku,kus->us", weights, shares), len(heads)

    return lever


def lexical_gate(select: Selection) -> Lever:
    """The vote of the heads ``select`` picks, with BM25 where they disagree (rcattr's ``lexical=True``)."""

    def lever(data: Data) -> tuple[torch.Tensor, int]:
        heads = select(data)
        shares = head_shares(data, heads)
        vote = normalise(shares.sum(0))
        return lexical_fusion(vote, data["bm25"], head_agreement(shares, None, vote)), len(heads)

    return lever


DEFAULT = "default (outlier heads)"
LEVERS: dict[str, Lever] = {
    DEFAULT: voting(default_heads),
    "default + BM25 where the heads disagree": lexical_gate(default_heads),
    "outliers, at least 3 heads that see": floor(count=3),
    "outliers, at least 10 heads that see": floor(count=10),
    "outliers, at least 25% of the heads that see": floor(share=0.25),
    "outliers, at least the stated minimum of heads that see (5% of all heads)": floor(stated=True),
    "z-weighted vote of the heads that see above their mean": score_weighted,
    "one vote per head: its top span": top_span_votes,
    "vote less every seeing head's mean": against_every_head,
    "document sum of the vote": document_sum,
    "outliers of layer-centred scores among the heads that see": layer_centred,
    "outliers among heads with at most half their vote on the last quarter": not_positional(0.5),
    "outliers among heads whose vote per token follows the spans' places at most 0.5": voting(
        not_distance_driven_heads(limit=0.5)
    ),
    "the same, at most 3 standard errors of the correlation": voting(not_distance_driven_heads(z=3.0)),
    "the same, with BM25 where those heads disagree": lexical_gate(not_distance_driven_heads(z=3.0)),
    "outliers less those whose vote follows the spans' places (3 standard errors)": voting(
        less_distance_driven_heads(z=3.0)
    ),
    "the same (outliers less), with BM25 where those heads disagree": lexical_gate(
        less_distance_driven_heads(z=3.0)
    ),
    "outlier key-head groups": key_groups,
    "agreement-weighted, heads above 1 sd": agreement_pool(1.0),
    "concentration-weighted outliers": concentration(None),
}
"""The levers of issues 49 and 74; the issue-49 pools that lost on every model (agreement above the mean,
concentration over pools) are its table's (docs/records/attribution_heads/levers.md)."""


def _hits(units: torch.Tensor, data: Data) -> list[bool]:
    return [
        data["span_source"][top] == gold
        for top, gold in zip(units.argmax(-1).tolist(), data["gold"], strict=True)
    ]


def lever_results(records: list[Data]) -> dict[str, Any]:
    """Each lever's accuracy, paired differences against the default and BM25 (``[d, low, high]``, fractions)
    and heads used (mean, fewest, most) over ``records``, the per-head data of one folder."""
    hits: dict[str, list[list[bool]]] = {}
    counts: dict[str, list[int]] = {}
    for name, lever in LEVERS.items():
        results = [lever(data) for data in records]
        hits[name] = [_hits(units, data) for (units, _), data in zip(results, records, strict=True)]
        counts[name] = [count for _, count in results]
    hits["bm25"] = [_hits(data["bm25"], data) for data in records]
    counts["bm25"] = [0] * len(records)
    spans = sum(map(len, hits["bm25"]))
    levers = {
        name: {
            "accuracy": sum(map(sum, rows)) / spans,
            "against_default": list(paired_difference(rows, hits[DEFAULT])),
            "against_bm25": list(paired_difference(rows, hits["bm25"])),
            "heads": {
                "mean": sum(counts[name]) / len(records),
                "min": min(counts[name]),
                "max": max(counts[name]),
            },
        }
        for name, rows in hits.items()
    }
    return {"records": len(records), "spans": spans, "levers": levers}


def _points(difference: list[float]) -> str:
    d, low, high = (100 * v for v in difference)
    return f"{d:+.1f} [{low:+.1f}, {high:+.1f}]"


def score(folder: Path) -> tuple[str, dict[str, Any]]:
    """The levers' table (markdown) and :func:`lever_results` from the per-head files of ``folder``."""
    records = [torch.load(path) for path in sorted(folder.glob("*.pt"))]
    if not records:
        raise SystemExit(f"no per-head files in {folder}: run step 1 first")
    results = lever_results(records)
    lines = [
        f"{results['records']} records, {results['spans']} spans. Accuracy, and paired differences in points "
        "[95% CI, records resampled].",
        "",
        "| lever | accuracy % | − default | − BM25 | heads: mean (fewest–most) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, row in results["levers"].items():
        heads = row["heads"]
        lines.append(
            f"| {name} | {100 * row['accuracy']:.1f} | {_points(row['against_default'])} | "
            f"{_points(row['against_bm25'])} | {heads['mean']:.1f} ({heads['min']}–{heads['max']}) |"
        )
    return "\n".join([*lines, "", *_heads_alone(records)]) + "\n", results


def head_accuracy(records: list[Data]) -> torch.Tensor:
    """``[L, H]`` each head's accuracy alone over the records' output units."""
    correct = sum(
        (torch.tensor(data["span_source"])[_shares_all(data).argmax(-1)] == torch.tensor(data["gold"])).sum(
            -1
        )
        for data in records
    )
    return correct.double() / sum(len(data["gold"]) for data in records)


def _heads_alone(records: list[Data]) -> list[str]:
    """Each head alone: its accuracy over the records against its mean score, the data behind the table."""
    from scipy.stats import spearmanr

    alone = head_accuracy(records)
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
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Any other option is the attribution runner's (python -m rcattr.eval.attribution --help).",
    )
    parser.add_argument("--out", type=Path, required=True, help="the run folder")
    parser.add_argument("--score-only", action="store_true", help="step 2 only, from the folder's files")
    args, runner_args = parser.parse_known_args()
    if not args.score_only:
        from rcattr.eval.attribution.cli import main as run

        if "--methods" not in runner_args:
            runner_args += ["--methods", "heads,bm25,hidden_state"]
        run([*runner_args, "--out", str(args.out)], per_head_methods(args.out / "per_head"))
    table, results = score(args.out / "per_head")
    (args.out / "levers.md").write_text(table, encoding="utf-8")
    (args.out / "levers.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(table)
    print(json.dumps({"written": [str(args.out / "levers.md"), str(args.out / "levers.json")]}))


if __name__ == "__main__":
    main()
