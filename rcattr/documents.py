"""Context documents as RAG applications hold them: a text, an id and metadata.

:class:`Document` is rcattr's own; :func:`as_document` reads the shapes retrieval frameworks give, without
importing them: a plain string, a mapping or an object with ``page_content`` (LangChain) or ``text``
(LlamaIndex nodes) and ``metadata``, and an ``id`` / ``id_`` / ``doc_id``. The metadata travels unchanged
into a result's citations, ``to_dict()`` and HTML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rcattr.segmentation import one_line

_TEXT_FIELDS = ("page_content", "text")
_ID_FIELDS = ("id", "id_", "doc_id")
_LABEL_KEYS = ("title", "source", "file_name", "url")


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
        """A short name for a source list: the metadata's ``title``, ``source``, ``file_name`` or ``url``,
        else the id, else the text's first words (at most ``width`` characters)."""
        for key in _LABEL_KEYS:
            value = self.metadata.get(key)
            if value:
                return one_line(str(value), width)
        return self.id if self.id else one_line(self.text, width)


def as_document(item: Any, index: int) -> Document:
    """``item`` (context document number ``index``, 0-based) as a :class:`Document`: a string, a Document, or
    a mapping / object with ``page_content`` or ``text`` and optional ``metadata`` and id."""
    if isinstance(item, Document):
        return item
    if isinstance(item, str):
        return Document(item)
    read = item.get if isinstance(item, Mapping) else lambda name: getattr(item, name, None)
    text = next((read(name) for name in _TEXT_FIELDS if read(name) is not None), None)
    if not isinstance(text, str):
        found = "no page_content or text" if text is None else f"a {type(text).__name__} as its text"
        raise TypeError(
            f"context document {index} ({type(item).__name__}) has {found}; give a string, a mapping or an "
            "object with a page_content or text string (and optional metadata)"
        )
    metadata = read("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"context document {index}: metadata must be a mapping, got {type(metadata).__name__}"
        )
    identifier = next((read(name) for name in _ID_FIELDS if read(name) is not None), None)
    return Document(text, dict(metadata), None if identifier is None else str(identifier))
