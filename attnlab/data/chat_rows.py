"""Instruction rows for ``attnlab train lm --init DIR --data FILE.jsonl``: reading them, and
turning one conversation into token ids and the labels the loss counts.

A row (one JSON object per line) is either

    {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
    {"prompt": "...", "response": "..."}     (read as a user turn and an assistant turn)

Other keys of a row (an id, a source) are kept out of the way, but not one the run should
read (a row-level ``system``, a prompt row's ``input`` or ``context``): refused, not dropped.
A message has a role and a content only. Every problem is one ``UsageError`` naming the
flag, the file and the line.

Labels: the loss counts the assistant's tokens only, as TRL's ``assistant_only_loss`` does.
Every other position holds ``IGNORE`` (-100, ``F.cross_entropy``'s ``ignore_index``). Where
the assistant's reply starts and ends is read from the chat template itself, without knowing
its layout (``chat_example``):

- the start: the conversation up to the reply, rendered with the generation prompt (the
  assistant's header last), is a prefix of the whole conversation; the reply starts after it.
  That prefix is exactly what ``attnlab generate --chat`` feeds the model;
- the end: the template's end-of-turn token (``<|im_end|>``, ``<|eot_id|>``), included, as
  generation stops there; what follows it before the next turn (ChatML's newline) is not
  the reply; a reply that quotes that marker in its text is counted to the turn's own
  end-of-turn token. A template with no such token: the end of the turn as rendered alone.

Without a chat template (a base model) a prompt/response row is ``prompt`` + ``response`` +
eos, the loss on the response and the eos (``plain_example``), so the model learns to stop.

This module imports no torch: the spec reads the rows before the run directory is made.

Examples:
    >>> render = lambda msgs, gen: [ord(c) for c in "".join(
    ...     f"<{m['role'][0]}>{m['content']}|" for m in msgs) + ("<a>" if gen else "")]
    >>> ids, labels = chat_example(render, [{"role": "user", "content": "hi"},
    ...                                     {"role": "assistant", "content": "yo"}], ord("|"))
    >>> "".join(chr(i) for i, lab in zip(ids, labels) if lab != IGNORE)
    'yo|'
"""
from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from .tables import _decode, parse_json_line, read_bytes

__all__ = ["IGNORE", "ROLES", "ROWS_SUFFIXES", "Rows", "is_rows_file", "read_rows",
           "check_last_turns", "holdout", "held_out_note", "repeated_note", "empty_system_note",
           "chat_example",
           "counted_tokens", "plain_example", "cut_to", "VAL_SHARE"]

IGNORE = -100  # the label of a position the loss skips (``F.cross_entropy``'s ignore_index)
ROLES = ("system", "user", "assistant")
ROWS_SUFFIXES = (".jsonl", ".ndjson")  # --data FILE with these is instruction rows
VAL_SHARE = 0.1  # the share of rows held out for val_loss, as prepare holds out a tenth

Messages = list[dict[str, str]]
Render = Callable[[Messages, bool], list[int]]  # (messages, generation prompt) -> ids


def is_rows_file(path: str | Path) -> bool:
    """Whether --data names instruction rows (a .jsonl or .ndjson file), not text."""
    return Path(path).suffix.lower() in ROWS_SUFFIXES


@dataclass
class Rows:
    """The conversations of a rows file, with the line of each, whether each was written as
    ``messages`` (not ``prompt``/``response``), and the SHA-256 of the bytes read."""

    path: Path
    conversations: list[Messages] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    as_messages: list[bool] = field(default_factory=list)
    sha256: str = ""


