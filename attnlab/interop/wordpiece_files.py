"""A BERT or DistilBERT checkpoint's WordPiece tokeniser read from its files with ``tokenizers``
alone, without importing ``transformers`` (about 2 s of every ``--init`` run's start,
benchmarks/RESULTS.md), where the files say exactly what ``transformers``' ``AutoTokenizer``
builds from them.

``transformers`` (5.x) does not take a WordPiece ``tokenizer.json`` as it stands. Its
``BertTokenizer`` keeps the file's vocabulary, then builds the normaliser from
``tokenizer_config.json`` (``do_lower_case``, ``strip_accents``, ``tokenize_chinese_chars``),
the ``[CLS] $A [SEP]`` template from the config's cls and sep tokens, and adds the named special
tokens as special tokens of their own. ``read_wordpiece`` takes the file only where each of those
parts already is what that build gives, every setting in the config is one it reads, and the
special tokens are named alike in ``tokenizer_config.json`` and ``special_tokens_map.json``. The
file's padding and truncation settings (MiniLM's pad every text to 128) are not applied, by
either path: ``HFTokenizer`` turns them off.
Anything else, an older ``transformers`` (4.x reads ``tokenizer.json`` by other rules) and a
``config.json`` model type outside the BERT family (for some, such as qwen2 and mistral,
``AutoTokenizer`` builds a class of its own choosing) give None, and the caller asks
``transformers`` (``attnlab.interop.checkpoint``); tests/interop/test_wordpiece_files.py holds
the two paths equal.
"""
from __future__ import annotations

import json
from pathlib import Path

from .hf_tokenizer import HFTokenizer

__all__ = ["read_wordpiece"]

# tokenizer_class -> whether its model reads token_type_ids (its class's model_input_names)
_CLASSES = {"BertTokenizer": True, "BertTokenizerFast": True,
            "DistilBertTokenizer": False, "DistilBertTokenizerFast": False}
# the special tokens these classes name, with their defaults
_NAMED = {"unk": "[UNK]", "sep": "[SEP]", "pad": "[PAD]", "cls": "[CLS]", "mask": "[MASK]"}
# every tokenizer_config.json key whose meaning is taken into account below
_READ = {"tokenizer_class", "do_lower_case", "strip_accents", "tokenize_chinese_chars",
         "clean_up_tokenization_spaces", "padding_side", "model_input_names",
         "added_tokens_decoder", *(f"{role}_token" for role in _NAMED)}
# keys that change nothing a tokeniser of these classes encodes or decodes
_INERT = {"name_or_path", "model_max_length", "backend", "do_basic_tokenize", "never_split",
          "special_tokens_map_file", "tokenizer_file"}
# files beside tokenizer.json that transformers reads into the tokenizer too (the folder holds
# named chat templates)
_OTHER_FILES = ("added_tokens.json", "chat_template.jinja", "chat_template.json",
                "additional_chat_templates")
# config.json model types for which AutoTokenizer builds the tokenizer_class as given (for
# some others it builds its own class instead: Qwen2's BPE for qwen2, a bare TokenizersBackend
# for mistral)
_MODEL_TYPES = ("bert", "distilbert", "roberta", "xlm-roberta", "camembert")
_FLAGS = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
          "special": True}


