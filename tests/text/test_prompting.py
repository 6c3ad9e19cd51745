"""Prompts: chunks sit at their recorded offsets, in chat templates, plain prompts and captum inputs."""

from __future__ import annotations

import pytest
from captum.attr import TextTemplateInput, TextTokenInput

from rcattr.text.prompting import ContextInput, render_prompt
from tests.helpers import char_tokenizer

DOCUMENTS = ["First <doc> & more.", "Second doc.\nWith two lines.", "Third {braces} doc."]


@pytest.mark.parametrize("chat", [True, False])
def test_chunks_sit_at_their_offsets(chat: bool) -> None:
    prompt = render_prompt(char_tokenizer(chat=chat), ContextInput(DOCUMENTS, "Which doc?"))
    assert prompt.chunks == DOCUMENTS
    for chunk, start in zip(prompt.chunks, prompt.chunk_starts, strict=True):
        assert prompt.text[start : start + len(chunk)] == chunk
    assert "Document [3]: " in prompt.text and "Question: Which doc?" in prompt.text
    assert prompt.text.startswith("<bos>user: ") == chat
    assert prompt.add_special_tokens is not chat


@pytest.mark.parametrize("chat", [False, True])
def test_claims_are_checked_against_the_documents_and_the_question_never_the_labels(chat: bool) -> None:
    """The evidence an answer's claims need is the user's text: ``Document [2]:`` would hold a claimed 2."""
    prompt = render_prompt(
        char_tokenizer(), ContextInput(["Alpha 1973.", "Beta."], "When?", chat_template=chat)
    )
    assert prompt.evidence == ["Alpha 1973.", "Beta.", "When?"] and "Document [2]:" in prompt.text
    assert render_prompt(char_tokenizer(), TextTemplateInput("{} is {}", values=["a", "b"])).evidence is None


def test_single_context_string_has_no_document_label() -> None:
    prompt = render_prompt(char_tokenizer(), "Just one context.")
    assert "Document [" not in prompt.text and "Question" not in prompt.text
    assert prompt.text[prompt.chunk_starts[0] :].startswith("Just one context.")


def test_forcing_a_missing_chat_template_fails() -> None:
    with pytest.raises(ValueError, match="no chat template"):
        render_prompt(char_tokenizer(chat=False), ContextInput("x", chat_template=True))


@pytest.mark.parametrize("context", ["", "   ", [], [" \n", ""]])
def test_empty_context_is_rejected(context: str | list[str]) -> None:
    with pytest.raises(ValueError, match="empty"):
        render_prompt(char_tokenizer(), ContextInput(context, "q"))


def test_an_empty_chunk_among_others_is_kept_without_text_and_named() -> None:
    documents = ["ok", {"page_content": " \n", "metadata": {"title": "blank"}}, "fine"]
    with pytest.warns(UserWarning, match="context chunk 1 is empty or only whitespace"):
        prompt = render_prompt(char_tokenizer(), ContextInput(documents, "q"))
    assert prompt.chunks == ["ok", "", "fine"] and "Document [2]: \nDocument [3]: fine" in prompt.text
    assert prompt.documents is not None and prompt.documents[1].metadata == {"title": "blank"}


def test_template_input_values_and_mask_groups() -> None:
    inp = TextTemplateInput("{} lives in {}, {}.", values=["Dave", "Palm Coast", "FL"], mask=[0, 1, 1])
    prompt = render_prompt(char_tokenizer(), inp)
    assert prompt.text == "Dave lives in Palm Coast, FL."
    for chunk, start in zip(prompt.chunks, prompt.chunk_starts, strict=True):
        assert prompt.text[start : start + len(chunk)] == chunk
    assert prompt.features == [[0], [1, 2]]


def test_template_input_with_named_values() -> None:
    inp = TextTemplateInput("{name} lives in {city}.", values={"name": "Dave", "city": "Paris"})
    prompt = render_prompt(char_tokenizer(), inp)
    assert prompt.text == "Dave lives in Paris."
    assert prompt.chunk_starts == [0, 14]


def test_token_input_features_are_the_kept_tokens() -> None:
    tokenizer = char_tokenizer()
    inp = TextTokenInput("a b", tokenizer, skip_tokens=[" "])
    prompt = render_prompt(tokenizer, inp)
    assert prompt.token_ids == [97, 32, 98]
    assert prompt.feature_tokens == [0, 2] and prompt.chunks == ["a", "b"]


def test_unknown_input_type() -> None:
    with pytest.raises(TypeError, match="ContextInput"):
        render_prompt(char_tokenizer(), 42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: ContextInput(["ok", "Paris\ud800 is"]),
            r"context contains a lone surrogate \('\\ud800'\) at character 5 of chunk 1",
        ),
        (
            lambda: ContextInput("Paris\x00", "Where?"),
            r"context contains a NUL character \(\\x00\) at character 5,",
        ),
        (
            lambda: ContextInput("Paris", "Where\udcff?"),
            r"question contains a lone surrogate \('\\udcff'\) at character 5,",
        ),
        (
            lambda: render_prompt(char_tokenizer(), TextTemplateInput("{} {}", ["a", "b\ud800"])),
            "template value 1 contains a lone surrogate",
        ),
    ],
)
def test_unusable_characters_are_named_with_their_input_and_position(make, message) -> None:
    """Before the tokenizer sees them: a lone surrogate made it raise its own TypeError."""
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda: ContextInput(["a document", 3]),
            TypeError,
            r"context document 1 \(int\) has no page_content, text or content",
        ),
        (lambda: ContextInput(42), TypeError, "context must be a string or a sequence"),
        (lambda: ContextInput("text", question=None), TypeError, "question must be a string"),
        (lambda: ContextInput("text", "why \x00 now"), ValueError, "question contains a NUL character"),
        (lambda: ContextInput(["ok", "a\x00b"]), ValueError, "context contains a NUL character"),
    ],
)
def test_bad_context_input_is_named_when_built(make, error, message) -> None:
    with pytest.raises(error, match=message):
        make()