def read_rows(path: str | Path, *, what: str = "--data", new: bool = True) -> Rows:
    """The rows of the JSONL file ``path`` (``what``: its flag, for the messages). ``new``:
    rows not yet trained on, whose fields that would be dropped are refused (``_refuse_unread``);
    False for the rows a run started on (--resume, ``evaluate RUN``), which go on as they began.

    Raises:
        UsageError: one line naming the file (and line) for a missing or unreadable file, no
            rows, a line that is not a JSON object, a row with neither ``messages`` nor
            ``prompt`` (ShareGPT's and Alpaca's told how they are written here), a role other
            than system/user/assistant, a content that is not text, an empty (or blank)
            assistant reply (or, ``new``, an empty or blank user message, a blank system
            message), or a conversation without an assistant turn or that opens with one. An
            empty system message (``""``) is read: a chat template renders it as an empty
            system turn, in place of its default system prompt where it has one.
    """
    data = read_bytes(path, what=what)
    where = f"{what} {path}"
    rows = Rows(Path(path), sha256=hashlib.sha256(data).hexdigest())
    for number, line in enumerate(_decode(data, where).split("\n"), start=1):
        if not line.strip():
            continue
        at = f"{where} line {number}"
        obj = parse_json_line(line, at)
        if not isinstance(obj, dict):
            raise UsageError(f"{at}: expected a JSON object, got {type(obj).__name__}")
        rows.conversations.append(_conversation(obj, at, new))
        rows.lines.append(number)
        rows.as_messages.append("messages" in obj)
    if not rows.conversations:
        raise UsageError(f"{where}: the file has no rows; each line is a JSON object with "
                         f"\"messages\" or \"prompt\" and \"response\"")
    return rows


def _conversation(obj: dict, at: str, new: bool = True) -> Messages:
    """The messages of one row (a prompt/response row as a user and an assistant turn)."""
    if obj.duplicates:
        raise UsageError(f"{at}: field {obj.duplicates[0]!r} appears twice in one object")
    if "messages" in obj and "prompt" in obj:
        raise UsageError(f"{at}: a row has \"messages\" or \"prompt\", not both")
    if new:
        _refuse_unread(obj, at)
    if "messages" in obj:
        messages = obj["messages"]
        if not isinstance(messages, list) or not messages:
            raise UsageError(f"{at}: \"messages\" must be a non-empty list of "
                             f"{{\"role\", \"content\"}} objects")
        found = [_message(m, f"{at}, message {i}", new) for i, m in enumerate(messages, start=1)]
    elif "prompt" in obj:
        if "response" not in obj:
            raise UsageError(f"{at}: a \"prompt\" row needs a \"response\" (the text the loss "
                             f"counts)")
        found = [_message({"role": "user", "content": obj["prompt"]}, f"{at}, \"prompt\"", new),
                 _message({"role": "assistant", "content": obj["response"]},
                          f"{at}, \"response\"", new)]
    else:
        keys = ", ".join(obj) or "none"
        raise UsageError(f"{at}: no \"messages\" or \"prompt\" (fields: {keys}); a row is "
                         f"{{\"messages\": [...]}} or {{\"prompt\": ..., \"response\": ...}}"
                         f"{_other_form(obj)}")
    if not any(m["role"] == "assistant" for m in found):
        raise UsageError(f"{at}: the conversation has no assistant turn, so nothing for the "
                         f"loss to count")
    if found[0]["role"] == "assistant":  # (transformers renders no empty conversation)
        raise UsageError(f"{at}, message 1: the conversation opens with an assistant turn, "
                         f"which answers nothing (a chat template renders no conversation "
                         f"before it, so where its reply starts is not known); open it with a "
                         f"user or system message")
    return found


# a row of another tool's form, and how it is written here
_FROM_VALUE = ("\"from\" and \"value\" are \"role\" and \"content\" here (\"human\" is \"user\", "
               "\"gpt\" is \"assistant\")")
_SHAREGPT = f"; ShareGPT's \"conversations\" is \"messages\", and a message's {_FROM_VALUE}"
# a prompt row's part of the prompt, as Alpaca (input) and Dolly (context) name them
_PROMPT_PARTS = ("instruction", "input", "context")


