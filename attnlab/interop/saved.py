"""A tokeniser file that attnlab saved, of any kind, read back as the right class.

``attnlab.tokenizers.load_tokenizer`` reads the kinds attnlab fits (char, word, bpe); a run
started from a pretrained checkpoint (``--init``) saves the checkpoint's own tokeniser
(``HFTokenizer``, ``MarianTokenizer``), which lives in this package, above ``tokenizers.py``.
A task's runtime reads its run's tokeniser through ``load_any_tokenizer``, which serves both.
"""
from __future__ import annotations

from pathlib import Path

from ..runs import read_json
from ..tokenizers import Tokenizer, load_tokenizer

__all__ = ["load_any_tokenizer"]


def load_any_tokenizer(path: str | Path) -> Tokenizer:
    """The tokeniser saved in ``path`` by any attnlab ``save``.

    Raises:
        UsageError: naming the file if it is missing, not JSON, or not a tokeniser.

    Examples:
        >>> from attnlab.tokenizers import CharTokenizer
        >>> CharTokenizer.fit(["ab"]).save("tok.json"); load_any_tokenizer("tok.json")
        CharTokenizer(vocab_size=6)
    """
    path = Path(path)
    kind = None
    if path.is_file():
        data = read_json(path, what="a JSON tokenizer file")
        kind = data.get("type") if isinstance(data, dict) else None
    if kind == "hf":
        from .hf_tokenizer import HFTokenizer

        return HFTokenizer.load(path)
    if kind == "marian":
        from .marian_tokenizer import MarianTokenizer

        return MarianTokenizer.load(path)
    return load_tokenizer(path)
