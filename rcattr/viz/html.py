"""A standalone HTML page of a result: the answer, each context span shaded by how far it stands out for the
whole answer or for the unit under the pointer, the documents the answer cites open and marked, answer
tokens underlined by how little they draw on the context."""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rcattr.grounding.citation_rule import CitationRule
from rcattr.grounding.citations import Citation, cited_sources, document_scores, sentence_citations
from rcattr.grounding.support import SUPPORT_MEANING, SUPPORT_THRESHOLD, support_text
from rcattr.grounding.vouching import UNHELD_NAME, UNSUPPORTED_BELOW, WEAK_BELOW, unsupported_tokens
from rcattr.options import HTML_SUFFIXES
from rcattr.record.record import AttributionRecord
from rcattr.text.documents import plain_json
from rcattr.text.segmentation import one_line
from rcattr.viz._pieces import chunk_pieces, contrast_intensity, document_names, text_pieces
from rcattr.viz.cited_answer import cited_answer

_FOLD_ABOVE = 10  # with more documents than this, the page opens only the ones cited for what it shows
_ALPHA = 0.85  # opacity of the darkest shade (the view's best span)

_CSS = """
body{font:15px/1.6 system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
.text{white-space:pre-wrap;border:1px solid #ddd;border-radius:4px;padding:.5em .8em}
.u{cursor:pointer;border-radius:3px}.u:hover,.u.active{outline:2px solid #f59e0b}
.g{text-decoration:underline dotted rgba(220,38,38,var(--u));text-decoration-thickness:2px}
.g.low{background:rgba(220,38,38,.12)}.s{border-radius:2px}
.legend,#showing,.share,.meta{color:#666;font-size:.85em}.meta{margin:.2em 0}table{border-collapse:collapse}
summary{cursor:pointer}summary h3{display:inline;margin:0}details.chunk{margin:.6em 0}
details.uncited>summary,details.uncited .text{color:#999}
.cite{color:#9a3412;background:#ffedd5;border-radius:3px;padding:0 .35em;font-size:.85em}.cite:empty{display:none}
td,th{border-bottom:1px solid #eee;padding:.2em .6em;text-align:left;vertical-align:top}
.rc-status{border-radius:3px;padding:0 .3em;margin-left:.2em;font-size:.8em}
.rc-weak{background:#fef3c7;color:#92400e}.rc-unsupported{background:#fee2e2;color:#991b1b}
mark.rc-unheld{background:#fecaca;color:inherit}
"""

_JS = """
const data = JSON.parse(document.getElementById("rc-data").textContent);
const spans = [...document.querySelectorAll(".s")], units = [...document.querySelectorAll(".u")];
const docs = [...document.querySelectorAll("details.chunk")];
const list = document.getElementById("unit-sources"), folding = document.getElementById("folding");
const pick = (views, u) => (u === null ? views.seq : views.units[u]);
const viewName = (u) => (u === null ? "the answer" : `output ${u + 1}`);
let pinned = null;
function show(u) {
  const scores = pick(data, u), alpha = pick(data.alpha, u), shares = pick(data.documents, u);
  const cited = pick(data.cited, u);
  for (const el of spans) {
    const i = +el.dataset.i;
    el.style.background = `rgba(255,140,0,${alpha[i].toFixed(3)})`;
    el.title = `score ${scores[i].toFixed(3)}`;
  }
  for (const el of docs) {
    const d = +el.dataset.d, isCited = cited.includes(d);
    el.classList.toggle("uncited", !isCited);
    el.querySelector(".share").textContent = `${(100 * shares[d]).toFixed(1)}% of ${viewName(u)}`;
    el.querySelector(".cite").textContent = isCited ? `cited [${d + 1}]` : "";
  }
  document.getElementById("showing").textContent = u === null ? "whole answer" : `output ${u + 1}`;
  for (const el of units) el.classList.toggle("active", +el.dataset.u === u);
  list.replaceChildren();
  if (u === null) return;
  const order = scores.map((s, i) => [s, i]).sort((a, b) => b[0] - a[0]).slice(0, 3);
  for (const [s, i] of order) {
    const el = spans.find((span) => +span.dataset.i === i), item = document.createElement("li");
    item.dir = "auto";
    item.textContent = `${s.toFixed(3)}  ${el ? el.dataset.doc + " " + el.textContent : "span " + i}`;
    list.append(item);
  }
}
function fold(u) {
  if (!data.fold) return;
  const cited = pick(data.cited, u);
  for (const el of docs) el.open = cited.includes(+el.dataset.d);
  folding.textContent = foldingText(docs.length, cited.length, viewName(u));
}
function foldingText(n, k, name) {
  return `${n} documents: the ${k} cited for ${name} open, the other ${n - k} folded (click a title to open it).`;
}
for (const el of units) {
  el.addEventListener("mouseenter", () => show(+el.dataset.u));
  el.addEventListener("mouseleave", () => show(pinned));
  el.addEventListener("click", () => {
    pinned = pinned === +el.dataset.u ? null : +el.dataset.u;
    show(pinned);
    fold(pinned);
  });
}
"""


