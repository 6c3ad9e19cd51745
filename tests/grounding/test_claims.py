"""Claims as units: the numbers, dates and names of a text, and whether one context sentence holds each whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rcattr.grounding.claims import (
    citation_markers,
    claim_parts,
    claim_spans,
    content_coverage,
    context_parts,
    find_claims,
    is_held,
    without_markers,
)

DOCUMENTS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall.",
    "Mount Fuji is the highest mountain in Japan, rising 3,776 metres above sea level.",
]


def _claims(text: str) -> list[tuple[str, str]]:
    return [(text[start:end], kind) for start, end, kind in claim_spans(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The Eiffel Tower is 330 meters tall and Mount Fuji is 2,781.25 meters tall.",
            [("Eiffel Tower", "name"), ("330", "number"), ("Mount Fuji", "name"), ("2,781.25", "number")],
        ),
        ("It opened on June 5, 1889 in Paris's centre.", [("June 5, 1889", "date"), ("Paris", "name")]),
        ("On the 3rd of May 2020 it fell 35 percent.", [("3rd of May 2020", "date"), ("35", "number")]),
        ("Reports say it rose. However, Bank of England staff left.", [("Bank of England", "name")]),
        ("The contract went to Hartwell Dredging Ltd.", [("Hartwell Dredging Ltd", "name")]),
        ("It is 330m tall.", [("330", "number")]),
    ],
)
def test_claims_are_numbers_dates_and_names(text: str, expected: list[tuple[str, str]]) -> None:
    assert _claims(text) == expected


@pytest.mark.parametrize(
    ("claim", "parts"),
    [
        ("2,781.25", ("2781.25",)),
        ("3rd of May 2020", ("3", "may", "2020")),
        ("Bank of England", ("bank", "england")),
        ("Japan's Fuji", ("japan", "fuji")),
        ("Sept. 1889", ("sept", "1889")),
    ],
)
def test_claim_parts(claim: str, parts: tuple[str, ...]) -> None:
    assert claim_parts(claim) == parts


def test_a_claim_is_held_only_whole_and_inside_one_sentence() -> None:
    context = context_parts(DOCUMENTS)
    held = {
        claim.text: claim.held
        for claim in find_claims(
            "Mount Fuji rises 3776 metres and 2,781.25 metres. Tower Fuji opened in 1889. Fuji is 3,777 m.",
            context,
        )
    }
    # 3776 is 3,776 whole; every digit of 2,781.25 and of 3,777 occurs in the documents, never the number
    assert held == {
        "Mount Fuji": True,
        "3776": True,
        "2,781.25": False,
        "Tower Fuji": False,
        "1889": True,
        "3,777": False,
    }


@given(
    number=st.integers(min_value=10, max_value=10**7),
    other=st.integers(min_value=10, max_value=10**7),
)
def test_a_number_is_held_exactly_when_a_sentence_has_it(number: int, other: int) -> None:
    context = context_parts([f"The dam holds {other:,} tonnes. Its digits are {' '.join(str(number))}."])
    (claim,) = find_claims(f"It holds {number} tonnes.", context)
    assert claim.held == (number == other)
    assert is_held(claim_parts(f"{number:,}"), context) == (number == other)


@pytest.mark.parametrize(
    ("text", "markers", "claims"),
    [
        ("Cold water flows south[1] [2].", ["[1] [2]"], []),
        ("It rose 5%[^3] in 2020 [4][12].", ["[^3]", "[4][12]"], ["5", "2020"]),
        ("Rates fell [1, 2], then [3-5] rose.", ["[1, 2]", "[3-5]"], []),
        ("[1] Open the lid.", [], ["1"]),  # a list's label, not a pointer to a source
        ("The array [a] has 4 items.", [], ["4"]),
    ],
)
def test_citation_markers_are_not_claims(text: str, markers: list[str], claims: list[str]) -> None:
    """Answer engines' markers (issue 59): a marker above the number of documents is a pointer, not a number."""
    assert [text[a:b] for a, b in citation_markers(text)] == markers
    assert [text[a:b] for a, b, kind in claim_spans(text) if kind == "number"] == claims


def test_a_digit_that_is_no_decimal_number_is_a_word() -> None:
    """The digits "²" and "①" (to str.isdigit()) are no decimal number: they crashed claim_parts (issue 59)."""
    assert claim_parts("10 km² ①") == ("10", "km²", "①")
    assert is_held(claim_parts("10"), context_parts(["It covers 10 km² ①."]))


def test_without_markers_drops_the_engines_citation_markers_only() -> None:
    assert without_markers("It rose 5% in 2020 [5][6]. Then fell [2].") == "It rose 5% in 2020. Then fell."
    assert without_markers("[1] is a list's label") == "[1] is a list's label"


def test_content_coverage_counts_content_words_found_in_the_documents() -> None:
    assert content_coverage(
        "The tower is 330 metres tall in Lyon.", ["A tower of 330 metres."]
    ) == pytest.approx(3 / 5)
    assert content_coverage("It is.", ["x"]) == 1.0
