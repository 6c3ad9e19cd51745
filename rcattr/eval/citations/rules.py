"""Citation rules measured on the benchmark's lines: precision, recall and F1 of the cited documents.

A rule cites, per answer sentence, the documents whose share of its attribution is at least `min_share`
of the best one's, at most `max_sources`, and none when the sentence's signal is below `threshold`
([`rcattr.grounding.citations.cited_sources`][rcattr.grounding.citations.cited_sources]). The sentences measured are the gold answers' labelled ones (all of
QuoteSum's; Veri-Gran marks only its record's statement, so its other sentences are unlabelled and left
out) and, per record, one sentence of another question's answer appended to the answer, whose gold is no
document. Counts are micro over sentences: precision is the cited documents of the answers' sentences that
are gold over all they cite, recall the gold documents cited over all gold, and the appended sentences are
reported as the share left uncited. The rule is chosen by the F1 of precision and recall, on the dev part of
both files (the best mean F1), among every combination of the grid below; the held-back part checks it, and
the appended sentences check what its withholding (or its absence) leaves uncited. Intervals are 95% percentile bootstraps over records (a record's
sentences share its documents), and each other rule's F1 difference to the chosen one is paired (the same
draws).

The ablation keeps the best rule of each family, on the dev part too: the one-document baseline (the top
document, always), no withholding, each withholding signal (context reliance, the sentence's mean token
support, its mean groundedness), and shares counted against 1 rather than against the best document; and,
on rows that have it, the chosen rule with the sentences [`citations`][rcattr.attribution.result.RCAttributionResult.citations]
finds unsupported left uncited (its fixed cut-off, [`rcattr.grounding.vouching.UNSUPPORTED_BELOW`][rcattr.grounding.vouching.UNSUPPORTED_BELOW]), as the
library cites.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from rcattr.eval.common.metrics import resample_records
from rcattr.grounding.citation_rule import CitationRule
from rcattr.grounding.citations import cited_sources
from rcattr.grounding.vouching import UNSUPPORTED_BELOW
from rcattr.moved import renamed_name

SIGNALS = ("reliance", "support", "groundedness")
SHARES = tuple(round(0.1 * step, 1) for step in range(1, 11))
MAX_SOURCES = (1, 2, 3, 4)
QUANTILES = tuple(range(5, 55, 5))  # withholding thresholds: these percentiles of the signal on dev sentences
PARTS = ("dev", "held_back")
VOUCHED = "chosen, unsupported left uncited (the library's)"
PARTLY_LABELLED = (
    "verigran",
)  # datasets whose answers mark one statement: unmarked sentences are unlabelled

Lines = Mapping[str, Sequence[Mapping[str, Any]]]  # dataset -> its records' lines


@dataclass(frozen=True)
class CandidateRule:
    """One candidate citation rule of the grid (the library's is `CitationRule`); `relative=False` counts `min_share` against 1 (the ablation's)."""

    min_share: float
    max_sources: int
    signal: str | None = None
    threshold: float = 0.0
    relative: bool = True

    def cite(self, sentence: Mapping[str, Any]) -> list[int]:
        """The documents the rule cites for one sentence line."""
        shares = sentence["shares"]
        value = None if self.signal is None else sentence[self.signal]
        if self.relative:
            rule = CitationRule(self.min_share, self.max_sources, min_reliance=self.threshold)
            return cited_sources(shares, value, rule)[0]
        if value is not None and value < self.threshold:
            return []
        order = sorted(range(len(shares)), key=lambda d: (-shares[d], d))
        return [d for d in order if shares[d] >= self.min_share and shares[d] > 0][: self.max_sources]

    def describe(self) -> str:
        share = f"share >= {self.min_share:g} x best" if self.relative else f"share >= {self.min_share:g}"
        withhold = "" if self.signal is None else f", none when {self.signal} < {self.threshold:.3f}"
        return f"{share}, at most {self.max_sources}{withhold}"


def part_lines(lines: Sequence[Mapping[str, Any]], part: str) -> list[Mapping[str, Any]]:
    """The lines of `part` (`"dev"` or `"held_back"`), without the records skipped as too long."""
    return [line for line in lines if "skipped" not in line and line["held_back"] == (part == "held_back")]


def labelled(lines: Lines) -> dict[str, list[Mapping[str, Any]]]:
    """Each dataset's lines with only its labelled answer sentences kept in `sentences`."""
    return {
        dataset: [
            line
            if "skipped" in line or dataset not in PARTLY_LABELLED
            else {**line, "sentences": [s for s in line["sentences"] if s["gold"]]}
            for line in rows
        ]
        for dataset, rows in lines.items()
    }