def read_wordpiece(source: Path) -> HFTokenizer | None:
    """The tokeniser ``AutoTokenizer.from_pretrained(source)`` gives, as an ``HFTokenizer``,
    read without ``transformers``; None where the files do not say it alone (see the module
    doc)."""
    config = _json(source / "tokenizer_config.json")
    described = _json(source / "config.json")  # the model's
    if (not _transformers_5_or_absent() or not isinstance(config, dict)
            or not isinstance(described, dict) or described.get("model_type") not in _MODEL_TYPES
            or any(config.get(k, "") is None for k in _READ - {"strip_accents"})
            or any((source / name).exists() for name in _OTHER_FILES)
            or not (source / "tokenizer.json").is_file()
            or not isinstance(config.get("tokenizer_class"), str)
            or config["tokenizer_class"] not in _CLASSES or set(config) - _READ - _INERT):
        return None
    names = _special_names(source, config)
    if names is None:
        return None
    from tokenizers import Tokenizer as Fast

    try:
        fast = Fast.from_file(str(source / "tokenizer.json"))
        file = json.loads(fast.to_str())
        if not _as_transformers_builds(file, config, names):
            return None
    except Exception:  # noqa: BLE001 - a bad file (transformers names it in its own words),
        return None  # a setting of a type its own build would not take
    inputs = config.get("model_input_names")
    type_ids = (_CLASSES[config["tokenizer_class"]] if inputs is None
                else isinstance(inputs, list) and "token_type_ids" in inputs)
    padding = file.get("padding") or {}  # its side is transformers' default padding side
    padding_side = config.get("padding_side", str(padding.get("direction", "right")).lower())
    clean = config.get("clean_up_tokenization_spaces", False)
    if (padding_side not in ("right", "left") or not isinstance(clean, bool)
            or (inputs is not None and not isinstance(inputs, list))):
        return None
    specials = {role: fast.token_to_id(name) for role, name in names.items()}
    return HFTokenizer(fast, specials, padding_side=padding_side,
                       clean_up_tokenization_spaces=clean, token_type_ids=type_ids)


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _transformers_5_or_absent() -> bool:
    """Whether the installed ``transformers`` (read from its metadata, not imported) is 5.x
    or later, or none is installed (then these are the rules there are)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = version("transformers").split(".", 1)[0]
    except PackageNotFoundError:
        return True
    return major.isdigit() and int(major) >= 5


def _special_names(source: Path, config: dict) -> dict[str, str] | None:
    """Role -> token text: the config's, else special_tokens_map.json's, else the class's
    default; None if the two files name a role differently or not as plain text (a null
    too: transformers then has no such token), or if only special_tokens_map.json names it
    where the config lists its added tokens (transformers then reads no such file)."""
    mapped = _json(source / "special_tokens_map.json") if (
        source / "special_tokens_map.json").exists() else {}
    if not isinstance(mapped, dict) or set(mapped) - {f"{r}_token" for r in _NAMED}:
        return None
    names = {}
    for role, default in _NAMED.items():
        key = f"{role}_token"
        given = [f[key] for f in (config, mapped) if key in f]
        if (not all(isinstance(v, str) for v in given) or len(set(given)) > 1
                or (key in mapped and key not in config and "added_tokens_decoder" in config)):
            return None
        names[role] = given[0] if given else default
    return names


def _as_transformers_builds(file: dict, config: dict, names: dict[str, str]) -> bool:
    """Whether ``tokenizer.json`` (``file``) already is what ``BertTokenizer`` builds from
    its vocabulary and ``config``."""
    from tokenizers import decoders, normalizers, pre_tokenizers, processors

    cls, sep = names["cls"], names["sep"]
    vocab = file.get("model", {}).get("vocab", {})
    if any(n not in vocab for n in names.values()):
        return False
    expected = {
        "normalizer": normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=config.get("tokenize_chinese_chars", True),
            strip_accents=config.get("strip_accents"),
            lowercase=config.get("do_lower_case", True)),
        "pre_tokenizer": pre_tokenizers.BertPreTokenizer(),
        "decoder": decoders.WordPiece(prefix="##"),
        "post_processor": processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])]),
    }
    model = file["model"]
    return (all(json.loads(part.__getstate__()) == file.get(key)
                for key, part in expected.items())
            and model.get("type") == "WordPiece" and model.get("unk_token") == names["unk"]
            and model.get("continuing_subword_prefix") == "##"
            and model.get("max_input_chars_per_word") == 100  # WordPiece's own, rebuilt
            and (file.get("padding") or {}).get("pad_token", names["pad"]) == names["pad"]
            and _added_are_the_specials(file.get("added_tokens", []), names, vocab,
                                        config.get("added_tokens_decoder")))


def _added_are_the_specials(added: list, names: dict[str, str], vocab: dict,
                            decoder: dict | None) -> bool:
    """The file's added tokens are the named special tokens, each as ``transformers`` adds a
    special token, at its vocabulary id; the config's ``added_tokens_decoder``, if any, says
    the same."""
    want = {vocab[n]: n for n in names.values()}
    seen = {t.get("id"): t for t in added}
    if set(seen) != set(want) or any(seen[i].get("content") != n for i, n in want.items()):
        return False
    if any(any(t.get(k) != v for k, v in _FLAGS.items()) for t in added):
        return False
    if decoder is None:
        return True
    return (isinstance(decoder, dict)
            and {int(i) if str(i).isdigit() else i: t for i, t in decoder.items()}
            == {i: {"content": n, **_FLAGS} for i, n in want.items()})
