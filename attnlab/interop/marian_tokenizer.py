"""A Marian checkpoint's tokeniser as an attnlab ``Tokenizer`` (``MarianTokenizer``).

A Marian directory holds two SentencePiece models (``source.spm``, ``target.spm``) and one
vocabulary (``vocab.json``: piece -> id) that both sides share and that is not SentencePiece's
own numbering. Encoding cuts the text into pieces with the source model (the target model for
``encode_target``) and looks each piece up in ``vocab.json`` (a piece missing there is
``<unk>``); ``add_special_tokens`` appends ``</s>``. A leading language code (``>>fr<<``) is one
piece. Decoding maps ids back to pieces and joins them with the source model, as
``transformers``' ``MarianTokenizer`` does for a shared vocabulary. The ids are Marian's own:
``eos_id`` is ``</s>``, ``pad_id`` and ``sos_id`` are ``<pad>`` (Marian starts decoding from
its pad id), ``unk_id`` is ``<unk>``.

``sentencepiece`` is imported inside the functions (the ``hf`` extra); ``save`` writes both
SentencePiece models into the one JSON file, so a run reloads without its source directory.
Checkpoints with separate source and target vocabularies (``separate_vocabs``) are refused.
"""
from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from pathlib import Path

from ..errors import UsageError
from ..tokenizers import Tokenizer

__all__ = ["MarianTokenizer"]

KIND = "marian"
_UNDERLINE = "\u2581"  # SentencePiece's word-start mark


def _sentencepiece(model: bytes):
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model)
    return sp


