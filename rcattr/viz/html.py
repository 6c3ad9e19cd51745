"""A standalone HTML page of a result: the answer, each context span shaded by its score for the whole answer
or for the unit under the pointer, answer tokens underlined by how little they draw on the context."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import torch

from rcattr.options import HTML_SUFFIXES
from rcattr.result import RCAttributionResult
from rcattr.segmentation import one_line
from rcattr.support import SUPPORT_MEANING, SUPPORT_THRESHOLD, support_text
from rcattr.viz._pieces import chunk_pieces, document_name, shade_intensity, text_pieces

_OPEN_DOCUMENTS = 10  # with more than this many documents, the HTML page opens only the highest-scoring ones

_CSS = """
body{font:15px/1.6 system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
.text{white-space:pre-wrap;border:1px solid #ddd;border-radius:4px;padding:.5em .8em}
.u{cursor:pointer;border-radius:3px}.u:hover,.u.active{outline:2px solid #f59e0b}
.g{text-decoration:underline dotted rgba(220,38,38,var(--u));text-decoration-thickness:2px}
.g.low{background:rgba(220,38,38,.12)}.s{border-radius:2px}
.legend,#showing,.share,.meta{color:#666;font-size:.85em}.meta{margin:.2em 0}table{border-collapse:collapse}
summary{cursor:pointer}summary h3{display:inline;margin:0}details.chunk{margin:.6em 0}
td,th{border-bottom:1px solid #eee;padding:.2em .6em;text-align:left;vertical-align:top}
"""

_JS = """
const data = JSON.parse(document.getElementById("rc-data").textContent);
const spans = [...document.querySelectorAll(".s")], units = [...document.querySelectorAll(".u")];
const list = document.getElementById("unit-sources");
let pinned = null;
function show(u) {
  const scores = u === null ? data.seq : data.units[u];
  for (const el of spans) {
    const s = scores[+el.dataset.i];
    el.style.background = `rgba(255,140,0,${(0.85 * Math.sqrt(Math.min(Math.max(s, 0), 1))).toFixed(3)})`;
    el.title = `score ${s.toFixed(3)}`;
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
for (const el of units) {
  el.addEventListener("mouseenter", () => show(+el.dataset.u));
  el.addEventListener("mouseleave", () => show(pinned));
  el.addEventListener("click", () => { pinned = pinned === +el.dataset.u ? null : +el.dataset.u; show(pinned); });
}
"""


def _answer_html(result: RCAttributionResult) -> str:
    answer = result.answer
    g = None if result.groundedness is None else result.groundedness.detach().float().cpu().tolist()
    if g is not None and len(g) != len(result.answer_tokens):
        raise ValueError(
            f"groundedness has {len(g)} values but the result has {len(result.answer_tokens)} answer tokens"
        )
    support = None if result.token_support is None else result.token_support.tolist()
    unsupported = set(result.unsupported_tokens())
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


def _chunk_html(result: RCAttributionResult, source: int, intensity: list[float], open_: bool) -> str:
    chunk, doc = result.chunks[source], html.escape(document_name(result, source))
    parts = []
    for start, end, index in chunk_pieces(result, source):
        text = html.escape(chunk[start:end])
        if index is None:
            parts.append(text)
            continue
        score = float(result.seq_attr[index])
        parts.append(
            f'<span class="s" data-i="{index}" data-doc="{doc}" title="score {score:.3f}" '
            f'style="background:rgba(255,140,0,{0.85 * intensity[index]:.3f})">{text}</span>'
        )
    body = (
        _metadata_html(result, source)
        + f'<div class="text" dir="auto" data-chunk="{source}">{"".join(parts)}</div>'
    )
    if len(result.chunks) == 1:
        return f'<div class="chunk">{body}</div>'
    share = sum(
        float(result.seq_attr[i]) for i, span in enumerate(result.context_spans) if span.source == source
    )
    summary = f'<summary><h3>{doc}</h3> <span class="share">{share:.1%} of the answer</span></summary>'
    return f'<details class="chunk"{" open" if open_ else ""}>{summary}{body}</details>'


def _metadata_html(result: RCAttributionResult, source: int) -> str:
    """The document's id and metadata, as the input gave them, in one line (nothing when it has none)."""
    document = result.documents[source]
    items = ([("id", document.id)] if document.id else []) + list(document.metadata.items())
    if not items:
        return ""
    fields = " · ".join(
        f"<b>{html.escape(str(key))}</b>: {html.escape(one_line(str(value), 200))}" for key, value in items
    )
    return f'<p class="meta" dir="auto">{fields}</p>'


def _open_documents(result: RCAttributionResult) -> set[int]:
    """The documents the page shows open: all of them, or the :data:`_OPEN_DOCUMENTS` highest-scoring."""
    if len(result.chunks) <= _OPEN_DOCUMENTS:
        return set(range(len(result.chunks)))
    shares = torch.zeros(len(result.chunks))
    for index, span in enumerate(result.context_spans):
        shares[span.source] += float(result.seq_attr[index])
    return set(torch.argsort(shares, descending=True, stable=True)[:_OPEN_DOCUMENTS].tolist())


def _summary_html(result: RCAttributionResult) -> str:
    rows = "".join(
        f"<tr><td>{rank}</td><td>{score:.3f}</td><td>{html.escape(document_name(result, span.source))}</td>"
        f'<td dir="auto">{html.escape(one_line(span.text, 200))}</td></tr>'
        for rank, (span, score) in enumerate(result.top(5), start=1)
    )
    table = f"<h2>Top sources</h2><table><tr><th>#</th><th>score</th><th>source</th><th>text</th></tr>{rows}</table>"
    selection = result.head_selection
    if selection is None:
        return f"{table}<p>Method: <code>{html.escape(result.span_scorer)}</code></p>"
    heads = ", ".join(f"L{layer}H{head}" for layer, head in selection.as_pairs())
    return f"{table}<h2>Heads</h2><p>{html.escape(selection.describe())}: <code>{heads}</code></p>"


def to_html(result: RCAttributionResult, *, title: str | None = None) -> str:
    """A standalone HTML page (no external resources) showing ``result``.

    Hovering an answer unit shades the context by that unit's scores and lists its top 3 sources;
    clicking pins it. Answer tokens are underlined in red the less the context supports them.

    Parameters
    ----------
    result : RCAttributionResult
    title : str, optional
        Page title. Default: ``"Context attribution (<span scorer>)"``.

    Returns
    -------
    str
        The page; all text is HTML-escaped and the scores are embedded as JSON
        (``{"seq": [n_spans], "units": [n_outputs, n_spans]}``).
    """
    title = html.escape(title or f"Context attribution ({result.span_scorer})")
    intensity = shade_intensity(result.seq_attr)
    opened = _open_documents(result)
    assert result.token_attr is not None  # always set by RCAttributionResult.__init__
    payload = {
        "seq": result.seq_attr.double().round(decimals=6).tolist(),
        "units": result.token_attr.double().round(decimals=6).tolist(),
    }
    blob = json.dumps(payload).replace("</", "<\\/")
    chunks = "".join(
        _chunk_html(result, source, intensity, source in opened) for source in range(len(result.chunks))
    )
    collapsed = len(result.chunks) - len(opened)
    if collapsed:
        chunks = (
            f'<p class="legend">{len(result.chunks)} documents: the {len(opened)} that the answer draws on most '
            f"are open, the other {collapsed} folded (click a title to open it).</p>{chunks}"
        )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body><h1>{title}</h1>"
        f'<h2>Answer</h2><div class="text" dir="auto" id="answer">{_answer_html(result)}</div>'
        f'<h2>Cited answer</h2><div dir="auto" id="cited">{result.cited_answer("html")}</div>'
        '<p class="legend">Hover an answer part to see its sources (click to pin). '
        '<span class="g" style="--u:1">Dotted red underline</span>: 1 - token support, '
        f"{SUPPORT_MEANING} (fainter = better supported). "
        '<span class="g low" style="--u:0">Red background</span>: unsupported, token support below '
        f"{support_text(SUPPORT_THRESHOLD)} (hover a token for its values; read a run of flags rather than a "
        "single one).</p>"
        '<ol id="unit-sources"></ol>'
        f'<h2>Context <span id="showing">whole answer</span></h2>{chunks}{_summary_html(result)}'
        f'<script type="application/json" id="rc-data">{blob}</script><script>{_JS}</script>'
        "</body></html>\n"
    )


def save_html(result: RCAttributionResult, path: str | os.PathLike[str], **kw: Any) -> Path:
    """Write :func:`to_html` of ``result`` (keyword arguments passed on) to ``path``, whose name ends with
    ``.html`` or ``.htm`` (anything else raises ValueError); returns the path."""
    path = Path(path)
    if path.suffix.lower() not in HTML_SUFFIXES:
        raise ValueError(
            f"save_html writes an HTML page; end the name with {' or '.join(HTML_SUFFIXES)}, got {path.name!r}"
        )
    path.write_text(to_html(result, **kw), encoding="utf-8")
    return path