COUNTS = ("correct", "cited", "gold", "sentences", "foreign", "foreign_cited", "foreign_uncited")


def counts(rule: CandidateRule, lines: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """`[n_records, 7]` per record, the [`COUNTS`][rcattr.eval.citations.rules.COUNTS]: on the answer's sentences, the cited documents that
    are gold, the cited ones, the gold ones and the sentences; on the appended sentences, how many, the
    documents cited, and the sentences left uncited."""
    out = np.zeros((len(lines), len(COUNTS)))
    for row, line in enumerate(lines):
        for sentence in line["sentences"]:
            cited, gold = set(rule.cite(sentence)), set(sentence["gold"])
            out[row, :4] += (len(cited & gold), len(cited), len(gold), 1)
        for sentence in line.get("foreign", []):
            appended = rule.cite(sentence)
            out[row, 4:] += (1, len(appended), not appended)
    return out


def scores(totals: np.ndarray) -> np.ndarray:
    """From `[..., 7]` summed counts, `[..., 4]`: precision and recall on the answers' sentences, the
    share of appended sentences left uncited, and the F1 of precision and recall (NaN where undefined)."""
    correct, cited, gold, _, foreign, _, foreign_uncited = np.moveaxis(totals, -1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = correct / cited
        recall = correct / gold
        withheld = foreign_uncited / foreign
        f1 = 2 * correct / (cited + gold)
    return np.stack([precision, recall, withheld, f1], -1)


def mean_f1(rule: CandidateRule, lines: Lines, part: str) -> float:
    """The rule's F1 averaged over the datasets, on `part`."""
    return float(
        np.nanmean([scores(counts(rule, part_lines(rows, part)).sum(0))[3] for rows in lines.values()])
    )


def thresholds(lines: Lines, signal: str) -> list[float]:
    """Withholding thresholds of `signal`: its [`QUANTILES`][rcattr.eval.citations.rules.QUANTILES] over the dev sentences of every dataset."""
    values = [
        s[signal]
        for rows in lines.values()
        for line in part_lines(rows, "dev")
        for s in [*line["sentences"], *line.get("foreign", [])]
        if s[signal] is not None
    ]
    return [float(v) for v in np.percentile(values, QUANTILES)] if values else []


def families(lines: Lines) -> dict[str, list[CandidateRule]]:
    """Each ablation family's rules."""
    shared = [CandidateRule(share, most) for share in SHARES for most in MAX_SOURCES]
    found = {
        "top document": [CandidateRule(1.0, 1)],
        "no withholding": shared,
        "share against 1": [replace(rule, relative=False) for rule in shared],
    }
    for signal in SIGNALS:
        found[f"withheld by {signal}"] = [
            replace(rule, signal=signal, threshold=threshold)
            for rule in shared
            for threshold in thresholds(lines, signal)
        ]
    return found


def best(rules: Iterable[CandidateRule], lines: Lines) -> CandidateRule:
    """The rule with the best mean F1 on the dev part (the first of equals)."""
    return max(rules, key=lambda rule: mean_f1(rule, lines, "dev"))


def evaluate(lines: Lines, *, seed: int = 0, n_boot: int = 2000) -> dict[str, Any]:
    """The chosen rule and the ablation: per family, its best dev rule's figures on both parts."""
    skipped = {dataset: sum("skipped" in line for line in rows) for dataset, rows in lines.items()}
    lines = labelled(lines)
    chosen_by_family = {name: best(rules, lines) for name, rules in families(lines).items()}
    chosen = max(chosen_by_family.values(), key=lambda rule: mean_f1(rule, lines, "dev"))
    sentences = [s for rows in lines.values() for line in rows for s in line.get("sentences", [])]
    if any("vouch" in s for s in sentences):
        # the library withholds by the support of a sentence's held part, older rows by the whole's
        signal = "held_support" if all("held_support" in s for s in sentences) else "vouch"
        chosen_by_family[VOUCHED] = replace(chosen, signal=signal, threshold=UNSUPPORTED_BELOW)
    tables: dict[str, Any] = {}
    for dataset, rows in lines.items():
        for part in PARTS:
            records = part_lines(rows, part)
            draws = resample_records(len(records), n_boot, seed)
            measured = {name: _measure(rule, records, draws) for name, rule in chosen_by_family.items()}
            reference = _measure(chosen, records, draws)
            tables[f"{dataset}/{part}"] = {
                "records": len(records),
                "sentences": int(sum(len(line["sentences"]) for line in records)),
                "foreign": int(sum(len(line.get("foreign", [])) for line in records)),
                "chosen": _summary(reference, reference),
                **{name: _summary(value, reference) for name, value in measured.items()},
            }
    return {
        "skipped": skipped,
        "chosen": asdict(chosen),
        "chosen_text": chosen.describe(),
        "families": {
            name: asdict(rule) | {"text": rule.describe()} for name, rule in chosen_by_family.items()
        },
        "tables": tables,
    }


def _measure(
    rule: CandidateRule, records: Sequence[Mapping[str, Any]], draws: np.ndarray
) -> dict[str, np.ndarray]:
    per_record = counts(rule, records)
    return {
        "value": scores(per_record.sum(0)),
        "draws": scores(per_record[draws].sum(1)),
        "totals": per_record.sum(0),
    }


def _interval_of(draws: np.ndarray) -> list[float]:
    return [float(v) for v in np.nanpercentile(draws, [2.5, 97.5])]


def _summary(measured: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The scores with intervals, and the F1 difference to the chosen rule with its paired interval."""
    value, draws, totals = measured["value"], measured["draws"], measured["totals"]
    out: dict[str, Any] = {}
    for index, name in enumerate(("precision", "recall", "foreign_uncited", "f1")):
        out[name] = [float(value[index]), *_interval_of(draws[:, index])]
    out["f1_minus_chosen"] = [
        float(value[3] - reference["value"][3]),
        *_interval_of(draws[:, 3] - reference["draws"][:, 3]),
    ]
    out["cited_per_sentence"] = float(totals[1] / max(totals[3], 1))
    return out


def markdown(results: Mapping[str, Any]) -> str:
    """The report: the chosen rule's table, then the ablation's F1 per dataset and part."""
    tables = results["tables"]
    lines = [
        "## Citations: the documents cited per answer sentence against the gold labels",
        "",
        f"Chosen on the dev parts (best mean F1): **{results['chosen_text']}**. Records left out as longer "
        "than --max-tokens: "
        + ", ".join(f"{dataset} {count}" for dataset, count in results["skipped"].items())
        + ".",
        "",
        "| data | part | records | sentences (+ appended) | precision | recall | appended left uncited | F1 "
        "| cited per sentence |",
        "|---|---|---:|---:|---|---|---|---|---:|",
    ]
    for key, table in tables.items():
        dataset, part = key.split("/")
        chosen = table["chosen"]
        lines.append(
            f"| {dataset} | {part} | {table['records']} | {table['sentences']} (+ {table['foreign']}) | "
            + " | ".join(_interval(chosen[name]) for name in ("precision", "recall", "foreign_uncited", "f1"))
            + f" | {chosen['cited_per_sentence']:.2f} |"
        )
    lines += [
        "",
        "Ablation: each family's best rule on the dev parts, its F1, its difference to the chosen rule "
        "(paired 95% interval) and the share of appended sentences it leaves uncited.",
        "",
        "| rule family | best dev rule | " + " | ".join(key.replace("/", " ") for key in tables) + " |",
        "|---|---|" + "---|" * len(tables),
    ]
    for name, rule in results["families"].items():
        cells = [
            f"{_interval(table[name]['f1'])}, {_difference(table[name]['f1_minus_chosen'])}; "
            f"{_share(table[name]['foreign_uncited'][0])} uncited"
            for table in tables.values()
        ]
        lines.append(f"| {name} | {rule['text']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _interval(values: Sequence[float]) -> str:
    value, low, high = values
    return f"{100 * value:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"


def _share(value: float) -> str:
    return "-" if np.isnan(value) else f"{100 * value:.0f}%"


def _difference(values: Sequence[float]) -> str:
    value, low, high = values
    return f"{100 * value:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def __getattr__(name: str) -> Any:
    """The names this module gave up, with a DeprecationWarning until rcattr 0.3.0 (`rcattr.moved.RENAMED_NAMES`)."""
    return renamed_name(__name__, name)