def _answer_html(result: AttributionRecord) -> str:
    answer = result.answer
    g = None if result.groundedness is None else result.groundedness.detach().float().cpu().tolist()
    if g is not None and len(g) != len(result.answer_tokens):
        raise ValueError(
            f"groundedness has {len(g)} values but the result has {len(result.answer_tokens)} answer tokens"
        )
    support = None if result.token_support is None else result.token_support.tolist()
    unsupported = set(unsupported_tokens(result))
    tokens = list(enumerate(result.answer_tokens))
    parts = []
    for start, end, unit in text_pieces(list(enumerate(result.output_spans)), 0, len(answer)):
        inner = []
        for low, high, token in text_pieces(tokens, start, end):
            text = html.escape(answer[low:high])
            if token is None or g is None:
                inner.append(text)
                continue
            low_class = " low" if token in unsupported else ""
            title = f"groundedness {g[token]:.3f}"
            if support is not None:
                title += f", support {support_text(support[token], 3)}"
            weakness = 1 - (g[token] if support is None else support[token])
            inner.append(
                f'<span class="g{low_class}" style="--u:{weakness:.3f}" title="{title}">{text}</span>'
            )
        body = "".join(inner)
        parts.append(body if unit is None else f'<span class="u" data-u="{unit}">{body}</span>')
    return "".join(parts)


def _views(result: AttributionRecord, citations: Sequence[Citation]) -> dict[str, Any]:
    """What the page shows for the whole answer (`"seq"`) and for each output unit (`"units"`).

    `alpha`: each span's shade, `[n_spans]` and `[n_outputs, n_spans]` (how far the span stands above an even spread
    against the best span, times the darkest opacity); `documents`: each document's share (`[n_documents]` and `[n_outputs,
    n_documents]`); `cited`: the 0-based documents cited, for the whole answer those of `citations` (the
    cited answer's), for a unit those the same rule ([`cited_sources`][rcattr.grounding.citations.cited_sources]) gives its own
    shares and context reliance (a sentence unit's are its sentence's citation), none for a unit inside an
    unsupported sentence.
    """
    assert result.token_attr is not None  # always set by AttributionRecord.__init__
    reliance = result.unit_context_reliance
    shares = [document_scores(result, unit) for unit in range(len(result.output_spans))]
    unsupported = [(c.start, c.end) for c in citations if c.uncited == "unsupported"]
    cited = [
        []
        if any(start <= span.start and span.end <= end for start, end in unsupported)
        else cited_sources(row.tolist(), None if reliance is None else float(reliance[unit]))[0]
        for (unit, row), span in zip(enumerate(shares), result.output_spans, strict=True)
    ]

    def rounded(values: torch.Tensor, decimals: int = 6) -> Any:
        return values.double().round(decimals=decimals).tolist()

    return {
        "alpha": {
            "seq": rounded(_ALPHA * contrast_intensity(result.seq_attr), 3),
            "units": rounded(_ALPHA * contrast_intensity(result.token_attr), 3),
        },
        "documents": {"seq": rounded(document_scores(result)), "units": [rounded(row) for row in shares]},
        "cited": {
            "seq": sorted({source.number - 1 for citation in citations for source in citation.sources}),
            "units": cited,
        },
        "fold": len(result.chunks) > _FOLD_ABOVE,
    }


