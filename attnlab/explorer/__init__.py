"""See attention: a self-contained interactive page of attention weights (``attnlab view``,
``attnlab.viz.attention_view``). ``data``: the page's JSON layout; ``page``: the HTML."""
from .data import KINDS, Layer, attention_data, check_data
from .page import AttentionView, read_data, render_html

__all__ = ["KINDS", "Layer", "attention_data", "check_data", "AttentionView", "read_data",
           "render_html"]
