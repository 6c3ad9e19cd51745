"""The answer with citation marks, as plain text, markdown or an HTML fragment an application can show.

Markdown and HTML are escaped so that neither the answer nor a document's metadata can add markup: in
markdown, the characters that start inline markup (``\\ ` * _ [ ] ~ | ^`) are backslash-escaped, `<`,
`>`` and ``&`` become entities (every markdown flavour reads them, not only CommonMark's ``\\<`), a block
marker at the start of a line (`#`, `-`, `1.`...) is escaped, and so is a `(`` or ``:`` right after a
mark (``[^1](...)`` would be a link, ``[^1]:`` a footnote definition). Only ``http(s)`` urls become links,
with spaces, parentheses, quotes and control characters percent-encoded.

A sentence the documents vouch for weakly (``Citation.status == "weak"`) keeps its marks and is tagged
`[weak]`` (``[weak: Dorestad]`` with the names the documents do not hold); an unsupported one cites nothing
and is tagged ``[unsupported]`, with the claims the documents do not hold (`[unsupported: 2,781.25]`). A
sentence that mixes held and unheld claims (`Citation.partly_held`) keeps the marks of its held part, and
each unheld claim is tagged where it stands: `Mount Fuji is 2,781.25 [unsupported] meters tall [1].`
(`[weak]`` after a name: capitals also find titles). In HTML the unheld claims are also highlighted
(``<mark class="rc-unheld">``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Sequence

from rcattr.grounding.citation_rule import DEFAULT_RULE, CitationRule
from rcattr.grounding.citations import Citation
from rcattr.grounding.claims import Claim
from rcattr.record.record import AttributionRecord
from rcattr.text.documents import source_labels

_CLOSING = re.compile(r"[.!?;:]*[\"')\]»”’]*\s*$")  # a unit's closing punctuation, which its marks go before
_MARKDOWN = {char: "\\" + char for char in "\\`*_[]~|^"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_BLOCK_MARKER = re.compile(r"^[ \t]*\d*([#+\-=.)])", re.M)  # a heading, list item or rule at a line's start
# a footnote mark followed by "(" reads as a link, followed by ":" (at a line's start) as a definition
_AFTER_MARK = "(:"
_URL_UNSAFE = re.compile(r"[\s()<>\\`\"\x00-\x1f\x7f]")
_UNHELD_OPEN = '<mark class="rc-unheld" title="no sentence of the documents or the question holds this">'
_MARKED = ("partial", "weak", "unsupported")  # the statuses whose unheld claims are shown
_MEANING = {
    "weak": "the documents support this sentence weakly",
    "unsupported": "the documents do not support this sentence: nothing is cited",
}


def cited_answer(
    result: AttributionRecord, citations: Sequence[Citation], rule: CitationRule = DEFAULT_RULE
) -> str:
    """`result.answer` with the marks of `citations` inserted before each one's closing punctuation (the
    marks of a sentence at its end) in `rule.style`, and, with `rule.references`, the list of the cited
    documents after it."""
    style = rule.style
    marks: dict[int, str] = {}
    for citation in citations:
        cut = citation.start + _CLOSING.search(citation.text).start()  # type: ignore[union-attr]  # always matches
        if citation.status in _MARKED:
            for claim in citation.unheld_claims:
                if style == "html":
                    marks[claim.start] = marks.get(claim.start, "") + _UNHELD_OPEN
                    marks[claim.end] = marks.get(claim.end, "") + "</mark>"
                if citation.partly_held:
                    marks[claim.end] = marks.get(claim.end, "") + _claim_mark(claim, style)
        marks[cut] = (
            marks.get(cut, "")
            + _marks([cited.number for cited in citation.sources], style)
            + _status_mark(citation, style)
        )
    text = _marked_text(result.answer, marks, style)
    cited = sorted({cited.number for citation in citations for cited in citation.sources})
    if style == "html":
        text = f'<p class="rc-answer">{text}</p>'
    if not rule.references or not cited:
        return text
    return text + _references(result, cited, style)


def _marked_text(answer: str, marks: dict[int, str], style: str) -> str:
    """`answer` escaped for `style`, with `marks[i]` inserted before character `i`."""
    if style == "[n]":
        chars = list(answer)
    elif style == "html":
        chars = [html.escape(char) for char in answer]
    else:
        chars = _markdown_chars(answer, {cut for cut, mark in marks.items() if mark})
    pieces, end = [], 0
    for cut in sorted(marks):
        pieces += ["".join(chars[end:cut]), marks[cut]]
        end = cut
    pieces.append("".join(chars[end:]))
    return "".join(pieces)


def _markdown_chars(text: str, after_marks: Collection[int] = ()) -> list[str]:
    """Each character of `text` as markdown shows it literally (`after_marks`: where a mark ends)."""
    chars = [_MARKDOWN.get(char, char) for char in text]
    for match in _BLOCK_MARKER.finditer(text):
        chars[match.start(1)] = "\\" + match.group(1)
    for index in after_marks:
        if index < len(text) and text[index] in _AFTER_MARK:
            chars[index] = "\\" + text[index]
    return chars


def _status_mark(citation: Citation, style: str) -> str:
    """The tag of a weak or unsupported sentence (nothing for a supported or partial one, whose unheld claims
    are tagged where they stand, or a baseline's); a partly held one's names no claim: they are tagged."""
    if citation.status not in ("weak", "unsupported"):
        return ""
    unheld = "" if citation.partly_held else ", ".join(claim.text for claim in citation.unheld_claims)
    label = f"{citation.status}: {unheld}" if unheld else citation.status
    support = citation.held_support if citation.partly_held else citation.support
    why = citation.verdict.reason if citation.verdict is not None else f"support {support:.2f}"
    return _tag(label, citation.status, f"{why}: {_MEANING[citation.status]}", style, not citation.sources)


def _claim_mark(claim: Claim, style: str) -> str:
    """The tag of an unheld claim of a partly held sentence, after it: `[unsupported]` for a number or a
    date, `[weak]` for a name."""
    status = "weak" if claim.kind == "name" else "unsupported"
    return _tag(
        status, status, f"no sentence of the documents or the question holds {claim.text!r}", style, True
    )


def _tag(label: str, status: str, title: str, style: str, spaced: bool) -> str:
    """`label` as a tag in `style` (`spaced`: with a space before it in `[n]` style)."""
    if style == "[n]":
        return (" " if spaced else "") + f"[{label}]"
    if style == "markdown":
        return f" *({''.join(_markdown_chars(label))})*"
    return f'<sup class="rc-status rc-{status}" title="{html.escape(title)}">{html.escape(label)}</sup>'


def _marks(numbers: Sequence[int], style: str) -> str:
    if not numbers:
        return ""
    if style == "[n]":
        return " " + "".join(f"[{n}]" for n in numbers)
    if style == "markdown":
        return "".join(f"[^{n}]" for n in numbers)
    links = ",".join(f'<a href="#rc-source-{n}">{n}</a>' for n in numbers)
    return f'<sup class="rc-cite">[{links}]</sup>'


def _link(result: AttributionRecord, number: int) -> str | None:
    """Document `number`'s metadata url when it is an http(s) one."""
    url = result.documents[number - 1].metadata.get("url")
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def _markdown_url(url: str) -> str:
    """`url` as a markdown link destination: what would end or break it percent-encoded."""
    return _URL_UNSAFE.sub(lambda match: "".join(f"%{byte:02X}" for byte in match.group().encode()), url)


def _references(result: AttributionRecord, numbers: Sequence[int], style: str) -> str:
    every = source_labels(result.documents)
    labels = {n: every[n - 1] for n in numbers}
    if style == "[n]":
        return "\n\nSources:\n" + "\n".join(f"[{n}] {labels[n]}" for n in numbers)
    if style == "markdown":
        lines = []
        for n in numbers:
            label, url = "".join(_markdown_chars(labels[n])), _link(result, n)
            lines.append(f"[^{n}]: " + (f"[{label}]({_markdown_url(url)})" if url else label))
        return "\n\n" + "\n".join(lines)
    items = []
    for n in numbers:
        label, url = html.escape(labels[n]), _link(result, n)
        body = f'<a href="{html.escape(url)}">{label}</a>' if url else label
        items.append(f'<li id="rc-source-{n}" value="{n}">{body}</li>')
    return f'\n<ol class="rc-sources">{"".join(items)}</ol>'
