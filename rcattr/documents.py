"""Context documents as RAG applications hold them: a text, an id and metadata.

:class:`Document` is rcattr's own; :func:`as_document` reads the shapes retrieval frameworks give, without
importing them: a plain string, a mapping or an object with ``page_content`` (LangChain), ``text``
(LlamaIndex nodes) or ``content`` (Haystack) and ``metadata`` (``meta`` in Haystack), and an ``id`` /
``id_`` / ``doc_id``. The metadata travels unchanged into a result's citations and HTML, and into
``to_dict()`` as plain JSON (:func:`plain_json`).
"""

from __future__ import annotations

import datetime
import math
import numbers
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rcattr.segmentation import one_line

_TEXT_FIELDS = ("page_content", "text", "content")
_METADATA_FIELDS = ("metadata", "meta")
_ID_FIELDS = ("id", "id_", "doc_id")
_LABEL_KEYS = ("title", "source", "file_name")
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
        """A short name for a source list, at most ``width`` characters.

        The first of the metadata's ``title``, ``source`` and ``file_name`` that is text (bytes decoded as
        UTF-8), a path or a number (0 included) and not blank; else its ``url`` when that is a string; else
        the id, unless it is a UUID or a hex digest (as frameworks generate, whoever set it: the text says
        more to a reader, and the id stays in :attr:`id`); else the text's first words.
        """
        for key in _LABEL_KEYS:
            name = _name(self.metadata.get(key))
            if name:
                return one_line(name, width)
        url = self.metadata.get("url")
        if isinstance(url, str) and url.strip():
            return one_line(url, width)
        if self.id and self.id.strip() and not _MACHINE_ID.fullmatch(self.id.strip()):
            return one_line(self.id, width)
        return one_line(self.text, width)


def _name(value: Any) -> str | None:
    """``value`` as a label's text when it is text, bytes, a path or a number (not a bool); else None."""
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike) or (isinstance(value, numbers.Number) and not isinstance(value, bool)):
        return str(value)
    return None


def as_document(item: Any, index: int) -> Document:
    """``item`` (context document number ``index``, 0-based) as a :class:`Document`: a string, a Document, or
    a mapping / object with ``page_content``, ``text`` or ``content`` and optional ``metadata`` (or
    ``meta``) and id."""
    if isinstance(item, Document):
        return item
    if isinstance(item, str):
        return Document(item)
    read = item.get if isinstance(item, Mapping) else lambda name: getattr(item, name, None)
    text = _first(read, _TEXT_FIELDS)
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
    """The first of the fields ``names`` that ``read`` finds set (not None); None if none is."""
    return next((value for value in map(read, names) if value is not None), None)


def plain_json(value: Any) -> Any:
    """``value`` (metadata, as an application gives it) as plain JSON values, for ``json.dumps``.

    Mappings become dicts with string keys, other collections lists (tuples, sets, arrays and tensors
    through ``tolist()``); dates and times ISO strings; bytes their UTF-8 text (undecodable bytes as U+FFFD);
    non-finite floats None (as JavaScript's ``JSON.stringify`` writes them); NumPy scalars Python numbers;
    anything else its ``str()``.
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
