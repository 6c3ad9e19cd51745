"""The terminal view (rcattr.viz.terminal): top spans marked, wrapping, colour and absolute shading."""

from __future__ import annotations

import re

import pytest

from rcattr.attribution.result import RCAttributionResult
from rcattr.viz import (
    to_terminal,
)
from tests.helpers.cited import SENTENCE_ROWS, SENTENCES, made_result, steam_engine_chunks
from tests.helpers.results import documents_result, hand_made_result


def test_terminal_without_color_marks_the_top_spans() -> None:
    result = hand_made_result()
    text = to_terminal(result, color=False, width=200)
    (best, score), *_ = result.top(1)
    assert f"[1:{score:.2f}]{best.text}[/1]" in text
    assert "[4:" not in text
    assert "\x1b" not in text
    assert "Output 2: It opened in 1889." in text


def test_terminal_wraps_to_width() -> None:
    text = to_terminal(hand_made_result(), color=False, width=30)
    header, *context = text.split("\n\nOutput 1")[0].splitlines()
    assert header.startswith("Context")
    assert len(context) > 5
    assert max(len(line) for line in context) <= 30


def test_terminal_color_and_auto_color(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "\x1b[" in to_terminal(hand_made_result(), color=True, output=1, width=80)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b" not in to_terminal(hand_made_result())


def test_terminal_rejects_a_bad_output() -> None:
    with pytest.raises(IndexError, match="output=5"):
        to_terminal(hand_made_result(), output=5)


def _terminal_shades(result: RCAttributionResult) -> list[int]:
    """The 256-colour background of each shaded run in the coloured terminal view."""
    text = to_terminal(result, color=True, width=10_000)
    return [int(code) for code in re.findall(r"\x1b\[38;5;16;48;5;(\d+)m", text)]


def test_terminal_shading_is_absolute() -> None:
    assert _terminal_shades(documents_result([1 / 200] * 200)) == []  # shares below 1%: unshaded
    assert set(_terminal_shades(documents_result([0.012] * 80))) == {230}  # the palest shade
    assert _terminal_shades(documents_result([0.9, 0.1])) == [203, 228]  # sqrt: 0.95 -> red, 0.32 -> yellow


def test_terminal_headings_tell_apart_chunks_of_one_article() -> None:
    result = made_result(SENTENCES, SENTENCE_ROWS, documents=steam_engine_chunks())
    text = to_terminal(result, color=False, width=100)
    assert "Document [1]: Steam engine · Steam_engine-11\n" in text
    assert "Document [2]: Steam engine · Steam_engine-12\n" in text
