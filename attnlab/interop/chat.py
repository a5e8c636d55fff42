"""A Hugging Face checkpoint's chat template: whether a directory has one, the token ids of a
conversation rendered with it, and the ids that end the assistant's turn.

``attnlab generate DIR --chat TEXT`` reads it. An instruct model is trained on conversations
laid out by its template (Qwen's ``<|im_start|>user ... <|im_end|>``, Llama 3's
``<|start_header_id|>user<|end_header_id|> ... <|eot_id|>``): given a message in another
layout it answers poorly, and it ends its reply with the template's end-of-turn token, which
is often not the tokenizer's eos token. So the message is rendered by the checkpoint's own
template (``transformers``' ``apply_chat_template`` with ``add_generation_prompt=True``, the
assistant's header last), and generation stops at any of ``joined_stops``:

- the end-of-turn token, read from the template itself: a conversation with a known reply is
  rendered, and the added token that follows the reply is the one that ends a turn;
- the tokenizer's eos token;
- the eos token(s) ``generation_config.json`` (else ``config.json``) names, where
  ``transformers``' ``generate`` stops (Llama 3 Instruct lists ``<|eot_id|>`` there).

Whether a directory has a template is read from its files without torch or ``transformers``
(``tokenizer_config.json``'s ``chat_template``, or ``chat_template.jinja`` /
``chat_template.json`` beside it), so ``--chat`` on a directory without one is refused before
a model is loaded. ``transformers`` is imported inside the functions that render.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .generation_config import FILE as GENERATION_CONFIG

__all__ = ["is_hf_directory", "is_run", "has_chat_template", "check_chat_template",
           "conversation", "load_chat_tokenizer", "chat_ids", "drops_system", "render",
           "end_of_turn_id", "joined_stops", "config_eos_ids", "TEMPLATE_FILES"]

# where transformers writes a template beside tokenizer_config.json (which older versions used)
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
# a reply no template rewrites: what follows it in the rendered text ends the turn
_PROBE_REPLY = "attnlab probe reply"


def is_hf_directory(path: str | Path) -> bool:
    """Whether ``path`` is a Hugging Face model directory: it holds a ``config.json`` (an
    attnlab run holds a ``config.yaml``; ``--init`` reads config.json first too)."""
    return (Path(path) / "config.json").is_file()


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def has_chat_template(directory: str | Path) -> bool:
    """Whether the tokenizer in ``directory`` has a chat template (read from its files only):
    a Hugging Face directory's, or an attnlab run's (its tokenizer.json keeps the template of
    the checkpoint it was trained from, ``HFTokenizer.chat_template``).

    Examples:
        >>> has_chat_template("no/such/directory")
        False
    """
    directory = Path(directory)
    if is_run(directory):
        saved = _json(directory / "tokenizer.json")
        return isinstance(saved, dict) and bool(saved.get("chat_template"))
    if any((directory / name).is_file() for name in TEMPLATE_FILES):
        return True
    config = _json(directory / "tokenizer_config.json")
    return isinstance(config, dict) and bool(config.get("chat_template"))


def is_run(path: str | Path) -> bool:
    """Whether ``path`` is an attnlab run (its config.yaml), not a Hugging Face directory."""
    return (Path(path) / "config.yaml").is_file() and not is_hf_directory(path)


def check_chat_template(directory: str | Path, flag: str = "--chat") -> None:
    """A one-line ``UsageError`` naming ``directory`` if its tokenizer has no chat template."""
    if has_chat_template(directory):
        return
    if is_run(directory):
        raise UsageError(f"{flag}: {directory} has no chat template (its tokenizer.json has "
                         f"none: the run was not trained from a checkpoint that has one); give "
                         f"--prompt TEXT instead")
    raise UsageError(f"{flag}: {directory} has no chat template (no chat_template in its "
                     f"tokenizer_config.json, no {' or '.join(TEMPLATE_FILES)}): a base "
                     f"model continues text; give --prompt TEXT instead")


def conversation(message: str, system: str | None = None) -> list[dict[str, str]]:
    """The messages of one user turn, after a system message when ``system`` is given.

    Examples:
        >>> conversation("hi", system="be brief")
        [{'role': 'system', 'content': 'be brief'}, {'role': 'user', 'content': 'hi'}]
    """
    turn = [{"role": "user", "content": message}]
    return [{"role": "system", "content": system}, *turn] if system is not None else turn


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def load_chat_tokenizer(directory: str | Path):
    """``transformers``' tokenizer of ``directory`` (it renders the template); never
    downloads. A ``UsageError`` naming the directory if it cannot be read."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(Path(directory), local_files_only=True)
    except Exception as e:  # missing or broken files, a tokenizer class not installed
        raise UsageError(f"{directory}: its tokenizer cannot be read ({_one_line(e)})") from None