# another tool's role, and what it is here (a tool's turn has no place in these rows)
_TOOL_TURN = ("; tool turns (a call and its result) are not read here: leave the row out, or "
              "give the result as text in a user message")
_ROLE_HINTS = {"developer": "; OpenAI's \"developer\" is \"system\" here",
               "model": "; Gemma's \"model\" is \"assistant\" here",
               "human": "; ShareGPT's \"human\" is \"user\" here",
               "gpt": "; ShareGPT's \"gpt\" is \"assistant\" here",
               **dict.fromkeys(("tool", "function", "ipython"), _TOOL_TURN)}


def _other_form(obj: dict) -> str:
    """How a row in ShareGPT's form or Alpaca's (or Dolly's) is written here ("" for another
    row)."""
    if "conversations" in obj:
        return _SHAREGPT
    if "instruction" not in obj:
        return ""
    parts = [f"\"{k}\"" for k in _PROMPT_PARTS if k in obj]
    prompt = (f"{' and '.join(parts)} as one \"prompt\" (joined as the model should read them)"
              if len(parts) > 1 else f"{parts[0]} as the \"prompt\"")
    answer = next((k for k in ("output", "response") if k in obj), "output")
    return f"; write {prompt}" + (f" and \"{answer}\" as the \"response\""
                                  if answer != "response" else "")


def _refuse_unread(obj: dict, at: str) -> None:
    """A row's field that would be ignored though the run should read it: a system message
    beside "messages" or "prompt" (the row-level "system" of Anthropic's API), the input or
    context of a prompt row (Alpaca's, Dolly's, left beside a "prompt"). One that holds
    nothing (null, blank: Alpaca's many rows without an input), or whose text the row already
    holds where it is read (a converted row that kept its fields: the system message first in
    "messages", the instruction inside "prompt"), loses nothing, and is let be."""
    first = (obj.get("messages") or [None])[0]
    system = (first.get("content") if isinstance(first, dict) and first.get("role") == "system"
              else None)

    def held(key: str, read: object) -> bool:
        value = obj.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            return False
        return not (isinstance(value, str) and isinstance(read, str)
                    and value.strip() in read)

    if held("system", system) and ("messages" in obj or "prompt" in obj):
        raise UsageError(f"{at}: field \"system\" is not read (a row's other fields are "
                         f"ignored); give the system message first in \"messages\", "
                         f"{{\"role\": \"system\", \"content\": ...}}")
    unread = (next((k for k in _PROMPT_PARTS if held(k, obj["prompt"])), None)
              if "prompt" in obj else None)
    if unread:
        raise UsageError(f"{at}: field \"{unread}\" is not read beside \"prompt\" (a row's "
                         f"other fields are ignored); join it into \"prompt\" as the model "
                         f"should read it")


def _message(message, at: str, new: bool = True) -> dict[str, str]:
    """The role and content of one message, checked (``new``: as ``read_rows``')."""
    if isinstance(message, dict) and "role" not in message:
        raise UsageError(f"{at}: no \"role\"" + (f"; ShareGPT's {_FROM_VALUE}"
                                                 if "from" in message else ""))
    if not isinstance(message, dict) or set(message) != {"role", "content"}:
        shown = ", ".join(message) if isinstance(message, dict) else type(message).__name__
        raise UsageError(f"{at}: a message is {{\"role\", \"content\"}} only, got {shown}")
    if message["role"] not in ROLES:
        role = message["role"]  # any JSON value: only text can have a hint (a list is unhashable)
        hint = _ROLE_HINTS.get(role, "") if isinstance(role, str) else ""
        raise UsageError(f"{at}: role {role!r} is not one of {', '.join(ROLES)}{hint}")
    if not isinstance(message["content"], str):
        raise UsageError(f"{at}: \"content\" must be text, got "
                         f"{json.dumps(message['content'])[:40]}")
    if message["role"] == "assistant" and not message["content"].strip():
        # its labels would be the end-of-turn token alone: the model learns to answer nothing
        raise UsageError(f"{at}: the assistant's reply is empty, which would teach the model "
                         f"to answer nothing; give it text or leave the row out")
    if message["role"] == "system" and not message["content"]:
        # how Hugging Face users keep a template's default system prompt out (Qwen2.5 writes
        # "You are Qwen..." without a system message, an empty system turn with this one)
        return {"role": "system", "content": ""}
    if new and message["role"] == "system" and not message["content"].strip():
        raise UsageError(f"{at}: the system message is blank; give it text, or \"\" for an "
                         f"empty system turn (in place of a chat template's default one)")
    if new and not message["content"].strip():  # a run that began on one goes on as it began
        raise UsageError(f"{at}: the {message['role']} message is empty, which would be read "
                         f"as a {message['role']} turn with no text (not as none); give it "
                         f"text or leave it out")
    return {"role": message["role"], "content": message["content"]}


