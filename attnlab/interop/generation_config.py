"""A Hugging Face checkpoint's own sampling defaults, read from its ``generation_config.json``
for ``attnlab generate DIR``.

``transformers``' ``generate`` samples as this file says: Qwen2.5-Instruct ships do_sample
true, temperature 0.7, top_p 0.8, top_k 20 and repetition_penalty 1.05; a base Qwen2.5 ships
do_sample false. attnlab takes the same values, so that ``generate DIR`` without flags decodes
as the checkpoint's authors chose. The rule, one for every key:

- a flag given wins (``--greedy``, ``--no-greedy``, ``--temperature``, ``--top-k``, ``--top-p``);
  a sampling flag given means sampling, whatever do_sample says (``--seed`` too: it seeds a
  sample, and ``--greedy --seed`` is refused as doing nothing);
- otherwise a key the file holds sets what its flag would set (do_sample false: greedy);
- a key the file lacks keeps attnlab's default (sampling at temperature 1, no top-k, no
  top-p). ``transformers`` fills a missing key from ``GenerationConfig``'s defaults instead
  (top_k 50), and without do_sample it decodes greedily; attnlab does not copy those defaults,
  because then a file that names only its eos ids (GPT-2's) would change what
  ``attnlab generate`` does without saying so. The note names two cases where those
  defaults make ``transformers`` decode otherwise, with the flag that does as it does: a file
  with do_sample true but no top_k (Llama 3's Instruct files) is sampled among its default 50
  most likely tokens (``--top-k 50``); one with a temperature, a top_p or a top_k other than 0
  but no do_sample, read with no decoding flag given, is decoded greedily (``--greedy``).
  Other differences go unnamed: ``transformers`` also decodes greedily a file without
  do_sample that has no sampling value (GPT-2's) or only top_k 0, which attnlab samples; and
  told to sample a file with no top_k, as --seed or --no-greedy tell attnlab, it would
  sample among 50 tokens.

``export --hf`` writes the other way (``write_sampling``): an lm run's OUT samples as
``attnlab generate RUN`` does without flags, do_sample true and top_k 0 written, where a file
without them would make ``transformers`` decode greedily (or, told to sample, among its
default 50 most likely tokens); temperature 1 and no top_p are both libraries' defaults.

A key that changes the chosen token but that attnlab's decoding loop has no rule for
(repetition_penalty, num_beams, ...) is named in the note, never dropped in silence. A value
the file gets wrong (a temperature of 0, a top_p above 1) is a one-line ``UsageError`` naming
the file and the key. Only ``json`` is imported: no torch, no ``transformers``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..settings import SamplingSettings, check_argument

__all__ = ["FILE", "SAMPLING_KEYS", "NOT_APPLIED", "FileSampling", "read_sampling", "resolve",
           "transformers_differs", "as_flags", "write_sampling"]

FILE = "generation_config.json"
# the file's keys attnlab takes, each with the flag that sets the same option
SAMPLING_KEYS = {"temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p"}
# what transformers' generate samples among when do_sample is true and top_k unset
# (GenerationConfig's default, transformers 4 and 5)
TRANSFORMERS_TOP_K = 50
# keys that change which token transformers' generate picks (or when it stops) and that
# attnlab's loop has no rule for, each with the value at which it does nothing
# (GenerationConfig's default in transformers 4; transformers 5 writes null for every key it
# leaves unset, which does nothing either); another value is named in the note
NOT_APPLIED: dict[str, Any] = {
    "repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0,
    "num_beams": 1, "num_beam_groups": 1, "diversity_penalty": 0.0, "penalty_alpha": None,
    "min_p": None, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0,
    "min_length": 0, "min_new_tokens": None, "bad_words_ids": None, "suppress_tokens": None,
    "begin_suppress_tokens": None, "sequence_bias": None, "forced_bos_token_id": None,
    "forced_eos_token_id": None, "guidance_scale": None,
    "exponential_decay_length_penalty": None, "top_h": None, "dola_layers": None,
    "watermarking_config": None, "stop_strings": None, "token_healing": False,
    "force_words_ids": None, "constraints": None,
}


@dataclass(frozen=True)
class FileSampling:
    """What ``generation_config.json`` says of sampling, as written (checked when used).

    Attributes:
        path: the file.
        do_sample: its do_sample, or None when it has none.
        values: its temperature, top_k and top_p, those it has (top_k 0 left out: to
            ``transformers`` it means no top-k, attnlab's default).
        not_applied: its keys of ``NOT_APPLIED`` whose value does something.
        top_k_unset: it has no top_k (or null), which ``transformers`` reads as top-k 50.
    """

    path: Path
    do_sample: bool | None
    values: dict[str, Any]
    not_applied: dict[str, Any]
    top_k_unset: bool = False


def read_sampling(directory: str | Path) -> FileSampling | None:
    """``directory``'s ``generation_config.json`` read, or None when it has none.

    Raises:
        UsageError: naming the file when it is not a JSON object, or its do_sample is not
            true or false.
    """
    path = Path(directory) / FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"{path} cannot be read ({' '.join(str(e).split())})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object, got {type(data).__name__}")
    do_sample = data.get("do_sample")
    if do_sample is not None and not isinstance(do_sample, bool):
        raise UsageError(f"{path}: do_sample must be true or false, got {do_sample!r}")
    values = {k: data[k] for k in SAMPLING_KEYS if data.get(k) is not None}
    if values.get("top_k") == 0:  # transformers' "no top-k"
        del values["top_k"]
    return FileSampling(path, do_sample, values,
                        {k: data[k] for k, off in NOT_APPLIED.items()
                         if data.get(k) is not None and data[k] != off},
                        top_k_unset=data.get("top_k") is None)


def resolve(given: dict[str, Any], file: FileSampling | None) -> tuple[dict[str, Any], str | None]:
    """The sampling settings a file decides: those of its keys whose flag was not given (the
    module's rule: a flag given wins, a sampling flag means sampling, a key the file lacks
    keeps attnlab's default).

    Args:
        given: the flags as given, by setting name (greedy, temperature, top_k, top_p and
            seed, which the file has no key for), None for one not given.
        file: ``read_sampling``'s answer (None: no file, nothing decided).

    Returns:
        (the values ``file`` decided, by setting name, for the caller to set; the one line to
        print on stderr, or None when the file decided nothing and names nothing unapplied).

    Raises:
        UsageError: naming the file and the key when a value taken from it is out of range.

    Examples:
        >>> resolve({"greedy": None, "temperature": None, "top_k": None, "top_p": None}, None)
        ({}, None)
    """
    if file is None:
        return {}, None
    taken = _decide(given, file)
    return taken, _note(taken, file, transformers_differs(given, file))


def _decide(given: dict[str, Any], file: FileSampling) -> dict[str, Any]:
    """What ``file`` sets of the settings ``given`` leaves open, each value checked."""
    if given["greedy"]:
        return {}
    if file.do_sample is False and _no_decoding_flag(given):
        return {"greedy": True}
    return {key: _checked(file.path, key, value) for key, value in file.values.items()
            if given[key] is None}


def _no_decoding_flag(given: dict[str, Any]) -> bool:
    """Whether none of --greedy/--no-greedy, the sampling flags and --seed was given."""
    return given["greedy"] is None and all(given.get(k) is None
                                           for k in (*SAMPLING_KEYS, "seed"))


def transformers_differs(given: dict[str, Any], file: FileSampling) -> str | None:
    """How ``transformers``' ``generate`` decodes ``file``'s directory otherwise than attnlab
    with the flags ``given``, from the defaults it fills in (the module's rule), if it does:
    do_sample true and no top_k, neither --greedy nor --top-k given: it samples among its
    default top-k 50; sampling values without do_sample, no flag given: it decodes greedily.
    The place to name the file is left as ``{file}``."""
    if file.do_sample is True and file.top_k_unset and not given["greedy"] \
            and given.get("top_k") is None:
        return (f"with no top_k in {{file}}, transformers' generate samples among its default "
                f"{TRANSFORMERS_TOP_K} most likely tokens and attnlab without a top-k: give "
                f"--top-k {TRANSFORMERS_TOP_K} to sample as transformers does")
    if file.do_sample is None and file.values and _no_decoding_flag(given):
        return ("with no do_sample in {file}, transformers' generate decodes greedily and "
                "attnlab samples: give --greedy to decode as transformers does")
    return None


def _note(taken: dict[str, Any], file: FileSampling, differs: str | None = None) -> str | None:
    """The one line saying what ``file`` decided, what it asks for that is not applied and
    how ``transformers`` decodes otherwise (``differs``, from ``transformers_differs``)."""
    parts = []
    if taken.get("greedy"):
        parts.append(f"greedy decoding, as {file.path} says (do_sample false); "
                     f"--temperature, --top-k, --top-p, --seed or --no-greedy sample instead")
    elif taken:
        parts.append(f"sampling with {as_flags(taken)}, from {file.path}; a flag given wins")
    if file.not_applied:
        unapplied = ", ".join(f"{k} {json.dumps(v)}" for k, v in file.not_applied.items())
        where = "its" if parts else f"{file.path}'s"
        verb = "is" if len(file.not_applied) == 1 else "are"
        parts.append(f"{where} {unapplied} {verb} not applied (attnlab generate has no such "
                     f"option), so the text is not what transformers' generate gives")
    if differs:
        parts.append(differs.format(file="it" if parts else file.path))
    return "note: " + "; ".join(parts) if parts else None


def as_flags(taken: dict[str, Any]) -> str:
    """The flags that set what ``resolve`` took from a file.

    Examples:
        >>> as_flags({"temperature": 0.7, "top_k": 20}), as_flags({"greedy": True})
        ('--temperature 0.7 --top-k 20', '--greedy')
    """
    if taken.get("greedy"):
        return "--greedy"
    return " ".join(f"{SAMPLING_KEYS[k]} {v}" for k, v in taken.items())


def _checked(path: Path, key: str, value: Any) -> Any:
    """``value`` of ``key`` checked against the flag's declaration (``SamplingSettings``)."""
    try:
        return check_argument(SamplingSettings, key, value, shown=f"{path}: {key}",
                              error=UsageError)
    except UsageError as e:
        raise UsageError(f"{e}; give {SAMPLING_KEYS[key]} to override it") from None


def write_sampling(generation_config, sampling: SamplingSettings | None = None) -> None:
    """Set on ``generation_config`` (a ``transformers.GenerationConfig``) the keys that make
    ``transformers``' ``generate`` draw from the distribution attnlab's does with ``sampling``
    (default: ``attnlab generate``'s defaults): do_sample true and top_k, which transformers
    would otherwise fill with its defaults (do_sample false: greedy; top_k 50); attnlab's "no
    top-k" is top_k 0 to transformers (which ``read_sampling`` reads back as none). A
    temperature or top_p is set only where it does something (not 1): saved, transformers 4
    leaves a key at its default out of the file, and a 1 written would be said back by
    ``attnlab generate OUT``'s note as if it chose something."""
    sampling = sampling if sampling is not None else SamplingSettings()
    generation_config.do_sample = True
    generation_config.top_k = 0 if sampling.top_k is None else int(sampling.top_k)
    if float(sampling.temperature) != 1.0:
        generation_config.temperature = float(sampling.temperature)
    if sampling.top_p is not None and float(sampling.top_p) != 1.0:
        generation_config.top_p = float(sampling.top_p)
