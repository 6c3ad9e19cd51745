"""Griffe extensions for the API reference (mkdocs.yml: mkdocstrings' python handler, `extensions`).

`VerbatimDocstringTypes`: griffe reads a numpydoc type that happens to be a Python expression as one, so
`Tensor, shape [n_spans]` (a tuple) is shown as `(Tensor, shape[n_spans])` and `SupportProbe, "shipped" or None`
as `(SupportProbe, 'shipped' or None)`. This keeps such a type as the docstring writes it; a type that reads
the same as its expression (`int or None`, `torch.Tensor`) stays an expression, whose names link to their pages.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

import griffe

_SECTION_TITLES = {
    "parameters": "parameters",
    "other parameters": "other_parameters",
    "attributes": "attributes",
    "returns": "returns",
    "yields": "yields",
    "receives": "receives",
}
_NAMED = ("parameters", "other_parameters", "attributes")
_ITEM = re.compile(r"^(?P<names>\*{0,2}\w+(?:, \*{0,2}\w+)*) : (?P<type>.+)$")


def _written_types(lines: list[str]) -> dict[str, list[tuple[str | None, str]]]:
    """Each section's items as written, `(name or None, type)`, from a numpydoc docstring's lines."""
    written: dict[str, list[tuple[str | None, str]]] = {}
    section: str | None = None
    for index, line in enumerate(lines):
        below = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if below and set(below) == {"-"} and len(below) >= 3:
            section = _SECTION_TITLES.get(line.strip().lower())
            continue
        if section is None or not line.strip() or line[0].isspace() or set(line.strip()) == {"-"}:
            continue
        match = _ITEM.match(line.rstrip())
        items = written.setdefault(section, [])
        if section not in _NAMED:  # Returns, Yields, Receives: in order, `name : type` or `type`
            items.append((None, match.group("type") if match else line.rstrip()))
        elif match:
            # griffe splits the names of a Parameters item, not those of an Attributes item: both are kept
            names = match.group("names")
            items.extend((name.lstrip("*"), match.group("type")) for name in (names, *names.split(", ")))
    return written


def _bare(kind: str) -> str:
    """A written type without the `, default ...` and `, optional` griffe takes off."""
    match = re.match(r"^(?P<annotation>.+),\s+default(?: |: |=)(?P<default>.+)$", kind)
    if match:
        kind = match.group("annotation")
    return kind[: -len(", optional")] if kind.endswith(", optional") else kind


def _same(expression: griffe.Expr, written: str) -> bool:
    def squeeze(text: str) -> str:
        return re.sub(r"\s+", "", text).replace("'", '"')

    return not isinstance(expression, griffe.ExprTuple) and squeeze(str(expression)) == squeeze(written)


def _keep_written_types(docstring: griffe.Docstring, sections: list[griffe.DocstringSection]) -> None:
    """Put back the written type of each item of `sections` whose expression reads differently."""
    written = _written_types(docstring.lines)
    for section in sections:
        items = written.get(section.kind.value)
        if not items or not isinstance(section.value, list):
            continue
        by_name = dict(items) if section.kind.value in _NAMED else {}
        for position, item in enumerate(section.value):
            annotation = getattr(item, "annotation", None)
            if not isinstance(annotation, griffe.Expr):
                continue
            if section.kind.value in _NAMED:
                kind = by_name.get(getattr(item, "name", "").lstrip("*"))
            else:
                kind = items[position][1] if position < len(items) else None
            if kind is not None and not _same(annotation, _bare(kind)):
                item.annotation = _bare(kind)


class _WrittenTypesDocstring(griffe.Docstring):
    """A numpydoc docstring whose parsed types are the written ones where they differ."""

    @cached_property
    def parsed(self) -> list[griffe.DocstringSection]:
        sections = self.parse()
        _keep_written_types(self, sections)
        return sections


class VerbatimDocstringTypes(griffe.Extension):
    """Show a docstring's types as written where griffe's reading of them as Python would change them.

    The docstrings are parsed when the reference renders them, as without the extension (after the
    dataclasses' signatures and the aliases are resolved); only their parsed types change.
    """

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        docstring = obj.docstring
        if docstring is not None and type(docstring) is griffe.Docstring:
            if getattr(docstring.parser, "value", docstring.parser) == "numpy":
                docstring.__class__ = _WrittenTypesDocstring