def check_last_turns(rows: Rows, *, what: str = "--data") -> None:
    """A new run's check of ``rows`` (``checks.check_rows``): a turn after a conversation's
    last assistant reply is never read by a step (no counted token follows it), so the row
    likely lost its reply. Not read on --resume or by ``evaluate``, so that a run that started
    on such a file goes on as it began.

    Raises:
        UsageError: one line naming the file, line and message of the first such turn, and
            how many rows end so where more than one does.
    """
    def last_reply(messages: list[dict]) -> int:
        return max(i for i, m in enumerate(messages) if m["role"] == "assistant")

    ending = [(messages, line) for messages, line in zip(rows.conversations, rows.lines)
              if last_reply(messages) + 1 < len(messages)]
    if ending:
        (messages, line), last = ending[0], last_reply(ending[0][0])
        many = f" ({len(ending)} rows end so)" if len(ending) > 1 else ""
        raise UsageError(f"{what} {rows.path} line {line}, message {last + 2}: a "
                         f"{messages[last + 1]['role']} turn after the last assistant "
                         f"reply, which the loss never reads (no reply follows it){many}; end "
                         f"the conversation with the assistant's reply")


def holdout(n: int, seed: int, *, where: str) -> tuple[list[int], list[int]]:
    """(train, val) row indices: ``round(VAL_SHARE · n)`` rows held out, drawn with
    ``random.Random(seed)`` as classify draws its splits (one class), never every row.

    Raises:
        UsageError: naming ``where`` when too few rows leave none to hold out.

    Examples:
        >>> holdout(10, 0, where="x")[1]
        [7]
    """
    rows = list(range(n))  # classify's draw (``tasks.classify.data._split``), one class
    random.Random(seed).shuffle(rows)
    # round() takes 0.5 to 0 (to even): 5 rows would hold out none and be refused, though
    # the message (and the docs) ask for 5; a half row rounds up to one
    k = min(max(round(VAL_SHARE * n), int(VAL_SHARE * n >= 0.5)), n - 1)
    train, val = sorted(rows[k:]), sorted(rows[:k])
    if not val:
        raise UsageError(f"{where}: too few rows ({n}) to hold out a tenth for val_loss; give "
                         f"at least {round(0.5 / VAL_SHARE)} rows")
    return train, val