def chat_ids(tokenizer, messages: list[dict[str, str]], directory: str | Path) -> list[int]:
    """The token ids of ``messages`` rendered by the chat template of ``tokenizer``, ending
    with the assistant's header: what the model continues with its reply.

    Raises:
        UsageError: naming ``directory`` when the template refuses the conversation (some
            refuse a system message) or renders nothing, or leaves a system message out
            (naming ``--system``).
    """
    ids = render(tokenizer, messages, directory, generation_prompt=True)
    if not ids:
        raise UsageError(f"{directory}: its chat template renders this conversation as no tokens")
    if any(m["role"] == "system" and m["content"].strip() for m in messages):
        check_system_kept(tokenizer, directory)
    return ids


_PROBE_SYSTEM = "attnlab probe system"


def check_system_kept(tokenizer, directory: str | Path) -> None:
    """A one-line refusal naming ``--system`` where the chat template renders a conversation
    without the text of its system message: a template written for a model with no system
    role that neither refuses one (Mistral's first, Gemma's) nor folds it into the user's
    turn (Mistral v0.3's), but skips every role it does not know, so the model would answer
    as if no instructions were given. Read once per template from a probe system message
    (the user's own message may hold the system's words); a template that refuses the probe
    says so itself when the conversation is rendered.

    Raises:
        UsageError: naming ``--system`` and ``directory``.
    """
    if drops_system(tokenizer):
        raise UsageError(f"--system: the chat template of {directory} leaves the system "
                         f"message out of the conversation it renders (a model without a "
                         f"system role); give the instructions in the --chat message instead")


def drops_system(tokenizer, *, later: bool = False) -> bool:
    """Whether ``tokenizer``'s chat template renders a conversation without the text of its
    system message (``check_system_kept``; instruction fine-tuning's rows,
    ``instruct.check_system_rows``): the first message, or with ``later`` one after a turn (a
    template may render a system message only where it comes first, ``loop.first``). Read
    from a probe system message; False for a template that refuses the probe (it says so
    itself when the conversation is rendered)."""
    probe = conversation("hi", _PROBE_SYSTEM)
    if later:  # [user, assistant, system, user]
        probe = [*conversation("hi"), {"role": "assistant", "content": _PROBE_REPLY}, *probe]
    try:
        text = tokenizer.apply_chat_template(probe, add_generation_prompt=True, tokenize=False)
    except Exception:  # (``render`` names the template's own error)
        return False
    return _PROBE_SYSTEM not in text


def render(tokenizer, messages: list[dict[str, str]], directory: str | Path, *,
           generation_prompt: bool) -> list[int]:
    """The token ids of ``messages`` rendered by ``tokenizer``'s chat template: with
    ``generation_prompt``, ending with the assistant's header (what ``chat_ids`` gives the
    model); without, the conversation as it stands (what instruction fine-tuning trains on,
    ``attnlab.data.chat_rows``). The one rendering of both.

    Raises:
        UsageError: naming ``directory`` when the template refuses the conversation.
    """
    try:
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt,
                                            tokenize=True)
    except Exception as e:  # jinja2's TemplateError (raise_exception in the template), ...
        raise UsageError(f"{directory}: its chat template cannot render this conversation "
                         f"({_one_line(e)})") from None
    ids = out["input_ids"] if isinstance(out, Mapping) else out  # a BatchEncoding in v5
    return [int(i) for i in ids]


def end_of_turn_id(tokenizer) -> int | None:
    """The id of the added token that closes an assistant's turn in ``tokenizer``'s chat
    template (``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``, or the eos token itself),
    found by rendering a turn with a known reply; None if no added token follows it."""
    turn = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _PROBE_REPLY}]
    try:
        text = tokenizer.apply_chat_template(turn, tokenize=False)
    except Exception:  # a template that refuses the probe: the eos token alone stops
        return None
    at = text.rfind(_PROBE_REPLY) if isinstance(text, str) else -1
    if at < 0:
        return None
    after = text[at + len(_PROBE_REPLY):]
    added = {token.content: i for i, token in tokenizer.added_tokens_decoder.items()}
    found = [t for t in added if t and after.startswith(t)]
    return added[max(found, key=len)] if found else None


def config_eos_ids(directory: str | Path) -> list[int]:
    """The eos id(s) ``generation_config.json`` names, else ``config.json``'s (a run trained
    from ``directory`` keeps them: ``HFTokenizer.checkpoint_eos_ids``)."""
    directory = Path(directory)
    for name in (GENERATION_CONFIG, "config.json"):
        data = _json(directory / name)
        value = data.get("eos_token_id") if isinstance(data, dict) else None
        if value is not None:
            values = value if isinstance(value, list) else [value]
            return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return []


def joined_stops(config_eos: list[int], eos_id: int | None, end: int | None) -> list[int]:
    """The config's eos ids, the tokenizer's ``eos_id`` and the template's end-of-turn ``end``,
    each once, in that order: what ends generation from a directory and from a run of it.

    Examples:
        >>> joined_stops([5, 7], 5, None)
        [5, 7]
    """
    return list(dict.fromkeys(i for i in (*config_eos, eos_id, end) if i is not None))
