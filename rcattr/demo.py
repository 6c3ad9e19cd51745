"""The small RAG example shipped with rcattr: three documents, a question, and an answer drawing on two.

`rcattr demo` explains the model's own answer to [`QUESTION`][rcattr.demo.QUESTION]; the README explains the given
two-sentence [`ANSWER`][rcattr.demo.ANSWER], whose first sentence comes from document 1 and second from document 2.
"""

from __future__ import annotations

from rcattr.text.prompting import ContextInput

DOCUMENTS = (
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall.",
    "Mount Fuji is the highest mountain in Japan, rising 3,776 metres above sea level.",
    "The Great Wall of China stretches for more than 21,000 kilometres across northern China.",
)
QUESTION = "How tall are the Eiffel Tower and Mount Fuji?"
ANSWER = "The Eiffel Tower is 330 metres tall. Mount Fuji rises 3,776 metres above sea level."


def example_input() -> ContextInput:
    """The example's documents and question."""
    return ContextInput(list(DOCUMENTS), QUESTION)