def _folding_text(n: int, k: int, name: str) -> str:
    return (
        f"{n} documents: the {k} cited for {name} open, the other {n - k} folded (click a title to open it)."
    )


def _chunk_html(result: AttributionRecord, source: int, name: str, views: dict[str, Any]) -> str:
    chunk, doc = result.chunks[source], html.escape(name)
    alpha = views["alpha"]["seq"]
    parts = []
    for start, end, index in chunk_pieces(result, source):
        text = html.escape(chunk[start:end])
        if index is None:
            parts.append(text)
            continue
        score = float(result.seq_attr[index])
        parts.append(
            f'<span class="s" data-i="{index}" data-doc="{doc}" title="score {score:.3f}" '
            f'style="background:rgba(255,140,0,{alpha[index]:.3f})">{text}</span>'
        )
    body = (
        _metadata_html(result, source)
        + f'<div class="text" dir="auto" data-chunk="{source}">{"".join(parts)}</div>'
    )
    if len(result.chunks) == 1:
        return f'<div class="chunk">{body}</div>'
    cited = source in views["cited"]["seq"]
    share = views["documents"]["seq"][source]
    summary = (
        f'<summary><h3>{doc}</h3> <span class="cite">{f"cited [{source + 1}]" if cited else ""}</span> '
        f'<span class="share">{share:.1%} of the answer</span></summary>'
    )
    opened = " open" if cited or not views["fold"] else ""
    kind = "" if cited else " uncited"
    return f'<details class="chunk{kind}" data-d="{source}"{opened}>{summary}{body}</details>'


def _metadata_html(result: AttributionRecord, source: int) -> str:
    """The document's id and metadata, as the input gave them, in one line (nothing when it has none)."""
    document = result.documents[source]
    items = ([("id", document.id)] if document.id else []) + list(document.metadata.items())
    if not items:
        return ""
    fields = " · ".join(
        f"<b>{html.escape(str(key))}</b>: {html.escape(one_line(_shown(value), 200))}" for key, value in items
    )
    return f'<p class="meta" dir="auto">{fields}</p>'


def _shown(value: object) -> str:
    """A metadata value as a reader sees it: strings as they are, bytes decoded, dates in ISO form, the rest
    as JSON ([`plain_json`][rcattr.text.documents.plain_json])."""
    plain = plain_json(value)
    return plain if isinstance(plain, str) else json.dumps(plain, ensure_ascii=False)


def _summary_html(result: AttributionRecord, names: list[str]) -> str:
    rows = "".join(
        f"<tr><td>{rank}</td><td>{score:.3f}</td><td>{html.escape(names[span.source])}</td>"
        f'<td dir="auto">{html.escape(one_line(span.text, 200))}</td></tr>'
        for rank, (span, score) in enumerate(result.top(5), start=1)
    )
    table = f"<h2>Top sources</h2><table><tr><th>#</th><th>score</th><th>source</th><th>text</th></tr>{rows}</table>"
    selection = result.head_selection
    if selection is None:
        return f"{table}<p>Method: <code>{html.escape(result.span_scorer)}</code></p>"
    heads = ", ".join(f"L{layer}H{head}" for layer, head in selection.as_pairs())
    return f"{table}<h2>Heads</h2><p>{html.escape(selection.describe(result.lexical_share))}: <code>{heads}</code></p>"