class MarianTokenizer(Tokenizer):
    """Marian's SentencePiece tokeniser over its ``vocab.json`` ids (see the module doc).

    Args:
        source_spm, target_spm: the serialized SentencePiece models.
        vocab: piece -> id.
        unk_token, eos_token, pad_token: the special pieces (each must be in ``vocab``).
        clean_up_tokenization_spaces: whether decoded text is cleaned as ``transformers``
            cleans it.

    Examples:
        >>> tok = MarianTokenizer.from_directory("opus-mt-en-de")  # doctest: +SKIP
        >>> tok.encode("Hello", add_special_tokens=True)[-1] == tok.eos_id  # doctest: +SKIP
        True
    """

    kind = KIND

    def __init__(self, source_spm: bytes, target_spm: bytes, vocab: dict[str, int], *,
                 unk_token: str = "<unk>", eos_token: str = "</s>", pad_token: str = "<pad>",
                 clean_up_tokenization_spaces: bool = False):
        missing = [t for t in (unk_token, eos_token, pad_token) if t not in vocab]
        if missing:
            raise ValueError(f"special tokens {missing} are not in the vocabulary")
        self.source_spm, self.target_spm = bytes(source_spm), bytes(target_spm)
        self.vocab = {str(k): int(v) for k, v in vocab.items()}
        self.pieces = {v: k for k, v in self.vocab.items()}
        self.special_tokens = (unk_token, eos_token, pad_token)
        self.clean_up_tokenization_spaces = bool(clean_up_tokenization_spaces)
        self.unk_id, self.eos_id = self.vocab[unk_token], self.vocab[eos_token]
        self.pad_id = self.sos_id = self.vocab[pad_token]
        self._source = _sentencepiece(self.source_spm)
        self._target = _sentencepiece(self.target_spm)

    @classmethod
    def from_directory(cls, source: str | Path) -> "MarianTokenizer":
        """Read ``source.spm``, ``target.spm``, ``vocab.json`` and ``tokenizer_config.json``.

        Raises:
            UsageError: naming the directory when a file is missing or unreadable.
        """
        source = Path(source)
        try:
            config_file = source / "tokenizer_config.json"
            config = json.loads(config_file.read_text("utf-8")) if config_file.is_file() else {}
            if config.get("separate_vocabs"):
                raise ValueError("separate source and target vocabularies are not supported")
            names = ("unk_token", "eos_token", "pad_token")
            tokens = {n: config[n] for n in names if isinstance(config.get(n), str)}
            clean = config.get("clean_up_tokenization_spaces", False)
            return cls((source / "source.spm").read_bytes(), (source / "target.spm").read_bytes(),
                       json.loads((source / "vocab.json").read_text("utf-8")), **tokens,
                       clean_up_tokenization_spaces=clean)
        except ImportError:
            raise UsageError(f"{source}: reading a Marian tokenizer needs the sentencepiece "
                             f"package (pip install 'attnlab[hf]')") from None
        except Exception as e:  # OSError, JSON, ValueError, SentencePiece's RuntimeError
            raise UsageError(f"{source}: its Marian tokenizer files cannot be read "
                             f"({' '.join(str(e).split())})") from None

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _pieces(self, text: str, spm) -> list[str]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[:end + 2]], text[end + 2:]
        return code + spm.encode(text, out_type=str)

    def _ids(self, text: str, spm, add_special_tokens: bool) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        ids = [self.vocab.get(p, self.unk_id) for p in self._pieces(text, spm)]
        return ids + [self.eos_id] if add_special_tokens else ids

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Source-side ids of ``text`` (``tok(text)`` with ``add_special_tokens=True``: ``</s>``
        appended)."""
        return self._ids(text, self._source, add_special_tokens)

    def encode_target(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Target-side ids of ``text`` (``tok(text_target=text)``: the target model's pieces)."""
        return self._ids(text, self._target, add_special_tokens)

    def tokenize(self, text: str) -> list[str]:
        return self._pieces(text, self._source)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``: special tokens dropped (kept, each followed by a space, with
        ``skip_special_tokens=False``), the other pieces joined by SentencePiece.

        Raises:
            ValueError: for an id not in the vocabulary.
        """
        special = set(self.special_tokens)
        out, run = "", []
        for i in ids:
            piece = self.pieces.get(int(i))
            if piece is None:
                raise ValueError(f"id {int(i)} is not in the vocabulary of {self.vocab_size} ids")
            if piece in special:
                if not skip_special_tokens:
                    out += self._source.decode_pieces(run) + piece + " "
                run = run if skip_special_tokens else []
            else:
                run.append(piece)
        text = (out + self._source.decode_pieces(run)).replace(_UNDERLINE, " ").strip()
        if self.clean_up_tokenization_spaces:
            from .hf_tokenizer import clean_up

            text = clean_up(text)
        return text

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the directory ``transformers``' ``MarianTokenizer.from_pretrained`` reads (and
        ``from_directory`` reads back): ``source.spm``, ``target.spm``, ``vocab.json`` and
        ``tokenizer_config.json`` (the special pieces, one shared vocabulary).

        Examples:
            >>> tok.save_pretrained("exported")  # doctest: +SKIP
            >>> transformers.MarianTokenizer.from_pretrained("exported")  # doctest: +SKIP
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "source.spm").write_bytes(self.source_spm)
        (directory / "target.spm").write_bytes(self.target_spm)
        unk, eos, pad = self.special_tokens
        files = {"vocab.json": self.vocab,
                 "tokenizer_config.json": {
                     "tokenizer_class": "MarianTokenizer", "unk_token": unk, "eos_token": eos,
                     "pad_token": pad, "separate_vocabs": False,
                     "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces}}
        for name, data in files.items():
            (directory / name).write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n",
                                          encoding="utf-8")

    def _payload(self) -> dict:
        unk, eos, pad = self.special_tokens
        return {"source_spm": base64.b64encode(self.source_spm).decode("ascii"),
                "target_spm": base64.b64encode(self.target_spm).decode("ascii"),
                "vocab": self.vocab, "unk_token": unk, "eos_token": eos, "pad_token": pad,
                "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces}

    @classmethod
    def load(cls, path: str | Path) -> "MarianTokenizer":
        """Read a tokeniser written by ``save``.

        Raises:
            UsageError: naming the file if it is missing or not a Marian tokenizer file.
        """
        from .hf_tokenizer import read_saved

        return read_saved(path, KIND, lambda data: cls(
            base64.b64decode(data["source_spm"]), base64.b64decode(data["target_spm"]),
            data["vocab"], unk_token=data["unk_token"], eos_token=data["eos_token"],
            pad_token=data["pad_token"],
            clean_up_tokenization_spaces=data["clean_up_tokenization_spaces"]))
