"""`rcattr fit-probe`: a support probe fitted on your own labelled claims with your model, for
`RCAttributor(probe=SupportProbe.load(path))` and `rcattr explain --probe`."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from rcattr.cli.inputs import CommandError

LABELS = {"1": 1, "0": 0, "true": 1, "false": 0, "attributable": 1, "not attributable": 0}


@dataclass(frozen=True)
class LabelledClaim:
    """One line of the claims file: a claim, the passages it is checked against, its question and label."""

    question: str
    claim: str
    references: tuple[str, ...]
    label: int


def read_claims(path: str | Path) -> list[LabelledClaim]:
    """The claims of a JSON-lines file: `claim`, `references` (a list of passages), `question` (optional)
    and `label` (1 / 0, true / false, "attributable" / "not attributable"; AttributionBench's
    `attribution_label` too). A bad line raises CommandError naming it."""
    if not Path(path).is_file():
        raise CommandError(f"{path}: no such claims file")
    claims = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            label = LABELS[str(row.get("label", row.get("attribution_label"))).strip().lower()]
            references = row["references"]
            if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
                raise TypeError("references must be a list of strings")
            claims.append(
                LabelledClaim(str(row.get("question", "")), str(row["claim"]), tuple(references), label)
            )
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
            raise CommandError(
                f"{path}, line {number}: give claim, references (a list of passages), label (1 or 0) and "
                f"optionally question ({type(error).__name__}: {error})"
            ) from None
    if {claim.label for claim in claims} != {0, 1}:
        raise CommandError(f"{path}: the claims must hold both labels, attributable (1) and not (0)")
    return claims


def fit_probe(args: argparse.Namespace) -> int:
    """Attribute each claim over its references, fit the probe on their features and labels, and save it."""
    from tqdm.auto import tqdm

    from rcattr.attribution.attributor import RCAttributor
    from rcattr.attribution.claim_checks import claim_features
    from rcattr.grounding.probe import SupportProbe, model_identity
    from rcattr.runtime.models import load_model
    from rcattr.text.prompting import ContextInput

    claims = read_claims(args.claims)
    model, tokenizer = load_model(args.model, verbose=args.verbose)
    attributor = RCAttributor(model, tokenizer, probe=None)
    features = [
        claim_features(attributor, ContextInput(list(claim.references), claim.question), claim.claim)
        for claim in tqdm(claims, desc="claims", unit="claim")
    ]
    groups = [claim.question or str(index) for index, claim in enumerate(claims)]
    probe = SupportProbe.fit(
        features, [claim.label for claim in claims], model_identity(model)[0], groups=groups
    )
    probe.save(args.out)
    cuts = ", ".join(f"{name} {cut:.3f}" for name, cut in probe.cuts.items())
    print(f"{args.out}: fitted on {len(claims)} claims of {probe.model}; operating points: {cuts}")
    return 0
