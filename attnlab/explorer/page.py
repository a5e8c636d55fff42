"""The attention page: one self-contained HTML file (style, script and data inline).

``render_html(data)`` returns the page for a dict made by ``attention_data``; ``AttentionView``
wraps it for Python use: ``_repr_html_`` shows it inline in Jupyter, ``save(path)`` writes it.
The page makes no network request: its Content-Security-Policy allows no source but itself,
and the script and style come from this package (``static/``), not a CDN.

The data sits in ``<script type="application/json" id="attnlab-attention">`` so that other
tools can read it back (``read_data``).
"""
from __future__ import annotations

import html
import json
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

from .data import checked_arrays
from .json_text import page_json

__all__ = ["AttentionView", "render_html", "read_data", "DATA_ID"]

DATA_ID = "attnlab-attention"
# Nothing may be fetched: no script, style, image, font or connection from anywhere.
_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
           "img-src data: blob:")


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _json_in_html(data: dict[str, Any]) -> str:
    """``data``, checked once (``checked_arrays``), as JSON that cannot end its <script>
    element early ("</script>" in a token)."""
    return page_json(data, checked_arrays(data))


def render_html(data: dict[str, Any]) -> str:
    """The page for ``data`` (see ``attnlab.explorer.data``) as one HTML document.

    Raises:
        ValueError: if ``data`` does not have the page's layout, or holds NaN or infinity.

    Examples:
        >>> from attnlab.explorer import Layer, attention_data
        >>> page = render_html(attention_data([Layer("attn", "self", [[[1.0]]])], ["a"]))
        >>> page.startswith("<!DOCTYPE html>"), "https://" in page
        (True, False)
    """
    return _page(data.get("title"), _json_in_html(data))


def _page(title: str | None, json_text: str) -> str:
    """The page around its data's JSON text, already checked."""
    title = title or "attention"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_POLICY}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(title)} · attnlab</title>\n"
        f"<style>\n{_static('explorer.css')}\n</style>\n</head>\n<body>\n"
        f"<script type=\"application/json\" id=\"{DATA_ID}\">{json_text}</script>\n"
        f"<script>\n{_static('explorer.js')}\n</script>\n</body>\n</html>\n")


def read_data(page: str) -> dict[str, Any]:
    """The data embedded in a page ``render_html`` made (its HTML text).

    Raises:
        ValueError: if the page holds no attnlab attention data.
    """
    start_tag = f'<script type="application/json" id="{DATA_ID}">'
    start = page.find(start_tag)
    end = page.find("</script>", start)
    if start < 0 or end < 0:
        raise ValueError(f"no <script id={DATA_ID!r}> in the page")
    return json.loads(page[start + len(start_tag):end])


class AttentionView:
    """An attention page for Python use: inline in Jupyter, or saved as a file.

    Args:
        data: a dict made by ``attnlab.explorer.attention_data``, checked here and again
            when the page is written: the page shows ``view.data`` as it is then (a title or
            weights changed after the view was made included, and checked as they were).

    Raises:
        ValueError: if ``data`` (or a dict set as ``view.data``) does not have the page's
            layout or its weights are not attention (``attnlab.explorer.WeightsError``).

    Examples:
        >>> from attnlab.explorer import Layer, attention_data
        >>> view = AttentionView(attention_data([Layer("attn", "self", [[[1.0]]])], ["a"]))
        >>> view.save("attention.html")
        PosixPath('attention.html')
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def data(self) -> dict[str, Any]:
        """The page's data; a dict set here is checked at once."""
        return self._data

    @data.setter
    def data(self, data: dict[str, Any]) -> None:
        checked_arrays(data)  # a wrong dict named where it is given, not when it is shown
        self._data = data

    def html(self) -> str:
        """The whole page as an HTML document, written (and checked) from ``data`` as it is
        now: a page kept from the view's making showed a title changed since, and NaN weights
        set since, without a word."""
        return render_html(self._data)

    def save(self, path: str | Path) -> Path:
        """Write the page to ``path`` (atomically; replaced if it exists). Returns the path."""
        from ..runs import atomic_write

        path = Path(path)
        atomic_write(path, self.html())
        return path

    def _repr_html_(self) -> str:
        # An iframe keeps the page's script and style apart from the notebook's own. The page
        # posts its height and the script beside the frame sizes the frame to it (a fixed 760 px
        # clipped the map and hid the weights); 760 px where outputs run no script.
        frame = f"attnlab-view-{uuid.uuid4().hex[:12]}"
        return (f'<iframe srcdoc="{html.escape(self.html(), quote=True)}" id="{frame}" '
                'style="width:100%;height:760px;border:0" sandbox="allow-scripts"></iframe>'
                f'<script>(function () {{ const frame = document.getElementById("{frame}"); '
                'window.addEventListener("message", (e) => { if (frame && e.source === '
                'frame.contentWindow && e.data && e.data.attnlabHeight > 0) '
                'frame.style.height = Math.min(e.data.attnlabHeight, 4000) + "px"; }); })();'
                '</script>')

    def __repr__(self) -> str:
        n = len(self.data["layers"])
        return (f"AttentionView({n} layer{'s' * (n != 1)}, {len(self.data['query_tokens'])} "
                f"query x {len(self.data['key_tokens'])} key tokens)")
