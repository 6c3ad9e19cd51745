"""Views of an [`RCAttributionResult`][rcattr.attribution.result.RCAttributionResult]: an HTML page, terminal text and head heat maps.

The HTML page and the terminal view shade every context span by its score, for the whole answer
or for one output unit; the page also underlines each answer token by how little the context supports it
(1 - token support) and marks the tokens below the cut-off
([`unsupported_tokens`][rcattr.attribution.result.RCAttributionResult.unsupported_tokens], [`rcattr.grounding.support`][rcattr.grounding.support]). The heat map shows every head's score as in the paper's Fig. 4, with the
selected heads outlined.
"""

from rcattr.viz.html import save_html, to_html
from rcattr.viz.plots import HeadsLike, plot_head_scores, plot_token_support, save_head_heatmap
from rcattr.viz.table import result_table_html
from rcattr.viz.terminal import shade_context, to_terminal

__all__ = [
    "HeadsLike",
    "plot_head_scores",
    "plot_token_support",
    "result_table_html",
    "save_head_heatmap",
    "save_html",
    "shade_context",
    "to_html",
    "to_terminal",
]
