"""Context documents as RAG applications hold them: a text, an id and metadata.

[`Document`][rcattr.text.documents.Document] is rcattr's own; [`as_document`][rcattr.text.documents.as_document] reads the shapes retrieval frameworks give, without
importing them: a plain string, a mapping or an object with `page_content` (LangChain), `text`
(LlamaIndex nodes) or `content` (Haystack) and `metadata` (`meta` in Haystack), and an `id` /
`id_` / `doc_id`. The metadata travels unchanged into a result's citations and HTML, and into
`to_dict()` as plain JSON ([`plain_json`][rcattr.text.documents.plain_json]).
"""

from __future__ import annotations

import datetime
import math
import numbers
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rcattr.text.segmentation import one_line

TEXT_FIELDS = ("page_content", "text", "content")  # where a mapping or object holds its text, in order
_METADATA_FIELDS = ("metadata", "meta")
_ID_FIELDS = ("id", "id_", "doc_id")
_LABEL_KEYS = ("title", "source", "file_name")
_APART = " · "  # between a shared label and what tells its document apart
# ids that frameworks generate: a UUID (LlamaIndex nodes, vector stores) or a hex digest (Haystack's sha256)
_MACHINE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32,}", re.I)


@dataclass(frozen=True)
class Document:
    """One context document.

    Attributes
    ----------
    text : str
        What the model reads.
    metadata : mapping
        Whatever the application keeps with the document (title, url, page...); rcattr only carries it.
    id : str or None
        The application's identifier of the document.
    """

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None

    def label(self, width: int = 60) -> str:
        """A short name for a source list, at most `width` characters.

        The first of the metadata's `title`, `source` and `file_name` that is text (bytes decoded as
        UTF-8), a path or a number (0 included) and not blank; else its `url` when that is a string; else
        the id, unless it is a UUID or a hex digest (as frameworks generate, whoever set it: the text says
        more to a reader, and the id stays in `id`); else the text's first words.
        """
        return one_line(self._naming()[0], width)

    def _naming(self) -> tuple[str, str]:
        """The label's whole text and where it comes from: `"metadata"`, `"id"` or `"text"`."""
        for key in _LABEL_KEYS:
            name = _name(self.metadata.get(key))
            if name:
                return name, "metadata"
        url = self.metadata.get("url")
        if isinstance(url, str) and url.strip():
            return url, "metadata"
        readable = self._readable_id()
        return (readable, "id") if readable else (self.text, "text")

    def _readable_id(self) -> str | None:
        """The id when a person chose it: not blank, not a UUID or a hex digest; else None."""
        if self.id and self.id.strip() and not _MACHINE_ID.fullmatch(self.id.strip()):
            return self.id
        return None


def source_labels(documents: Sequence[Document], width: int = 60) -> list[str]:
    """Each document's [`Document.label`][rcattr.text.documents.Document.label], with what tells apart the documents that would share one.

    Where two or more documents get the same label (chunks of one article under its title), each one's label
    is followed by its id (`Steam engine · Steam_engine-11`) when the label does not come from the id and
    the id is readable (not a UUID or a hex digest); else by its text's first words, when the label does not
    come from them. The id (its end, when cut) or the words keep up to half of `width`.

    Parameters
    ----------
    documents : sequence of Document
        The context's documents, in order.
    width : int, default 60
        Each label's length at most, in characters.

    Returns
    -------
    list of str
        `[n_documents]` labels, in the documents' order.
    """
    labels = [document.label(width) for document in documents]
    counts = Counter(labels)
    return [
        label if counts[label] == 1 else _told_apart(document, label, width)
        for document, label in zip(documents, labels, strict=True)
    ]


def _told_apart(document: Document, label: str, width: int) -> str:
    """`label` (`document`'s, shared with another document) followed by its readable id or first words."""
    name, origin = document._naming()
    readable = document._readable_id()
    room = max(width // 2, 1)
    if origin == "metadata" and readable:
        tail = _line_end(readable, room)
    elif origin != "text" and document.text.strip():
        tail = one_line(document.text, room)
    else:  # the same words, or no words: nothing but the number tells them apart
        return label
    head = one_line(name, max(width - len(tail) - len(_APART), 1))
    return one_line(f"{head}{_APART}{tail}", width)


def _line_end(text: str, width: int) -> str:
    """`text` on one line, cut at its start to `width` characters with an ellipsis: ids that share a
    start (`Steam_engine-11`, `Steam_engine-12`) differ at their end."""
    line = " ".join(text.split())
    return line if len(line) <= width else "…" + line[len(line) - max(width - 1, 0) :]


def _name(value: Any) -> str | None:
    """`value` as a label's text when it is text, bytes, a path or a number (not a bool); else None."""
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike) or (isinstance(value, numbers.Number) and not isinstance(value, bool)):
        return str(value)
    return None


def as_document(item: Any, index: int) -> Document:
    """`item` (context document number `index`, 0-based) as a [`Document`][rcattr.text.documents.Document]: a string, a Document, or
    a mapping / object with `page_content`, `text` or `content` and optional `metadata` (or
    `meta`) and id."""
    if isinstance(item, Document):
        return item
    if isinstance(item, str):
        return Document(item)
    read = item.get if isinstance(item, Mapping) else lambda name: getattr(item, name, None)
    text = _first(read, TEXT_FIELDS)
    if not isinstance(text, str):
        found = "no page_content, text or content" if text is None else f"a {type(text).__name__} as its text"
        raise TypeError(
            f"context document {index} ({type(item).__name__}) has {found}; give a string, a mapping or an "
            "object with a page_content, text or content string (and optional metadata)"
        )
    metadata = _first(read, _METADATA_FIELDS)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"context document {index}: metadata must be a mapping, got {type(metadata).__name__}"
        )
    identifier = _first(read, _ID_FIELDS)
    return Document(text, dict(metadata), None if identifier is None else str(identifier))


def _first(read: Callable[[str], Any], names: Sequence[str]) -> Any:
    """The first of the fields `names` that `read` finds set (not None); None if none is."""
    return next((value for value in map(read, names) if value is not None), None)


def plain_json(value: Any) -> Any:
    """`value` (metadata, as an application gives it) as plain JSON values, for `json.dumps`.

    Mappings become dicts with string keys, other collections lists (tuples, sets, arrays and tensors
    through `tolist()`); dates and times ISO strings; bytes their UTF-8 text (undecodable bytes as U+FFFD);
    non-finite floats None (as JavaScript's `JSON.stringify` writes them); NumPy scalars Python numbers;
    anything else its `str()`.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Mapping):
        return {
            key if isinstance(key, str) else str(plain_json(key)): plain_json(item)
            for key, item in value.items()
        }
    if isinstance(value, (Sequence, set, frozenset)):
        return [plain_json(item) for item in value]
    if callable(getattr(value, "tolist", None)):
        return plain_json(value.tolist())
    return str(value)


def documents_json(documents: Sequence[Document]) -> list[dict[str, Any]]:
    """Each document's `{"document", "id", "metadata"}` (numbered from 1, the metadata [`plain_json`][rcattr.text.documents.plain_json]), as
    [`to_dict`][rcattr.attribution.result.RCAttributionResult.to_dict] and the citation service list them."""
    return [
        {"document": index + 1, "id": document.id, "metadata": plain_json(document.metadata)}
        for index, document in enumerate(documents)
    ]
