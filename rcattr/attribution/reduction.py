"""The streaming reduction behind [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] (docs/design.md §2).

One teacher-forced forward over prompt ⊕ answer runs with [`LogitCapture`][rcattr.runtime.capture.LogitCapture] on the
answer rows ([`forward`][rcattr.attribution.reduction.forward]). [`Reducer`][rcattr.attribution.reduction.Reducer] reduces each layer's raw logits as soon as they are
computed to a score per head; nothing of size `|s| x |s|` is kept. The span scores and per-row
statistics, which cost the most, are computed either in the forward for every head or, after the pass,
only for the heads a selection uses ([`Reducer.score_heads`][rcattr.attribution.reduction.Reducer.score_heads]), from the queries and keys the pass
kept. [`Reduction`][rcattr.attribution.reduction.Reduction] holds what the pass gave, per layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel

from rcattr.attribution.base import Example
from rcattr.attribution.scorers import SpanScorer
from rcattr.attribution.spans import SpanBlock, SpanIndex, attention_probabilities, lookback_ratio
from rcattr.heads.scores import HeadScore, LayerRC, LayerSuperiority, layer_rc, layer_superiority
from rcattr.runtime.capture import CaptureStep, LogitCapture, raw_logits
from rcattr.runtime.compat import cache_argument


@dataclass
class Layout:
    """Token positions of one example in the form the per-layer reduction indexes with."""

    answer_start: int
    context_keys: torch.Tensor  # [C] positions of the attributed context tokens
    spans: SpanIndex  # context spans over those C tokens
    unit_rows: torch.Tensor  # [U, R] answer-row index of each output unit, padded with 0
    unit_mask: torch.Tensor  # [U, R] bool, False on padding
    n_answer: int
    membership: torch.Tensor  # [U, A] bool: the answer rows of each unit
    row_sentence: torch.Tensor  # [A] long: the answer sentence of each row, -1 for none

    @classmethod
    def of(cls, example: Example) -> Layout:
        device = example.ids.device
        context_keys = sorted({token for token_range in example.context_ranges for token in token_range})
        where = {token: index for index, token in enumerate(context_keys)}
        spans = SpanIndex.from_ranges([[where[t] for t in r] for r in example.context_ranges], device=device)
        width = max(len(r) for r in example.unit_ranges)
        unit_rows = torch.zeros(len(example.unit_ranges), width, dtype=torch.long)
        unit_mask = torch.zeros(len(example.unit_ranges), width, dtype=torch.bool)
        membership = torch.zeros(len(example.unit_ranges), example.n_answer, dtype=torch.bool)
        for unit, rows in enumerate(example.unit_ranges):
            unit_rows[unit, : len(rows)] = torch.as_tensor(list(rows))
            unit_mask[unit, : len(rows)] = True
            membership[unit, list(rows)] = True
        row_sentence = torch.full((example.n_answer,), -1, dtype=torch.long)
        for sentence, rows in enumerate(example.answer_sentences):
            row_sentence[list(rows)] = sentence
        return cls(
            answer_start=example.answer_start,
            context_keys=torch.tensor(context_keys, dtype=torch.long, device=device),
            spans=spans,
            unit_rows=unit_rows.to(device),
            unit_mask=unit_mask.to(device),
            n_answer=example.n_answer,
            membership=membership.to(device),
            row_sentence=row_sentence.to(device),
        )


@dataclass
class Reduction:
    """Per-layer reductions, filled by [`Reducer`][rcattr.attribution.reduction.Reducer]: head scores of every head, and span scores
    and row statistics of the heads scored (`scored`: layer -> the `[h]` head indices, in the order
    of the first dim of that layer's span and row tables)."""

    head_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # kind -> layer -> [H]
    answer_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # [h, n_spans]
    unit_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # [h, U, n_spans]
    context_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [h, A]: E[Z] per answer row
    self_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [h, A]: E[Z'] per answer row, same Y
    context_peak: dict[int, torch.Tensor] = field(default_factory=dict)  # [h, A]: P(max X > Y) per answer row
    lookback: dict[int, torch.Tensor] = field(default_factory=dict)  # [h, A]: lookback ratio per answer row
    self_size: dict[int, int] = field(default_factory=dict)  # |Y(g, g)| of the layer
    context_reach: dict[int, torch.Tensor] = field(default_factory=dict)  # []: share of context pairs seen
    token_logprob: torch.Tensor | None = None  # [A]: each answer token's log-probability, from the pass
    scored: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> [h] head indices

    @staticmethod
    def stack(table: Mapping[int, torch.Tensor]) -> torch.Tensor:
        """`[L, ...]` from per-layer tables."""
        return torch.stack([table[layer] for layer in sorted(table)])

    def reach(self) -> torch.Tensor:
        """`[L]` each layer's view of the context from the answer: the share of the (answer token, context
        token) pairs its attention mask lets it see (sliding windows and attention chunks as the model
        built them for this pass; [`rcattr.heads.scores.seeing_heads`][rcattr.heads.scores.seeing_heads])."""
        return torch.stack([self.context_reach[layer] for layer in sorted(self.context_reach)]).cpu()

    def gather(self, table: Mapping[int, torch.Tensor], heads: torch.Tensor) -> torch.Tensor:
        """`[k, ...]`: the rows of the `[k, 2]` (layer, head) pairs, in their order, from per-layer
        `[h, ...]` tables of the scored heads."""
        row_of = self._rows_of_scored_heads()
        rows = []
        for layer, head in heads.tolist():
            row = row_of.get((layer, head))
            if row is None:
                raise ValueError(f"head ({layer}, {head}) was not scored in this pass")
            rows.append(table[layer][row])
        return torch.stack(rows)

    def _rows_of_scored_heads(self) -> dict[tuple[int, int], int]:
        """(layer, head) -> its row in that layer's tables. The head indices are read from the model's device at
        once (one synchronisation on a GPU, where a lookup per head costs two)."""
        if not self.scored:
            return {}
        first = next(iter(self.scored.values()))
        heads = iter(torch.cat([scored.to(first.device) for scored in self.scored.values()]).tolist())
        return {
            (layer, next(heads)): row for layer, scored in self.scored.items() for row in range(len(scored))
        }

    def spread(self, table: Mapping[int, torch.Tensor], n_heads: int) -> torch.Tensor:
        """`[L, H, ...]` from per-layer `[h, ...]` tables of the scored heads; 0 for the others."""
        layers = sorted(self.head_scores[next(iter(self.head_scores))])
        first = next(iter(table.values()))
        out = first.new_zeros((len(layers), n_heads, *first.shape[1:]))
        for row, layer in enumerate(layers):
            if layer in table:
                out[row, self.scored[layer]] = table[layer]
        return out

    def scored_mask(self, n_heads: int) -> torch.Tensor:
        """`[L, H]` bool: the heads whose span scores and row statistics were computed."""
        layers = sorted(self.head_scores[next(iter(self.head_scores))])
        mask = torch.zeros(len(layers), n_heads, dtype=torch.bool)
        for row, layer in enumerate(layers):
            if layer in self.scored:
                mask[row, self.scored[layer].cpu()] = True
        return mask


class Reducer:
    """Reduces one layer's answer-row logits `[1, H, A, S]` as soon as the layer has run.

    Every head's head scores are computed in the forward. The span scores and the per-row statistics,
    which cost the most, are computed then for every head (`defer=False`), or only after the pass
    for the heads a selection uses (`defer=True`, [`score_heads`][rcattr.attribution.reduction.Reducer.score_heads]), from the layer's queries and
    keys, kept meanwhile: nothing of size `[H, A, S]` outlives its layer either way.
    """

    def __init__(
        self,
        layout: Layout,
        scorers: Mapping[str, SpanScorer],
        head_score: HeadScore,
        *,
        defer: bool = False,
    ) -> None:
        self.layout = layout
        self.scorers = scorers
        self.head_score = head_score
        self.defer = defer
        self.steps: dict[int, CaptureStep] = {}
        self.out = Reduction(
            answer_scores={name: {} for name in scorers}, unit_scores={name: {} for name in scorers}
        )
        start = layout.answer_start
        # the run of columns from the first context key to the last, and which of them are context keys
        keys = layout.context_keys
        first, end = (int(keys[0]), int(keys[-1]) + 1) if keys.numel() else (0, 0)
        self.context_cover = slice(first, end)
        self.in_context = torch.zeros(end - first, dtype=torch.bool, device=keys.device)
        self.in_context[keys - first] = True
        self.answer_columns = slice(start, start + layout.n_answer)
        self.answer_keys = torch.arange(start, start + layout.n_answer, device=layout.context_keys.device)
        whole = torch.ones(1, layout.n_answer, dtype=torch.bool, device=layout.membership.device)
        self.answer_and_units = torch.cat([whole, layout.membership])  # [1 + U, A]

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        logits, visible = logits[0], step.visible[0]  # [H, A, S], [A, S]
        # the context's covering columns, the keys between its documents (e.g. newlines) masked
        cover, answer = self.context_cover, self.answer_columns
        cross_visible = visible[:, cover] & self.in_context
        pairs = cross_visible.shape[0] * len(self.layout.context_keys)
        self.out.context_reach[step.layer_idx] = cross_visible.sum(dtype=torch.float64) / max(pairs, 1)
        statistics: LayerRC | LayerSuperiority
        if self.defer and self.head_score == "superiority":
            # per-row counts only: the covering columns as a view, instead of a copy of the context's columns
            statistics = layer_superiority(
                logits[..., cover], cross_visible, logits[..., answer], visible[:, answer]
            )
        else:
            statistics = layer_rc(*self._samples(logits, visible), self.head_score)
        self.record_layer(step.layer_idx, statistics)
        if self.defer:
            self.steps[step.layer_idx] = step
            return
        assert isinstance(statistics, LayerRC)
        heads = torch.arange(logits.shape[0], device=logits.device)
        self._score(step, heads, logits, visible, statistics)

    def record_layer(self, layer: int, statistics: LayerRC | LayerSuperiority) -> None:
        """Keep the head scores of one layer's statistics (a subclass keeps more of them here)."""
        for kind, score in statistics.every_score.items():
            self.out.head_scores.setdefault(kind, {})[layer] = score

    def score_heads(self, heads: torch.Tensor) -> None:
        """Span scores and row statistics of the `[k, 2]` (layer, head) pairs, after a deferred pass; heads
        scored already are skipped, so a second call adds the new heads to the tables."""
        for layer in sorted(set(heads[:, 0].tolist())):
            index = heads[heads[:, 0] == layer, 1].unique()
            done = self.out.scored.get(layer)
            if done is not None:
                index = index[~torch.isin(index, done.to(index.device))]
            if not len(index):
                continue
            step = self.steps[layer]
            assert step.query is not None and step.key is not None
            index = index.to(step.query.device)
            group = step.query.shape[1] // step.key.shape[1]
            dtype = torch.promote_types(step.query.dtype, torch.float32)
            logits = raw_logits(step.query[:, index], step.key[:, index // group], dtype=dtype)[0]
            visible = step.visible[0]
            statistics = layer_rc(*self._samples(logits, visible), self.head_score)
            self._score(step, index, logits, visible, statistics)

    def _samples(
        self, logits: torch.Tensor, visible: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """X(p_ctx, g) `[H, A, C]`, its `[A, C]` visibility, Y(g, g) `[H, A, A]` and its visibility."""
        keys, answer = self.layout.context_keys, self.answer_columns
        return (
            logits.index_select(-1, keys),
            visible.index_select(-1, keys),
            logits[..., answer],
            visible[:, answer],
        )

    def _score(
        self,
        step: CaptureStep,
        heads: torch.Tensor,
        logits: torch.Tensor,
        visible: torch.Tensor,
        statistics: LayerRC,
    ) -> None:
        """Span scores and row statistics of `heads` `[h]`, from their logits `[h, A, S]`, appended to
        the layer's tables when some of its heads were scored before."""
        layout, layer = self.layout, step.layer_idx
        earlier = self.out.scored.get(layer)

        def put(table: dict[int, torch.Tensor], rows: torch.Tensor) -> None:
            table[layer] = rows if earlier is None else torch.cat([table[layer], rows])

        put(self.out.scored, heads)
        put(self.out.context_rc, statistics.context_rc)
        put(self.out.self_rc, statistics.self_rc)
        put(self.out.context_peak, statistics.context_peak)
        self.out.self_size[layer] = statistics.n_self
        attention = attention_probabilities(logits[None], visible[None], step.scaling, step.softcap)[0]
        put(self.out.lookback, lookback_ratio(attention, visible, layout.context_keys, self.answer_keys))
        per_unit = layout.unit_rows.shape[0] > 1 or layout.unit_rows.shape[1] != layout.n_answer
        if per_unit:
            rows = layout.unit_rows
            unit_logits = logits[:, rows].transpose(0, 1)  # [U, h, R, S]
            unit_visible = visible[rows] & layout.unit_mask[..., None]
        for name, scorer in self.scorers.items():
            if not scorer.pools_rows:  # every answer row once, weighted per unit
                block = self.span_block(logits[None], visible[None], step, heads, self.answer_and_units)
                scores = scorer.score(block)  # [1 + U, h, n_spans]
                put(self.out.answer_scores[name], scores[0])
                put(self.out.unit_scores[name], scores[1:].transpose(0, 1))
                continue
            answer = scorer.score(self.span_block(logits[None], visible[None], step, heads))[0]
            put(self.out.answer_scores[name], answer)
            units = (
                scorer.score(self.span_block(unit_logits, unit_visible, step, heads))
                if per_unit
                else answer[None]
            )
            put(self.out.unit_scores[name], units.transpose(0, 1))

    def span_block(
        self,
        logits: torch.Tensor,
        visible: torch.Tensor,
        step: CaptureStep,
        heads: torch.Tensor,
        unit_rows: torch.Tensor | None = None,
    ) -> SpanBlock:
        """The scorer's view of `[U, h, R, S]` unit logits of `heads [h]` and their `[U, R, S]`
        visibility; a subclass overrides it to give every scorer more (e.g. a calibration's priors)."""
        return SpanBlock(
            logits=logits,
            visible=visible,
            context_keys=self.layout.context_keys,
            answer_keys=self.answer_keys,
            spans=self.layout.spans,
            scaling=step.scaling,
            softcap=step.softcap,
            unit_rows=unit_rows,
            row_sentence=None if unit_rows is None else self.layout.row_sentence,
        )


def forward(
    model: PreTrainedModel, example: Example, reducer: Reducer, cache: DynamicCache | None = None
) -> None:
    """Capture the answer's rows of a pass over prompt ⊕ answer into `reducer`, and the `[A]`
    log-probability of each answer token under the model (float64) into `reducer.out.token_logprob`.

    One forward when no prompt cache is given and the example has none (a generated answer's cache
    already holds the prompt); otherwise the answer continues from that cache, cut back by one more
    token so that the prompt's last row, which predicts the first answer token, runs again.
    """
    start, n_answer = _answer_rows(example)
    cache = example.prompt_cache_for() if cache is None else cache
    with LogitCapture(model, reducer, query_positions=slice(start, None)):
        if cache is None:
            logits = model(example.ids, use_cache=False, logits_to_keep=n_answer + 1).logits
        else:
            cache.crop(start - 1 - cache.get_seq_length())  # negative: removes tokens in every release
            logits = model(
                example.ids[:, start - 1 :],
                **cache_argument(model, cache),
                use_cache=True,
                logits_to_keep=n_answer + 1,
            ).logits
    reducer.out.token_logprob = _token_logprob(logits[0], example)


def forward_batch(model: PreTrainedModel, examples: Sequence[Example], reducers: Sequence[Reducer]) -> None:
    """[`forward`][rcattr.attribution.reduction.forward] of each example into its reducer, from one forward over them all, left-padded.

    Each row holds an example's prompt ⊕ answer right-aligned, with an attention mask and the positions of
    its own pass (`cumsum(mask) - 1`), so every sequence ends at the last column: the rows captured start
    at the earliest answer, and each reducer gets its own rows and its own keys, without the padding
    ([`_Unbatch`][rcattr.attribution.reduction._Unbatch]). No example's prompt cache is used.
    """
    for example in examples:
        _answer_rows(example)
    lengths = [example.ids.shape[1] for example in examples]
    width = max(lengths)
    pads = [width - length for length in lengths]
    device = examples[0].ids.device
    ids = torch.zeros(len(examples), width, dtype=torch.long, device=device)  # id 0 on padding: masked
    mask = torch.zeros_like(ids)
    for row, (example, pad) in enumerate(zip(examples, pads, strict=True)):
        ids[row, pad:] = example.ids[0]
        mask[row, pad:] = 1
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    starts = [pad + example.answer_start for example, pad in zip(examples, pads, strict=True)]
    first = min(starts)
    keep = max(example.n_answer for example in examples) + 1
    split = _Unbatch(reducers, [start - first for start in starts], pads)
    with LogitCapture(model, split, query_positions=slice(first, None)):
        logits = model(
            ids, attention_mask=mask, position_ids=positions, use_cache=False, logits_to_keep=keep
        ).logits
    for row, (example, reducer) in enumerate(zip(examples, reducers, strict=True)):
        reducer.out.token_logprob = _token_logprob(logits[row, keep - example.n_answer - 1 :], example)


class _Unbatch:
    """Hands each reducer its own example's logits `[1, H, A_b, S_b]` and step, from a left-padded batch's
    `[B, H, R, W]`: the rows from its answer's first (`rows[b]`, an index into the `R` captured) and the
    keys from its first real token (`pads[b]`), as its own pass would give them."""

    def __init__(self, reducers: Sequence[Reducer], rows: Sequence[int], pads: Sequence[int]) -> None:
        self.parts = list(zip(reducers, rows, pads, strict=True))

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        for index, (reducer, row, pad) in enumerate(self.parts):
            rows, keys = slice(row, None), slice(pad, None)
            reducer(logits[index : index + 1, :, rows, keys], step.row(index, rows, keys))


def _answer_rows(example: Example) -> tuple[int, int]:
    """The answer's first position and length; refused when no prompt token predicts its first token."""
    if example.answer_start < 1:
        raise ValueError("the prompt is empty: nothing predicts the answer's first token")
    return example.answer_start, example.n_answer


def _token_logprob(logits: torch.Tensor, example: Example) -> torch.Tensor:
    """`[A]` float64 log-probability of each answer token, from the `[A + 1, V]` logits of the positions
    from the prompt's last to the answer's last (row t predicts answer token t)."""
    rows = logits[:-1].float()
    chosen = rows.gather(-1, example.ids[0, example.answer_start :, None])[:, 0]
    return (chosen - torch.logsumexp(rows, -1)).double()
