"""Instruction fine-tuning: ``attnlab train lm --init DIR --data FILE.jsonl`` (the rows and
their labels are ``attnlab.data.chat_rows``'s; the spec read and checked them). This is the
part of the lm runtime that turns rows into batches, measures and answers chats; the run
itself is ``runtime.fine_tune``.

- Tokens: each conversation rendered by the --init checkpoint's chat template (the rendering
  ``attnlab generate --chat`` uses, ``attnlab.interop.chat.render``), or prompt + response +
  eos without a template. The loss counts the assistant's tokens only (the other targets are
  ``IGNORE``), a mean over them.
- Too long: a conversation longer than --block-size + 1 tokens is cut at its end, and one line
  on stderr says how many were cut and how many assistant tokens that left out.
- Batches: padded per batch to its longest example, on the right (the causal mask keeps the
  padding out of every real position; its targets are ``IGNORE``). Epochs of the training
  rows, shuffled with --seed per epoch; batch n is a function of n alone
  (``numbered_batches``), so --resume continues with the batches an unbroken run would see.
- Held out: a tenth of the rows (``chat_rows.holdout``, drawn with --seed); ``val_loss`` is the
  mean cross-entropy over their assistant tokens, every token weighted equally.
- The run's tokenizer (with the template) is written to RUN_DIR/data/tokenizer.json when the
  run starts, and its SHA-256 recorded (``corpus_sha256``): a resumed run reads it there,
  never --init DIR again.

Shapes: B batch, T the longest example of a batch less one, V vocabulary.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ...data import numbered_batches
from ...data.chat_rows import (IGNORE, Rows, chat_example, counted_tokens, cut_to,
                               empty_system_note, held_out_note, holdout, plain_example,
                               read_rows, repeated_note)
from ...data.tables import check_digest
from ...errors import UsageError
from ...interop.chat import (chat_ids, conversation, drops_system, end_of_turn_id, joined_stops,
                             render)
from ...interop.saved import load_any_tokenizer
from ...runs import check_data_files, file_digest
from ...settings import later_process

__all__ = ["prepare", "EncodedRows", "encode_splits", "check_system_rows", "encode_rows", "padded", "batched",
           "pad_id", "example_batches", "assistant_loss", "evaluate_loss", "ChatSession",
           "chat_predictions", "cut_note"]

Example = tuple[list[int], list[int]]  # (ids, labels)


def prepare(cfg, run_dir: Path, checked: "Rows | EncodedRows", tokenizer=None):
    """What a fine-tuning run trains on: (the run config with its tokenizer's place and digest
    derived, the tokenizer, the training examples, the held-out ones). ``tokenizer`` is
    --init's (a new run), whose rows the spec encoded already (``checked``, ``encode_splits``);
    None on --resume (read back from the run; ``checked`` is then the rows, encoded here).
    The notes of the rows are printed by the first process only (DDP runs one per device)."""
    cfg, tokenizer = _tokenizer_of_run(cfg, Path(run_dir), tokenizer)
    found = checked if isinstance(checked, EncodedRows) else encode_splits(cfg, tokenizer, checked)
    for note in found.notes if not later_process() else []:  # once a run, not once a process
        print(note, file=sys.stderr, flush=True)
    return cfg, tokenizer, found.train, found.val


@dataclass(frozen=True)
class EncodedRows:
    """A rows file's training and held-out examples, and the lines that say what was cut:
    what ``encode_splits`` made of it."""

    rows: Rows
    train: list[Example]
    val: list[Example]
    notes: list[str]


def encode_splits(cfg, tokenizer, rows: Rows) -> EncodedRows:
    """Every row of ``rows`` as the run will train on it, split into training and held-out
    examples (``holdout``). ``attnlab train lm`` calls it before the run directory is written,
    so that a row the chat template refuses, or a split left with no assistant token, is a
    one-line refusal with nothing written; ``cfg`` is read for ``instruction``, ``init``,
    ``out``, ``seed`` and ``block_size`` (attributes). The notes are printed by the run.

    Raises:
        UsageError: naming the file and line of a row the template refuses, or when a split
            has no assistant token within --block-size.
    """
    train_rows, val_rows = holdout(len(rows.conversations), cfg.seed, where=f"--data {rows.path}")
    train, said = _encoded_rows(cfg, tokenizer, rows, train_rows)
    val, said_val = _encoded_rows(cfg, tokenizer, rows, val_rows, split="held-out ",
                                  measured=True)
    chat = cfg.instruction == "chat"
    no_stop = _no_stop_note(cfg, tokenizer) if chat else None
    empty = empty_system_note(rows, _template(cfg, tokenizer)[0]) if chat else None
    held = held_out_note(rows, val_rows, sum(counted_tokens(labels) for _, labels in val))
    repeated = repeated_note(rows, train_rows, val_rows)
    markers = _marker_note(rows, tokenizer)
    return EncodedRows(rows, train, val, [n for n in (said, said_val, no_stop, empty, markers,
                                                      held, repeated) if n])


def check_system_rows(cfg, tokenizer, rows: Rows) -> None:
    """A new run's refusal of rows whose system message the chat template leaves out
    (``drops_system``: a template for a model without a system role that skips it rather
    than refuse it), as ``generate --chat --system`` refuses one: the run would train on the
    replies to instructions the model never read. A run that started on such rows (before
    this check) resumes as it began: only ``spec`` calls it, for a new run.

    Raises:
        UsageError: naming the file, the line and message of the first row with a system
            message the template leaves out (first in the conversation or later), how many
            rows hold one, and --init's template.
    """
    found = [(line, m) for messages, line in zip(rows.conversations, rows.lines)
             for m, message in enumerate(messages, start=1)
             if message["role"] == "system" and message["content"].strip()]
    if cfg.instruction != "chat" or not found:
        return
    theirs = tokenizer.to_transformers()
    # one probe for a first system message, one for a later one (a template may keep only
    # the first: ``loop.first``), each read once
    drops = {later: drops_system(theirs, later=later) for later in {m > 1 for _, m in found}}
    found = [(line, m) for line, m in found if drops[m > 1]]
    if not found:
        return
    (line, m), n = found[0], len({line for line, _ in found})
    raise UsageError(f"--data {rows.path} line {line}, message {m}: --init {cfg.init}'s chat "
                     f"template leaves the system message out of the conversation it renders "
                     f"(a model without a system role), so the run would train without it "
                     f"({n} row{' holds' if n == 1 else 's hold'} one); give its instructions "
                     f"in the user's message instead")


def _marker_note(rows: Rows, tokenizer) -> str | None:
    """One line when a message's text holds an added token of the checkpoint's tokenizer: a
    chat template's marker (``<|im_end|>``, special) or another added token, special or not
    (Qwen's ``<tool_call>``, Qwen3's ``<think>``, one a user put in with ``add_tokens``). It
    is read as that one token, as transformers reads it, not as text, so the model sees the
    template's layout inside the message (a reply learns to end its turn there). Rows written
    already laid out by a template, or text about one, were trained on so without a word.
    Added tokens of blanks alone (the runs of spaces some code models add) are left out: they
    are text. None when no text holds one."""
    pattern = tokenizer.added_texts() if getattr(tokenizer, "kind", None) == "hf" else None
    if pattern is None:
        return None
    found = []
    for messages, line, as_messages in zip(rows.conversations, rows.lines, rows.as_messages):
        for m, message in enumerate(messages, start=1):
            held = pattern.search(message["content"])
            name = f"message {m}" if as_messages else ('"prompt"', '"response"')[m - 1]
            found += [(f"line {line}, {name}", held.group())] if held else []
    if not found:
        return None
    (where, marker), n = found[0], len(found)
    return (f"note: --data {rows.path}: {n} message{'' if n == 1 else 's'} "
            f"{'holds' if n == 1 else 'hold'} an added token's text ({where}: {marker}), "
            f"which the model reads as that token, as transformers does, not as text; write "
            f"it otherwise where it is meant as text")


def batched(examples: list[Example], batch_size: int, tokenizer) -> list:
    """The examples in order, ``padded`` ``batch_size`` at a time (validation's batches)."""
    pad = pad_id(tokenizer)
    return [padded(examples[i:i + batch_size], pad) for i in range(0, len(examples), batch_size)]


def _tokenizer_of_run(cfg, run_dir: Path, tokenizer):
    """The run's tokenizer: --init's (a new run), written to RUN_DIR/data/tokenizer.json and
    its SHA-256 derived into ``corpus_sha256``; on --resume, read back from there, checked:
    from the run directory as it is now, not config.yaml's ``data_dir`` (the directory the
    run started in, which a run renamed or copied elsewhere is no longer in)."""
    from .checks import check_corpus

    data_dir = run_dir / "data"
    if tokenizer is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        tokenizer.save(data_dir / "tokenizer.json")
        return cfg.derive(data_dir=str(data_dir.resolve()), corpus_sha256={
            "tokenizer.json": file_digest(data_dir / "tokenizer.json")}), tokenizer
    check_corpus(cfg.corpus_sha256, data_dir, "resume")
    return (cfg.derive(data_dir=str(data_dir.resolve())),
            load_any_tokenizer(data_dir / "tokenizer.json"))


def pad_id(tokenizer) -> int:
    """Any id the model can read: padding is never a target and no real position sees it."""
    return tokenizer.pad_id if tokenizer.pad_id is not None else 0


def encode_rows(cfg, tokenizer, rows: Rows, which: list[int], *, say: bool = False,
                split: str = "", measured: bool = False, training: bool = True) -> list[Example]:
    """The (ids, labels) of the rows numbered ``which``, as the run's ``instruction`` turns
    them into tokens, cut to --block-size + 1; with ``say``, one line on stderr for what was
    cut (``measured``: rows val_loss measures, not trained on). ``UsageError`` naming the file
    and line of a row the template refuses, or when no assistant token is left within
    --block-size (``training`` False: evaluate, which cannot change the block size)."""
    kept, note = _encoded_rows(cfg, tokenizer, rows, which, split, measured, training)
    if say and note:
        print(note, file=sys.stderr, flush=True)
    return kept


def _encoded_rows(cfg, tokenizer, rows: Rows, which: list[int], split: str = "",
                  measured: bool = False, training: bool = True
                  ) -> tuple[list[Example], str | None]:
    """``encode_rows``' examples, and its line on what was cut (None when nothing was)."""
    encode = _encoder(cfg, tokenizer)
    examples = []
    for i in which:
        try:
            examples.append(encode(rows.conversations[i]))
        except (UsageError, ValueError) as e:
            raise UsageError(f"--data {rows.path} line {rows.lines[i]}: {e}") from None
    kept, said = cut_to(examples, cfg.block_size + 1)
    where = f"--data {rows.path}"
    if not kept:  # evaluate has no --block-size: a run's positions are those it trained on
        within = (f"--block-size {cfg.block_size}; raise --block-size" if training else
                  f"the run's block size, {cfg.block_size} tokens, fixed when it trained; give "
                  f"shorter conversations")
        raise UsageError(f"{where}: no {split}conversation has an assistant token within {within}")
    if not said["cut"]:
        return kept, None
    first = said.get("first_dropped")
    note = cut_note(said, len(examples), cfg.block_size, split, measured=measured,
                    first_line=None if first is None else rows.lines[which[first]])
    return kept, f"note: {where}: {note}"


def cut_note(said: dict[str, int], n: int, block_size: int, split: str = "", *,
             measured: bool = False, first_line: int | None = None) -> str:
    """What ``cut_to`` cut, in words (``said``: its counts; ``n`` conversations in all, of
    ``split``, "held-out " or ""; ``measured``: rows val_loss measures, never trained on,
    whose conversation left with no assistant token is not measured, rather than not trained
    on; ``first_line``: the file line of the first conversation left with none, named so
    that the user finds it among thousands).

    Examples:
        >>> cut_note({"cut": 2, "dropped": 1, "lost": 30, "labelled": 400}, 50, 64,
        ...          first_line=7)
        '2 of 50 conversations are longer than --block-size 64 + 1 tokens and were cut at the end: 30 of 400 assistant tokens are left out (1 conversation has none left and is not trained on: line 7)'
    """
    one = said["cut"] == 1
    text = (f"{said['cut']} of {n} {split}conversations {'is' if one else 'are'} longer than "
            f"--block-size {block_size} + 1 tokens and {'was' if one else 'were'} cut at the "
            f"end: {said['lost']:,} of {said['labelled']:,} assistant tokens are left out")
    if said["dropped"]:
        one = said["dropped"] == 1
        left_out = "measured by val_loss" if measured else "trained on"
        lines = (f"{': line' if one else ', the first line'} {first_line}" if first_line
                 else "")
        text += (f" ({said['dropped']} conversation{'' if one else 's'} "
                 f"{'has' if one else 'have'} none left and {'is' if one else 'are'} not "
                 f"{left_out}{lines})")
    return text


def _encoder(cfg, tokenizer):
    """``messages -> (ids, labels)`` for the run: through the chat template, or plain."""
    if cfg.instruction == "chat":
        rendered, end = _template(cfg, tokenizer)
        return lambda messages: chat_example(rendered, messages, end)
    if tokenizer.eos_id is None:
        raise UsageError(f"--init {cfg.init}: its tokenizer has no eos token to end a response "
                         f"with")
    return lambda messages: plain_example(*_plain_split(tokenizer, messages[0]["content"],
                                                        messages[1]["content"]),
                                          tokenizer.eos_id)


def _template(cfg, tokenizer):
    """(``render(messages, generation_prompt) -> ids`` by the run's chat template, the id
    that ends a reply: the template's end-of-turn token, else eos)."""
    theirs = tokenizer.to_transformers()
    source = cfg.init or cfg.out

    def rendered(messages, generation_prompt):
        return render(theirs, messages, source, generation_prompt=generation_prompt)

    end = end_of_turn_id(theirs)
    return rendered, end if end is not None else tokenizer.eos_id


# a conversation whose reply no template rewrites (``_no_stop_note`` renders it)
_PROBE = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _no_stop_note(cfg, tokenizer) -> str | None:
    """One line when the chat template closes a reply with no token that ends generation (no
    end-of-turn token, no eos): the loss never counts one, so the run does not learn to end
    its replies, and ``generate --chat`` runs on to --max-new-tokens. None otherwise."""
    rendered, end = _template(cfg, tokenizer)
    try:
        _, labels = chat_example(rendered, _PROBE, end)
    except (UsageError, ValueError):  # the rows' own rendering says what is wrong
        return None
    if end is not None and end in [lab for lab in labels if lab != IGNORE]:
        return None
    return (f"note: --init {cfg.init}'s chat template ends an assistant's reply with no "
            f"end-of-turn or eos token, so the run does not learn to end its replies: "
            f"generate --chat runs on to --max-new-tokens unless a --stop string ends it")


def _plain_split(tokenizer, prompt: str, response: str) -> tuple[list[int], list[int]]:
    """(the prompt's ids, the response's) of a plain row. Each is encoded apart, the prompt as
    generate and predict read one (a checkpoint's bos first), so the model learns to answer
    the prompt's tokens as it will see them; unless that changes the row's text: a
    SentencePiece response (Llama 2's, Mistral's) encoded alone starts a new text, with a
    space the row lacks ("hello " + "world" read as "hello  world"). Then prompt + response is
    read as one text and split where the response starts (``HFTokenizer.encode_split``)."""
    if tokenizer.kind != "hf":  # attnlab's own tokenizers: the parts join to the same text
        return tokenizer.encode(prompt), tokenizer.encode(response)
    apart = tokenizer.encode(prompt, add_special_tokens=True), tokenizer.encode(response)
    whole = tokenizer.encode_split(prompt + response, len(prompt))
    # what the tokenizer puts after every text (the eos of one that adds it: a GGUF file's
    # add_eos_token) ends the prompt, as generate reads it and as the prompt read apart ends,
    # not the response: the example's own eos ends that, once
    trailing = tokenizer.trailing_ids
    whole = [*whole[0], *trailing], whole[1][:len(whole[1]) - len(trailing)]
    same = tokenizer.decode([*apart[0], *apart[1]]) == tokenizer.decode([*whole[0], *whole[1]])
    return apart if same else whole


def padded(examples: list[Example], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs (B, T), targets (B, T)) of examples: inputs = ids[:-1], targets = labels[1:],
    padded on the right with ``pad`` and ``IGNORE``.

    Examples:
        >>> x, y = padded([([5, 6, 7], [-100, 6, 7]), ([5, 8], [-100, 8])], pad=0)
        >>> x.tolist(), y.tolist()
        ([[5, 6], [5, 0]], [[6, 7], [8, -100]])
    """
    T = max(len(ids) for ids, _ in examples) - 1
    inputs = torch.full((len(examples), T), pad, dtype=torch.long)
    targets = torch.full((len(examples), T), IGNORE, dtype=torch.long)
    for b, (ids, labels) in enumerate(examples):
        inputs[b, :len(ids) - 1] = torch.tensor(ids[:-1])
        targets[b, :len(ids) - 1] = torch.tensor(labels[1:])
    return inputs, targets


def example_batches(examples: list[Example], batch_size: int, steps: int, seed: int, pad: int):
    """``steps`` training batches: example k of the run (k = n·B + j for slot j of batch n) is
    row k mod N of epoch k // N's shuffle (seeded from (seed, epoch)); so every row is seen
    once an epoch, and batch n is a function of n (``numbered_batches``: DDP ranks and a
    resumed run take the numbers they are given)."""
    N = len(examples)

    @functools.lru_cache(maxsize=4)
    def order(epoch: int) -> list[int]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        return torch.randperm(N, generator=g).tolist()

    def batch(n: int):
        picks = [divmod(k, N) for k in range(n * batch_size, (n + 1) * batch_size)]
        return padded([examples[order(epoch)[i]] for epoch, i in picks], pad)

    return numbered_batches(batch, steps)


@torch.no_grad()
def assistant_loss(model, batches, finite: list[bool] | None = None) -> float:
    """The mean cross-entropy (nats) over every assistant token of ``batches`` (each token
    weighted equally, however the batches are cut): the run's ``val_loss``. ``finite``, when
    given, gets whether each example's loss is finite, in order (a run trained to NaN)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for inputs, targets in batches:
        logits = model(inputs)  # (B, T, V)
        losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                 reduction="none")  # (B * T,), 0 where ignored
        total += float(losses.sum())
        count += int((targets != IGNORE).sum())
        if finite is not None:
            finite += losses.view(targets.shape).sum(1).isfinite().tolist()  # (B,)
    model.train(was_training)
    return total / count