def held_out_note(rows: Rows, val: list[int], counted: int) -> str:
    """The line naming the rows ``val`` held out for ``val_loss`` (their file lines), which
    the run does not train on, and ``counted``, their assistant tokens within --block-size:
    how many tokens ``val_loss`` averages over.

    Examples:
        >>> chat = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]]
        >>> held_out_note(Rows(Path("c.jsonl"), chat * 20, list(range(1, 21))), [3, 11], 14)
        'note: --data c.jsonl: 2 rows of 20 are held out for val_loss (lines 4, 12), which the run does not train on; val_loss averages over their 14 assistant tokens within --block-size'
    """
    lines = [str(rows.lines[i]) for i in val]
    shown = ", ".join(lines[:10]) + (", ..." if len(lines) > 10 else "")
    one = len(lines) == 1
    return (f"note: --data {rows.path}: {len(lines)} row{'' if one else 's'} of "
            f"{len(rows.conversations)} {'is' if one else 'are'} held out for val_loss "
            f"(line{'' if one else 's'} {shown}), which the run does not train on; val_loss "
            f"averages over {'its' if one else 'their'} {counted:,} assistant "
            f"token{'' if counted == 1 else 's'} within --block-size")


def repeated_note(rows: Rows, train: list[int], val: list[int]) -> str | None:
    """One line when held-out rows ``val`` repeat a training row of ``train`` (the same
    conversation, message for message): ``val_loss`` would measure them as rows the model was
    trained on, lower than on unseen ones. None when none does.

    Examples:
        >>> chat = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]]
        >>> repeated_note(Rows(Path("c.jsonl"), chat * 2, [1, 2]), [0], [1])[21:80]
        ' 1 of 1 held-out rows repeat a training row (line 2 repeats'
    """
    def key(i: int) -> str:
        return json.dumps(rows.conversations[i], sort_keys=True)

    trained = {}
    for i in train:
        trained.setdefault(key(i), rows.lines[i])
    twins = [(rows.lines[i], trained[key(i)]) for i in val if key(i) in trained]
    if not twins:
        return None
    shown = ", ".join(f"line {a} repeats line {b}" for a, b in twins[:3])
    return (f"note: --data {rows.path}: {len(twins)} of {len(val)} held-out rows repeat a "
            f"training row ({shown}{', ...' if len(twins) > 3 else ''}), so val_loss measures "
            f"them as trained on; leave the repeats out of the file to measure unseen rows")


def empty_system_note(rows: Rows, render: Render) -> str | None:
    """One line when rows hold an empty system message (``""``), rendered by ``render`` (the
    run's chat template) as an empty system turn: in place of the template's default system
    prompt where it has one (it renders a conversation without a system message longer than
    one with the empty turn). ``generate --chat`` asks in that layout with ``--system ''``
    only. None when no row holds one, or the template renders it as nothing.

    Examples:
        >>> render = lambda msgs, gen: [len(m["content"]) + 1 for m in msgs]
        >>> empty = [{"role": "system", "content": ""}, {"role": "user", "content": "a"}]
        >>> empty_system_note(Rows(Path("c.jsonl"), [empty], [4]), render)[:60]
        'note: --data c.jsonl: 1 row has an empty system message (lin'
    """
    found = [line for messages, line in zip(rows.conversations, rows.lines)
             if any(m["role"] == "system" and not m["content"] for m in messages)]
    user = [{"role": "user", "content": "hi"}]
    try:
        alone, empty = render(user, True), render([{"role": "system", "content": ""}, *user], True)
    except (UsageError, ValueError):  # the rows' own rendering says what is wrong
        return None
    if not found or alone == empty:
        return None
    n = len(found)
    instead = " in place of its default one" if len(alone) > len(empty) else ""
    return (f"note: --data {rows.path}: {n} row{' has' if n == 1 else 's have'} an empty "
            f"system message (line {found[0]}{', ...' if n > 1 else ''}): the chat template "
            f"renders an empty system turn{instead}; generate --chat --system '' asks in that "
            f"layout")


