"""The README's first command: explain a small RAG answer with RC statistics on the default model.

Documents and a question go into the chat template, the model answers greedily, and one
teacher-forced forward with :class:`~rcattr.capture.LogitCapture` reduces each layer's answer-row
logits at once to, per head, E[Z] over the whole context (the head score, DESIGN §2 step 1) and
the mean of phi over each document's tokens (its span score). The top-k heads are kept and the
document scores normalised over documents (paper Eq. 7).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rcattr.capture import CaptureStep, LogitCapture
from rcattr.stats import phi

EXAMPLE_DOCUMENTS = (
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall.",
    "Mount Fuji is the highest mountain in Japan, rising 3,776 metres above sea level.",
    "The Great Wall of China stretches for more than 21,000 kilometres across northern China.",
)
EXAMPLE_QUESTION = "How tall is the Eiffel Tower, and when was it completed?"


@dataclass
class DemoResult:
    """What the demo found. ``head_scores`` is ``[layers, heads]``, ``document_scores`` ``[documents]``."""

    answer: str
    head_scores: torch.Tensor
    top_heads: list[tuple[int, int]]
    document_scores: torch.Tensor


class _DocumentRC:
    """Reducer: per head, E[Z] over all context tokens and mean phi per document, layer by layer."""

    def __init__(self, document_of_key: torch.Tensor, n_documents: int, answer_start: int) -> None:
        self.document_of_key = document_of_key  # [K] document index, -1 outside the documents
        self.n_documents = n_documents
        self.answer_start = answer_start
        self.head_scores: dict[int, torch.Tensor] = {}
        self.document_scores: dict[int, torch.Tensor] = {}

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        heads, rows = logits.shape[1], logits.shape[2]
        context = self.document_of_key >= 0
        answer_keys = step.key_positions >= self.answer_start
        self_logits = logits[0][:, :, answer_keys].flatten(1)  # Y(g, g): [heads, rows * answer]
        causal = step.visible[0][:, answer_keys].flatten()
        per_x = phi(
            logits[0][:, :, context].flatten(1), self_logits, y_mask=causal
        )  # [heads, rows * context]
        per_key = per_x.view(heads, rows, -1).mean(1)  # [heads, context keys]
        documents = self.document_of_key[context]
        sums = per_key.new_zeros(heads, self.n_documents).index_add_(1, documents, per_key)
        self.head_scores[step.layer_idx] = per_key.mean(1)
        self.document_scores[step.layer_idx] = sums / torch.bincount(documents, minlength=self.n_documents)


def build_prompt(
    tokenizer: PreTrainedTokenizerBase, documents: tuple[str, ...] | list[str], question: str
) -> tuple[str, list[tuple[int, int]]]:
    """The prompt (chat template, or plain text for a base model) and each document's character span in it."""
    marker = "\x00DOCUMENTS\x00"
    message = f"Answer the question using the documents.\n\n{marker}\nQuestion: {question}"
    if tokenizer.chat_template:
        template = str(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=False
            )
        )
    else:  # a base model: plain text, with the BOS token its tokenizer would add
        template = f"{tokenizer.bos_token or ''}{message}\nAnswer:"
    head, tail = template.split(marker)
    spans, body = [], ""
    for number, document in enumerate(documents, start=1):
        prefix = f"Document [{number}]: "
        start = len(head) + len(body) + len(prefix)
        spans.append((start, start + len(document)))
        body += f"{prefix}{document}\n"
    return head + body + tail, spans


@torch.no_grad()
def explain(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    documents: tuple[str, ...] | list[str] = EXAMPLE_DOCUMENTS,
    question: str = EXAMPLE_QUESTION,
    *,
    top_k: int = 20,
    max_new_tokens: int = 48,
) -> DemoResult:
    """Answer ``question`` from ``documents`` and score each document's contribution to the answer."""
    prompt, spans = build_prompt(tokenizer, documents, question)
    encoded = tokenizer(prompt, return_offsets_mapping=True, add_special_tokens=False, return_tensors="pt")
    prompt_ids = encoded.input_ids.to(model.device)
    generated = model.generate(  # type: ignore[operator]  # transformers types generate's decorator badly
        prompt_ids, attention_mask=torch.ones_like(prompt_ids), max_new_tokens=max_new_tokens, do_sample=False
    )
    answer_ids = generated[0, prompt_ids.shape[1] :]
    if answer_ids[-1].item() in _eos_ids(model):
        answer_ids = answer_ids[:-1]
    if answer_ids.numel() == 0:
        raise RuntimeError("the model produced an empty answer; nothing to explain")
    ids = torch.cat([prompt_ids[0], answer_ids])[None]

    document_of_key = torch.full((ids.shape[1],), -1, dtype=torch.long, device=model.device)
    starts, ends = encoded.offset_mapping[0].unbind(-1)
    for index, (first, last) in enumerate(spans):
        document_of_key[: len(starts)][(starts < last) & (ends > first)] = index
    reducer = _DocumentRC(document_of_key, len(documents), prompt_ids.shape[1])
    with LogitCapture(model, reducer, query_positions=slice(prompt_ids.shape[1], None)):
        model(ids, logits_to_keep=1)  # only the captured logits are needed, not the vocabulary

    layers = sorted(reducer.head_scores)
    head_scores = torch.stack([reducer.head_scores[i] for i in layers])  # [layers, heads]
    per_head_documents = torch.stack([reducer.document_scores[i] for i in layers])  # [layers, heads, docs]
    n_heads = head_scores.shape[1]
    top = head_scores.flatten().topk(min(top_k, head_scores.numel())).indices
    totals = per_head_documents.flatten(0, 1)[top].sum(0)
    return DemoResult(
        answer=str(tokenizer.decode(answer_ids, skip_special_tokens=True)),
        head_scores=head_scores,
        top_heads=[(int(i) // n_heads, int(i) % n_heads) for i in top],
        document_scores=totals / totals.sum(),
    )


def _eos_ids(model: PreTrainedModel) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set(eos) if isinstance(eos, list) else {eos} if eos is not None else set()


def render(result: DemoResult, documents: tuple[str, ...] | list[str], question: str, width: int = 30) -> str:
    """A plain-text report: the answer, the best heads and a bar per document."""
    lines = [f"Question: {question}", f"Answer:   {result.answer}", ""]
    best = ", ".join(f"L{layer}.H{head}" for layer, head in result.top_heads[:8])
    lines += [f"Top RC heads (of {len(result.top_heads)} used): {best}", "", "Where the answer comes from:"]
    for number, (document, score) in enumerate(
        zip(documents, result.document_scores.tolist(), strict=True), start=1
    ):
        bar = "#" * round(score * width)
        text = document if len(document) <= 60 else document[:57] + "..."
        lines.append(f"  [{number}] {score:6.1%} {bar:<{width}} {text}")
    return "\n".join(lines)
