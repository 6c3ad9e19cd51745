"""Claims: the numbers, dates and names of an answer, and whether the context holds each one whole.

Token support ([`rcattr.grounding.support`][rcattr.grounding.support]) asks of each answer token whether the context holds it. A claim made
of several tokens can pass that test piece by piece and still be nowhere in the context: each digit of
`2,781.25` occurs somewhere in a document that says `3,776`, and a greedy answer's tokens are likely by
construction. A claim is therefore taken as one unit:

- [`claim_spans`][rcattr.grounding.claims.claim_spans] finds the answer's claims with regular expressions: numbers (`3,776`, `2.5`,
  `1889`), dates (`June 5, 1889`, `5 June 1889`, `June 1889`) and names (runs of capitalised words,
  `Mount Fuji`, `Hartwell Dredging Ltd`; a lone capitalised word that opens its sentence is not taken
  for a name). No named-entity model is used: none can be downloaded here, and these three kinds are the
  claims a reader checks first;
- a claim is **held** when one sentence of the documents or the question has every one of its parts
  ([`claim_parts`][rcattr.grounding.claims.claim_parts]: a number as the whole number, thousands separators dropped; a name's or a date's
  words, case folded), so `2,781.25` is not held by `3,776` and `Hartwell Dredging` not by a
  sentence that says `dredging`. The template's words are not evidence: its `Document [n]:` labels
  would hold every number up to the number of documents (`rcattr.text.prompting.Prompt.evidence`);
- citation markers that answer engines write (`south[1] [2].`, `[^3]`, `[1, 2]`) are not claims
  ([`citation_markers`][rcattr.grounding.claims.citation_markers]).

[`rcattr.grounding.citations.sentence_citations`][rcattr.grounding.citations.sentence_citations] gives each [`Claim`][rcattr.grounding.claims.Claim] its least token support too, and
scores each answer sentence from both ([`rcattr.grounding.vouching.sentence_support`][rcattr.grounding.vouching.sentence_support]).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from rcattr.text.segmentation import sentence_spans

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE = (
    rf"{_MONTH}\s+{_DAY}(?:,?\s+\d{{4}})?(?![\w,.]*\d)"
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"
    rf"|{_MONTH},?\s+\d{{4}}"
)
_NUMBER = r"(?<![\w.,])\d+(?:[.,]\d+)*"
_CAPITALISED = r"[A-Z][\w'’&-]*"
_CONNECTOR = r"(?:of|the|de|du|da|del|der|van|von|y)"
_NAME = rf"{_CAPITALISED}(?:\s+(?:{_CONNECTOR}\s+)?{_CAPITALISED})*"
_CLAIM = re.compile(rf"(?P<date>{_DATE})|(?P<number>{_NUMBER})|(?P<name>{_NAME})")
_WORD = re.compile(r"\d+(?:[.,]\d+)*\w*|\w+")
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_POSSESSIVE = re.compile(r"['’]s?$")
_POSSESSIVES = re.compile(r"(?<=\w)['’]s?\b")
_CONNECTORS = frozenset(re.findall(r"\w+", _CONNECTOR))
# a citation marker: [1], [^1], [1, 2], [1-3]; a run of them, [1][2] or [1] [2], is one
_ONE_MARKER = r"\[\^?\d+(?:\s*[,;\u2013-]\s*\^?\d+)*\]"
_MARKERS = re.compile(rf"{_ONE_MARKER}(?:\s*{_ONE_MARKER})*")


@dataclass(frozen=True)
class Claim:
    """A number, date or name of the answer, as one unit.

    Attributes
    ----------
    start, end : int
        Character offsets in the answer.
    text : str
        `answer[start:end]`.
    kind : str
        `"number"`, `"date"` or `"name"`.
    held : bool
        Whether one sentence of the documents or the question has every part of it
        ([`claim_parts`][rcattr.grounding.claims.claim_parts]).
    support : float or None
        The least token support of its tokens ([`token_support`][rcattr.record.signals.RCSignals]; None for
        baselines).
    """

    start: int
    end: int
    text: str
    kind: str
    held: bool
    support: float | None = None


@cache
def stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def claim_spans(text: str) -> list[tuple[int, int, str]]:
    """The `(start, end, kind)` of every claim of `text`, in order: dates before the numbers in them,
    names stripped of leading stop words (`The Eiffel Tower` is `Eiffel Tower`) and possessives; a lone
    capitalised word at a sentence's start (capitalised for its place, not as a name) and a list's marker
    (`(1)`) and citation markers (`[1]`, [`citation_markers`][rcattr.grounding.claims.citation_markers]) are left out."""
    starts = {sentence.start for sentence in sentence_spans(text)} | {0}
    markers = citation_markers(text)
    claims = []
    for match in _CLAIM.finditer(text):
        kind = match.lastgroup
        assert kind is not None
        start, end = match.span()
        if any(a <= start and end <= b for a, b in markers):
            continue
        if kind == "number" and text[start - 1 : start] == "(" and text[end : end + 1] == ")":
            continue  # a list's marker, (1)
        if kind == "name":
            words = list(re.finditer(r"\S+", match.group()))
            while words and (words[0].group().casefold() in stop_words()):
                words.pop(0)
            if not words:
                continue
            start = match.start() + words[0].start()
            end = start + len(_POSSESSIVE.sub("", text[start:end]))
            if len(words) == 1 and (start in starts or not text[:start].strip(" \t\n\"'“‘(")):
                continue
        claims.append((start, end, kind))
    return claims


def citation_markers(text: str) -> list[tuple[int, int]]:
    """The `(start, end)` of each run of citation markers in `text` after a word or a sentence, as answer
    engines write them (`south[1] [2].`, `water.[^3]`, `[1, 2]`, `[4-6]`): a bracketed number is a
    pointer to a source, not a number the answer claims. One that opens the text is a list's label, kept."""
    return [match.span() for match in _MARKERS.finditer(text) if text[: match.start()].strip()]