def evaluate_loss(cfg, model, tokenizer, data: str | None,
                  finite: list[bool] | None = None) -> float:
    """``attnlab evaluate`` of an instruction run: the held-out rows of its --data (the file
    checked against config.yaml's digest), or every row of another rows file ``data``;
    ``finite`` as ``assistant_loss``'s."""
    if data is None:
        check_data_files({"data": cfg.data}, cfg.data_sha256, purpose="evaluate")
        rows = read_rows(cfg.data, new=False)  # the rows it was trained on, as read then
        check_digest(cfg.data, rows.sha256, (cfg.data_sha256 or {}).get("data"), what="--data")
        which = holdout(len(rows.conversations), cfg.seed, where=f"--data {cfg.data}")[1]
    else:  # nothing trains on it: read as the run's own --data was (an empty user message)
        rows = read_rows(data, what="--data", new=False)
        which = list(range(len(rows.conversations)))
    examples = encode_rows(cfg, tokenizer, rows, which, say=True, measured=True, training=False)
    return assistant_loss(model, batched(examples, cfg.batch_size, tokenizer), finite)


class ChatSession:
    """A run's chat: a message (and system message) as the ids the model continues, through
    the run's chat template (its tokenizer.json's), and the ids that end the reply (eos and the
    template's end-of-turn token). ``attnlab generate RUN --chat`` and ``predict`` on a run
    trained on chat rows answer through it."""

    def __init__(self, tokenizer, run_dir: Path) -> None:
        self.theirs, self.run_dir = tokenizer.to_transformers(), run_dir
        end = end_of_turn_id(self.theirs)
        # the checkpoint's eos ids first, as ``attnlab generate DIR --chat`` stops
        # (``joined_stops``)
        self.stops = joined_stops(tokenizer.checkpoint_eos_ids, tokenizer.eos_id, end)

    def ids(self, message: str, system: str | None = None) -> list[int]:
        return chat_ids(self.theirs, conversation(message, system), self.run_dir)

    def reply(self, model, tokenizer, ids: list[int], max_new_tokens: int, *, label: str,
              finite: list[bool] | None = None) -> str:
        """The greedy reply after ``ids``: up to ``max_new_tokens`` tokens, cut at a stop id;
        ``finite``, when given, gets whether the logits of every step were finite (a run
        trained to NaN replies with the argmax of NaN rows: ``continue_prompt``)."""
        from .continuation import continue_prompt

        return continue_prompt(model, tokenizer, ids, max_new_tokens, greedy=True,
                               stop_ids=self.stops, label=label, finite=finite)


def chat_predictions(model, tokenizer, run_dir: Path, texts: list[str], labels: list[str],
                     n: int) -> list[dict[str, Any]]:
    """``predict`` on a run trained on chat rows: each text answered as the user's message."""
    from ..base import FINITE, each_input
    from .continuation import prediction_of

    session = ChatSession(tokenizer, run_dir)
    all_ids = each_input(texts, labels, session.ids)
    finite: list[bool] = []  # a run trained to NaN: no answer (``predicts``), one warning
    return [{**prediction_of(session.reply(model, tokenizer, ids, n, label=label,
                                           finite=finite)), FINITE: finite[-1]}
            for ids, label in zip(all_ids, labels)]