def chat_example(render: Render, messages: Messages, end_of_turn: int | None
                 ) -> tuple[list[int], list[int]]:
    """(ids, labels) of one conversation rendered by ``render(messages, generation_prompt)``
    (the chat template's ids); labels are the ids on the assistant's replies, each with its
    end-of-turn token ``end_of_turn``, and ``IGNORE`` elsewhere (see the module doc).

    Raises:
        ValueError: when the template renders the conversation up to a reply otherwise than
            the start of the whole (so where the reply starts is not clear).
    """
    ids = render(messages, False)
    labels = [IGNORE] * len(ids)
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        head = render(messages[:i], True)
        if ids[:len(head)] != head:
            raise ValueError(f"the chat template renders the conversation before assistant "
                             f"turn {i + 1} otherwise than as the start of the whole")
        start, end = len(head), _turn_end(render, messages[:i + 1], ids, len(head), end_of_turn)
        labels[start:end] = ids[start:end]
    return ids, labels


def _turn_end(render: Render, upto: Messages, ids: list[int], start: int,
              end_of_turn: int | None) -> int:
    """Where the reply starting at ``start`` ends in ``ids``: after its end-of-turn token,
    within the turn as rendered alone (``upto``, the conversation up to the reply) where that
    is a prefix of the whole (some templates, Qwen3's, render the last reply otherwise).

    A reply whose text quotes the marker (``<|im_end|>``) holds that token, as transformers
    reads it; the turn's own end-of-turn is the one after as many as the reply rendered alone
    holds, so the loss counts the whole reply, as transformers' assistant mask does."""
    turn = render(upto, False)
    bound = len(turn) if ids[:len(turn)] == turn else len(ids)
    ends = [j for j in range(start, bound) if ids[j] == end_of_turn]
    if end_of_turn is not None and ends:
        own = turn[start:].count(end_of_turn) if turn[:start] == ids[:start] else 1
        return ends[min(max(own, 1), len(ends)) - 1] + 1
    if bound == len(ids) and ids[:len(turn)] != turn:
        raise ValueError("the chat template renders a reply otherwise than within the whole "
                         "conversation, and has no end-of-turn token to find its end by")
    return bound


def counted_tokens(labels: list[int]) -> int:
    """How many targets of an example's ``labels`` the loss counts (the first token is no
    target: nothing before it predicts it).

    Examples:
        >>> counted_tokens([5, IGNORE, 7, 2])
        2
    """
    return sum(lab != IGNORE for lab in labels[1:])


def plain_example(prompt: list[int], response: list[int], eos: int
                  ) -> tuple[list[int], list[int]]:
    """(ids, labels) of a prompt/response row without a chat template: prompt + response +
    eos, the labels on the response and the eos.

    Examples:
        >>> plain_example([5, 6], [7], 2)
        ([5, 6, 7, 2], [-100, -100, 7, 2])
    """
    return [*prompt, *response, eos], [IGNORE] * len(prompt) + [*response, eos]


def cut_to(examples: list[tuple[list[int], list[int]]], length: int
           ) -> tuple[list[tuple[list[int], list[int]]], dict[str, int]]:
    """The examples cut to their first ``length`` tokens (the model reads --block-size
    inputs, and the last token is only a target: length = --block-size + 1), those left
    with no label dropped; and what was cut: ``cut`` conversations, ``dropped`` of them left
    with no assistant token (``first_dropped``, where one is: the index of the first),
    ``lost`` of ``labelled`` assistant tokens.

    Examples:
        >>> kept, said = cut_to([([1, 2, 3, 4], [-100, 2, 3, 4])], 3)
        >>> kept, said["lost"], said["labelled"]
        ([([1, 2, 3], [-100, 2, 3])], 1, 3)
    """
    kept, said = [], {"cut": 0, "dropped": 0, "lost": 0, "labelled": 0}
    for i, (ids, labels) in enumerate(examples):
        counted = counted_tokens(labels)
        said["labelled"] += counted
        if len(ids) > length:
            said["cut"] += 1
            ids, labels = ids[:length], labels[:length]
        left = counted_tokens(labels)
        said["lost"] += counted - left
        if left:
            kept.append((ids, labels))
        else:
            said["dropped"] += 1
            said.setdefault("first_dropped", i)
    return kept, said
