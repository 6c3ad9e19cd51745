"""The text the model reads: context chunks and a question placed in a chat template or plain prompt.

[`ContextInput`][rcattr.text.prompting.ContextInput] is what a RAG user has (retrieved documents or one context string, and a
question). [`render_prompt`][rcattr.text.prompting.render_prompt] turns it, or captum's `TextTemplateInput` / `TextTokenInput`,
into a [`Prompt`][rcattr.text.prompting.Prompt]: the exact string to tokenize plus where each context chunk sits in it, so
that spans of the chunks map to tokens of the prompt without searching for text.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from captum.attr import TextTemplateInput, TextTokenInput

from rcattr.protocols import TokenizerLike
from rcattr.text.documents import Document, as_document

_MARKER = "\x00{}\x00"
_UNUSABLE = re.compile("[\x00\ud800-\udfff]")  # NUL (the marker's) and lone surrogates (no UTF-8 for them)


def check_text(name: str, text: str, chunk: int | None = None) -> None:
    """Refuse a NUL character, which rcattr reserves to mark places in the prompt, or a lone surrogate,
    which is not text and which the tokenizer cannot encode, naming the input `name` (and its `chunk`)
    and the character's position."""
    found = _UNUSABLE.search(text)
    if found is None:
        return
    where = f"at character {found.start()}" + ("" if chunk is None else f" of chunk {chunk}")
    if found.group() == "\x00":
        raise ValueError(
            f"the {name} contains a NUL character (\\x00) {where}, which rcattr reserves to mark places in the prompt"
        )
    raise ValueError(
        f"the {name} contains a lone surrogate ({found.group()!r}) {where}, which is not valid Unicode text "
        "(was it decoded with errors='surrogateescape'?); fix or remove it"
    )


DEFAULT_INSTRUCTION = "Answer the question using the context."


@dataclass(frozen=True)
class ContextInput:
    """A context (one string, or chunks such as retrieved documents) and the question asked about it.

    Attributes
    ----------
    context : str or sequence of documents
        The text to attribute over. A sequence is a list of chunks; they are numbered
        `Document [i]:` in the prompt and `granularity="chunk"` scores each one. A chunk is a string,
        a [`Document`][rcattr.text.documents.Document], or what a RAG framework returns: a mapping or object with
        `page_content` (LangChain) or `text` (LlamaIndex) and optional `metadata` and `id`; the
        metadata comes back in the result's citations, `to_dict()` and HTML.
    question : str
        The question, placed after the context. May be empty.
    instruction : str
        The line before the context.
    chat_template : bool or None
        Use the tokenizer's chat template (True), plain text (False), or the template when the
        tokenizer has one (None).
    """

    context: str | Sequence[Any]
    question: str = ""
    instruction: str = DEFAULT_INSTRUCTION
    chat_template: bool | None = None
    _documents: tuple[Document, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.context, (str, Sequence)):
            raise TypeError(
                "context must be a string or a sequence of documents (strings, or objects with page_content "
                f"or text), got {type(self.context).__name__}; wrap a single document in a list"
            )
        documents = [Document(self.context)] if isinstance(self.context, str) else self.context
        object.__setattr__(self, "_documents", tuple(as_document(d, i) for i, d in enumerate(documents)))
        for name in ("question", "instruction"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a string, got {type(getattr(self, name)).__name__}")
        check_text("question", self.question)
        check_text("instruction", self.instruction)
        for index, chunk in enumerate(self.chunks):
            check_text("context", chunk, None if isinstance(self.context, str) else index)

    @property
    def documents(self) -> list[Document]:
        """The context's documents, with their metadata (one without metadata for a string context)."""
        return list(self._documents)

    @property
    def chunks(self) -> list[str]:
        """The documents' texts."""
        return [document.text for document in self.documents]


@dataclass(frozen=True)
class Prompt:
    """A prompt string and where its attributable chunks are.

    Attributes
    ----------
    text : str
        The full prompt, ending where the answer starts.
    chunks : list of str
        The attributable texts, in order.
    chunk_starts : list of int
        Character offset of each chunk in `text`.
    add_special_tokens : bool
        Whether the tokenizer should add its special tokens (False when a chat template wrote them).
    features : list of list of int, optional
        For captum inputs: the chunks forming each interpretable feature (a `TextTemplateInput`
        mask groups several values into one feature; a `TextTokenInput` feature is one token).
    token_ids, token_offsets : list, optional
        For a `TextTokenInput`: its token ids, and their character offsets in `text`.
    feature_tokens : list of int, optional
        For a `TextTokenInput`: the token index of each chunk (the tokens not skipped).
    documents : list of Document, optional
        For a [`ContextInput`][rcattr.text.prompting.ContextInput]: its documents, whose metadata results carry.
    evidence : list of str, optional
        For a [`ContextInput`][rcattr.text.prompting.ContextInput]: the documents' texts and the question, the user's own text, which an
        answer's numbers, dates and names are checked against ([`rcattr.grounding.claims`][rcattr.grounding.claims]). The template's words are
        left out: its `Document [n]:` labels would hold every number up to the number of documents, a chat
        template's dates any date. None: the whole `text` (a captum input's template is the user's own).
    """

    text: str
    chunks: list[str]
    chunk_starts: list[int]
    add_special_tokens: bool
    features: list[list[int]] | None = field(default=None)
    token_ids: list[int] | None = field(default=None)
    token_offsets: list[tuple[int, int]] | None = field(default=None)
    feature_tokens: list[int] | None = field(default=None)
    documents: list[Document] | None = field(default=None)
    evidence: list[str] | None = field(default=None)


def render_prompt(
    tokenizer: TokenizerLike, inp: ContextInput | TextTemplateInput | TextTokenInput | str
) -> Prompt:
    """The prompt for `inp`; a bare string is a context with no question."""
    if isinstance(inp, str):
        inp = ContextInput(inp)
    if isinstance(inp, ContextInput):
        return _render_context(tokenizer, inp)
    if isinstance(inp, TextTemplateInput):
        return _render_template(inp)
    if isinstance(inp, TextTokenInput):
        return _render_tokens(inp)
    raise TypeError(
        f"inp must be a str, a ContextInput, or captum's TextTemplateInput / TextTokenInput, got {type(inp).__name__}"
    )


def _render_context(tokenizer: TokenizerLike, inp: ContextInput) -> Prompt:
    chunks = inp.chunks
    if not chunks or not any(chunk.strip() for chunk in chunks):
        raise ValueError("the context is empty; give at least one chunk with some text")
    blank = [index for index, chunk in enumerate(chunks) if not chunk.strip()]
    if blank:  # retrievers return such chunks: the others are still worth explaining
        warnings.warn(
            f"context chunk{'s' if len(blank) > 1 else ''} {', '.join(map(str, blank))} "
            f"{'are' if len(blank) > 1 else 'is'} empty or only whitespace: kept as documents without text, "
            "which score 0",
            stacklevel=7,  # the caller of attribute() or attribute_many()
        )
    documents = [
        replace(document, text="") if index in blank else document
        for index, document in enumerate(inp.documents)
    ]
    chunks = [document.text for document in documents]
    marker = _MARKER.format("CONTEXT")
    question = f"\n\nQuestion: {inp.question}" if inp.question else ""
    message = f"{inp.instruction}\n\n{marker}{question}"
    use_template = bool(tokenizer.chat_template) if inp.chat_template is None else inp.chat_template
    if use_template:
        if not tokenizer.chat_template:
            raise ValueError("chat_template=True but the tokenizer has no chat template")
        template = str(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=False
            )
        )
    else:
        template = f"{message}\nAnswer:"
    head, tail = template.split(marker)
    body, starts = "", []
    for number, chunk in enumerate(chunks, start=1):
        prefix = f"Document [{number}]: " if len(chunks) > 1 or not isinstance(inp.context, str) else ""
        starts.append(len(head) + len(body) + len(prefix))
        body += f"{prefix}{chunk}\n" if number < len(chunks) else f"{prefix}{chunk}"
    return Prompt(
        head + body + tail,
        chunks,
        starts,
        add_special_tokens=not use_template,
        documents=documents,
        evidence=[*chunks, inp.question],
    )