def to_html(result: AttributionRecord, *, title: str | None = None) -> str:
    """A standalone HTML page (no external resources) showing `result`.

    Each context span is shaded by how far its score stands above an even spread (the mean over the spans), as a
    fraction of how far the best span's does: the best span is darkest and a span at or below an even share is not
    shaded, so the few spans an answer draws on stand out from many near-even ones. Each document is labelled with its share of the answer and, when the answer cites it
    ([`citations`][rcattr.attribution.result.RCAttributionResult.citations], the rule of the cited answer), marked `cited
    [n]`; with more than 10 documents only the cited ones are open. Hovering an answer unit shows its
    shading, shares and citations and lists its top 3 sources; clicking pins it, opening the documents it
    cites (clicking again goes back to the whole answer). Answer tokens are underlined in red the less the
    context supports them.

    Parameters
    ----------
    result : AttributionRecord
    title : str, optional
        Page title. Default: `"Context attribution (<span scorer>)"`.

    Returns
    -------
    str
        The page; all text is HTML-escaped and the data the script needs is embedded as JSON: the scores
        (`"seq"`: [n_spans], `"units"`: [n_outputs, n_spans]) and, each as `{"seq": ..., "units":
        ...}` for the whole answer and per unit, the spans' shades (`"alpha"`), the documents' shares
        (`"documents"`) and the cited documents (`"cited"`, 0-based), with `"fold"`.
    """
    title = html.escape(title or f"Context attribution ({result.span_scorer})")
    assert result.token_attr is not None  # always set by AttributionRecord.__init__
    citations = sentence_citations(result)
    views = _views(result, citations)
    payload = {
        "seq": result.seq_attr.double().round(decimals=6).tolist(),
        "units": result.token_attr.double().round(decimals=6).tolist(),
        **views,
    }
    blob = json.dumps(payload).replace("</", "<\\/")
    names = document_names(result)
    chunks = "".join(_chunk_html(result, source, name, views) for source, name in enumerate(names))
    if views["fold"]:
        folding = _folding_text(len(result.chunks), len(views["cited"]["seq"]), "the answer")
        chunks = f'<p class="legend" id="folding">{folding}</p>{chunks}'
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body><h1>{title}</h1>"
        f'<h2>Answer</h2><div class="text" dir="auto" id="answer">{_answer_html(result)}</div>'
        f'<h2>Cited answer</h2><div dir="auto" id="cited">{cited_answer(result, citations, CitationRule(style="html"))}</div>'
        '<p class="legend">Hover an answer part to see its sources (click to pin, again to unpin). '
        '<span style="background:#ff9d26">Orange</span>: how far a context span stands '
        "above an even spread of the scores, against the best span (darkest); spans at or below an even share "
        'are not shaded. <span class="cite">cited [n]</span>: a document the cited answer cites; the others '
        'are grey. <sup class="rc-status rc-weak">weak</sup> / <sup class="rc-status rc-unsupported">'
        "unsupported</sup>: a sentence whose support (its mean token support; 0 when a number or date of it is "
        f"in no sentence of the documents or the question, at most {UNHELD_NAME:g} when a name is) is below "
        f"{WEAK_BELOW:g} / {UNSUPPORTED_BELOW:g}; an unsupported one cites nothing, and "
        '<mark class="rc-unheld">its claims the documents do not hold</mark> are highlighted. A sentence that '
        "mixes held and unheld claims keeps its held part's citation, and each unheld claim is tagged where it "
        "stands. "
        '<span class="g" style="--u:1">Dotted red underline</span>: 1 - token support, '
        f"{SUPPORT_MEANING} (fainter = better supported). "
        '<span class="g low" style="--u:0">Red background</span>: unsupported, token support below '
        f"{support_text(SUPPORT_THRESHOLD)} (hover a token for its values; read a run of flags rather than a "
        "single one).</p>"
        '<ol id="unit-sources"></ol>'
        f'<h2>Context <span id="showing">whole answer</span></h2>{chunks}{_summary_html(result, names)}'
        f'<script type="application/json" id="rc-data">{blob}</script><script>{_JS}</script>'
        "</body></html>\n"
    )


def save_html(result: AttributionRecord, path: str | os.PathLike[str], **kw: Any) -> Path:
    """Write [`to_html`][rcattr.viz.html.to_html] of `result` (keyword arguments passed on) to `path`, whose name ends with
    `.html` or `.htm` (anything else raises ValueError); returns the path."""
    path = Path(path)
    if path.suffix.lower() not in HTML_SUFFIXES:
        raise ValueError(
            f"save_html writes an HTML page; end the name with {' or '.join(HTML_SUFFIXES)}, got {path.name!r}"
        )
    path.write_text(to_html(result, **kw), encoding="utf-8")
    return path
