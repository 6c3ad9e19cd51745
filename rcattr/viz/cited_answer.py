"""The answer with citation marks, as plain text, markdown or an HTML fragment an application can show."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rcattr.citations import Citation

if TYPE_CHECKING:
    from rcattr.result import RCAttributionResult

CITATION_STYLES = ("[n]", "markdown", "html")

_CLOSING = re.compile(r"[.!?;:]*[\"')\]»”’]*\s*$")  # a unit's closing punctuation, which its marks go before


def cited_answer(
    result: RCAttributionResult, citations: Sequence[Citation], style: str = "[n]", *, references: bool = True
) -> str:
    """``result.answer`` with the marks of ``citations`` (one per output unit) inserted before each unit's
    closing punctuation, and, with ``references``, the list of the cited documents after it."""
    if style not in CITATION_STYLES:
        raise ValueError(f"unknown citation style {style!r}; choose one of {list(CITATION_STYLES)}")
    answer, pieces, end = result.answer, [], 0
    for citation in citations:
        numbers = [cited.number for cited in citation.sources]
        cut = citation.start + _CLOSING.search(citation.text).start()  # type: ignore[union-attr]  # always matches
        pieces += [_text(answer[end:cut], style), _marks(numbers, style)]
        end = cut
    pieces.append(_text(answer[end:], style))
    text = "".join(pieces)
    cited = sorted({cited.number for citation in citations for cited in citation.sources})
    if style == "html":
        text = f'<p class="rc-answer">{text}</p>'
    if not references or not cited:
        return text
    return text + _references(result, cited, style)


def _text(text: str, style: str) -> str:
    return html.escape(text) if style == "html" else text


def _marks(numbers: Sequence[int], style: str) -> str:
    if not numbers:
        return ""
    if style == "[n]":
        return " " + "".join(f"[{n}]" for n in numbers)
    if style == "markdown":
        return "".join(f"[^{n}]" for n in numbers)
    links = ",".join(f'<a href="#rc-source-{n}">{n}</a>' for n in numbers)
    return f'<sup class="rc-cite">[{links}]</sup>'


def _link(result: RCAttributionResult, number: int) -> str | None:
    url = result.documents[number - 1].metadata.get("url")
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def _references(result: RCAttributionResult, numbers: Sequence[int], style: str) -> str:
    labels = {n: result.documents[n - 1].label() for n in numbers}
    if style == "[n]":
        return "\n\nSources:\n" + "\n".join(f"[{n}] {labels[n]}" for n in numbers)
    if style == "markdown":
        lines = []
        for n in numbers:
            url = _link(result, n)
            lines.append(f"[^{n}]: " + (f"[{labels[n]}]({url})" if url else labels[n]))
        return "\n\n" + "\n".join(lines)
    items = []
    for n in numbers:
        label, url = html.escape(labels[n]), _link(result, n)
        body = f'<a href="{html.escape(url)}">{label}</a>' if url else label
        items.append(f'<li id="rc-source-{n}" value="{n}">{body}</li>')
    return f'\n<ol class="rc-sources">{"".join(items)}</ol>'