def claim_parts(text: str) -> tuple[str, ...]:
    """The parts a context sentence must have for it to hold claim `text`: its words case folded, each
    number whole without thousands separators (`2,781.25` is `2781.25`), ordinals and numbers with units
    as the number alone (`3rd` is `3`), without a name's connectors (`of`, `the`...) or possessive."""
    return tuple(part for part in _parts(text) if part not in _CONNECTORS) or _parts(text)


def _parts(text: str) -> tuple[str, ...]:
    parts = []
    for word in _WORD.findall(_POSSESSIVES.sub("", text.casefold())):
        number = _DIGITS.match(word)  # the number alone: 3rd is 3, 330m is 330, 3,776 is 3776
        if number is not None:  # (not word[0].isdigit(): "²" is a digit, and no decimal number)
            word = number.group().replace(",", "")
        parts.append(word.rstrip("."))
    return tuple(parts)


def context_parts(texts: Iterable[str]) -> list[frozenset[str]]:
    """The parts ([`claim_parts`][rcattr.grounding.claims.claim_parts]) of each sentence of `texts` (the prompt, or the documents)."""
    return [frozenset(_parts(sentence.text)) for text in texts for sentence in sentence_spans(text)]


def is_held(parts: Sequence[str], context: Sequence[frozenset[str]]) -> bool:
    """Whether one context sentence (`context`: [`context_parts`][rcattr.grounding.claims.context_parts]) has every one of `parts`."""
    return any(all(part in sentence for part in parts) for sentence in context)


def find_claims(answer: str, context: Sequence[frozenset[str]]) -> list[Claim]:
    """The claims of `answer` ([`claim_spans`][rcattr.grounding.claims.claim_spans]), held or not in `context` ([`context_parts`][rcattr.grounding.claims.context_parts]),
    without their token support."""
    return [
        Claim(start, end, answer[start:end], kind, is_held(claim_parts(answer[start:end]), context))
        for start, end, kind in claim_spans(answer)
    ]


def without_markers(text: str) -> str:
    """`text` with its citation markers (`[5]`) dropped, and the spaces before them."""
    for start, end in reversed(citation_markers(text)):
        text = text[:start].rstrip() + text[end:]
    return text


def content_coverage(text: str, documents: Sequence[str]) -> float:
    """The share of `text`'s content words (their [`claim_parts`][rcattr.grounding.claims.claim_parts], stop words left out)
    that occur in `documents`; 1 when it has none."""
    words = [w for w in claim_parts(text) if w not in stop_words()]
    held = {w for document in documents for w in claim_parts(document)}
    return sum(w in held for w in words) / len(words) if words else 1.0