def _render_template(inp: TextTemplateInput) -> Prompt:
    values = [str(value) for value in inp.values]
    for index, value in enumerate(values):
        check_text(f"template value {index}", value)
    markers = [_MARKER.format(index) for index in range(len(values))]
    fill = dict(zip(inp.dict_keys, markers, strict=True)) if inp.dict_keys else None
    template = inp.template if callable(inp.template) else inp.template.format
    marked = template(**fill) if fill is not None else template(*markers)
    text, starts, rest = "", [0] * len(values), marked
    while rest:
        cut = rest.find("\x00")
        if cut < 0:
            text, rest = text + rest, ""
            break
        close = rest.index("\x00", cut + 1)
        index = int(rest[cut + 1 : close])
        text += rest[:cut]
        starts[index] = len(text)
        text += values[index]
        rest = rest[close + 1 :]
    mask = getattr(inp, "formatted_mask", None) or list(range(len(values)))
    features = [
        [value for value, group in enumerate(mask) if group == feature] for feature in range(max(mask) + 1)
    ]
    return Prompt(text, values, starts, add_special_tokens=True, features=features)


def _render_tokens(inp: TextTokenInput) -> Prompt:
    ids = [int(i) for i in inp.inp_tensor[0].tolist()]
    ends = [len(str(inp.tokenizer.decode(ids[: i + 1]))) for i in range(len(ids))]
    text = str(inp.tokenizer.decode(ids))
    offsets = list(zip([0, *ends[:-1]], ends, strict=True))
    keep = [True] * len(ids) if inp.itp_mask is None else [bool(k) for k in inp.itp_mask[0].tolist()]
    kept = [index for index, flag in enumerate(keep) if flag]
    chunks = [text[offsets[index][0] : offsets[index][1]] for index in kept]
    starts = [offsets[index][0] for index in kept]
    return Prompt(
        text,
        chunks,
        starts,
        add_special_tokens=False,
        features=[[n] for n in range(len(kept))],
        token_ids=ids,
        token_offsets=offsets,
        feature_tokens=kept,
    )
