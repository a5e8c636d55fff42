"""A language model's continuation of one prompt, as text: the one path of ``attnlab
generate`` (on a run, a Hugging Face directory or a GGUF file) and of ``attnlab predict`` on an
lm run (``--greedy`` there is predict's only way).

The tokens come from ``CausalLM.stream(..., slide=True)``: past the context length the window
slides (its last half kept and re-read), so a prompt and its continuation may be longer than
the block size; a prompt longer than the model reads is cut to its end, and ``note_cut`` says
so. ``StopStreamer`` turns the ids into printable text as they arrive, cut before any stop
string.

Shapes: T0 prompt length, max_len the model's context length (--block-size).
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from ..base import one_line

__all__ = ["StopStreamer", "AfterPrompt", "whole_end", "prompt_ids", "continue_prompt",
           "prompt_read", "note_cut", "prompt_end", "prediction_of"]


def prediction_of(text: str) -> dict[str, str]:
    """``predict``'s result for a continuation ``text``: ``--json`` gives the text as generated
    (as ``generate --json`` does), and the printed line has each line end as a space (``\\n``,
    ``\\r\\n``, a lone ``\\r``, which a terminal would print over the line's start, U+2028),
    so that one input is one line of output.

    Examples:
        >>> prediction_of("the\\r\\ncoffee\\rtea\\u2028milk\\n")["line"]
        'the coffee tea milk '
    """
    return {"prediction": text, "line": one_line(text)}


class StopStreamer:
    """Turns generated ids into printable text as they arrive, cut before any stop string.

    Text is held back while it could still be the start of a stop string, and while it ends
    in an incomplete multi-byte character (a byte-level BPE piece decodes to U+FFFD until the
    rest of its bytes arrive), and while the ids it comes from may still read otherwise
    (``Tokenizer.unsettled``: SentencePiece's run of byte pieces, decoded together; and
    ``unsettled_chars``: the end a clean-up may change), so that
    the pieces printed join into the text decoded from all the ids at once. A stop string may start in ``before``, the text the new one
    follows (the prompt's end, ``prompt_end``): then nothing is printed, as the stop string
    appears as soon as the text completes it ("le caf" with --stop "fé").
    """

    def __init__(self, tokenizer, stops: list[str], before: str = "") -> None:
        # in the text's form: an attnlab tokeniser decodes to its normal form (NFC), so a stop
        # string typed decomposed would never be found
        form = getattr(tokenizer, "normalized", None)
        self.tokenizer, self.stops = tokenizer, [form(s) for s in stops] if form else stops
        self.ids: list[int] = []
        self.printed = 0
        self.hold = max((len(s) for s in self.stops), default=1) - 1  # as searched: ﬁ→fi
        self.before = before[-self.hold:] if self.hold else ""  # (a prompt shorter: whole)
        self.stopped = False

    def add(self, token: int) -> str:
        """The new printable text after ``token``; sets ``stopped`` at a stop string. An id past
        the tokenizer's (a pretrained model's embedding rows beyond its vocabulary, as GPT-2
        checkpoints pad it) has no text, as ``transformers`` decodes it."""
        if token < self.tokenizer.vocab_size:
            self.ids.append(token)
        text = self.tokenizer.decode(self.ids)
        # searched after ``before``, each stop string where it would end past the text printed
        b, joined = len(self.before), self.before + text
        hits = [i for i in (joined.find(s, max(0, b + self.printed - len(s) + 1))
                            for s in self.stops) if i >= 0]
        if hits:
            self.stopped = True
            return self._emit(text, max(0, min(hits) - b))
        end = len(text) - max(self.hold, self.tokenizer.unsettled_chars)
        while end > self.printed and text[end - 1] == "\ufffd":
            end -= 1
        # the text of ids the next ones may change (SentencePiece's bytes: ``unsettled``)
        if unsettled := self.tokenizer.unsettled(self.ids):
            end = min(end, len(self.tokenizer.decode(self.ids[:-unsettled])))
        return self._emit(text, end)

    def flush(self) -> str:
        return "" if self.stopped else self._emit(self.tokenizer.decode(self.ids), None)

    def _emit(self, text: str, end: int | None) -> str:
        end = len(text) if end is None else end
        piece = text[self.printed:end] if end > self.printed else ""
        self.printed = max(self.printed, end)
        return piece


class AfterPrompt:
    """``tokenizer``'s text of new ids as it reads after the prompt ``prompt`` (its ids).

    A SentencePiece-style tokenizer (Llama 2, Mistral) writes a word's leading space as part of
    its token and drops the space that starts a decoded text, so the continuation decoded
    alone would be glued to the prompt ("the cat" + "sat"): decoded after the prompt's last
    ids and cut after them, it keeps its space ("the cat" + " sat"), as ``transformers``'
    ``decode`` of the whole output does. A byte-level BPE (GPT-2, Llama 3, Qwen) decodes the
    same either way. Those last ids start where a character does (``whole_end``): their byte
    pieces must not join the new ones into bytes that are no text.
    """

    def __init__(self, tokenizer, prompt: list[int]) -> None:
        self.tokenizer, self.context = tokenizer, whole_end(tokenizer, prompt)
        self.vocab_size, self.eos_id = tokenizer.vocab_size, tokenizer.eos_id
        self.checkpoint_eos_ids = getattr(tokenizer, "checkpoint_eos_ids", [])
        self.unsettled_chars = tokenizer.unsettled_chars
        # the tokenizer's normal form, if it has one: StopStreamer puts --stop strings in it
        self.normalized = getattr(tokenizer, "normalized", None)
        self.before = tokenizer.decode(self.context)

    def unsettled(self, ids: list[int]) -> int:
        """``tokenizer.unsettled`` of ``ids`` read after the prompt (at most all of them)."""
        return min(len(ids), self.tokenizer.unsettled([*self.context, *ids]))

    def decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode([*self.context, *ids])
        return text[len(self.before):] if text.startswith(self.before) else self.tokenizer.decode(ids)


# the most bytes a character takes in UTF-8, so the most byte pieces it is spelt in
UTF8_MAX_BYTES = 4


def whole_end(tokenizer, ids: list[int], least: int = 1) -> list[int]:
    """The fewest last ``ids`` (``least`` at least) whose text starts with a whole character,
    not with the last bytes of one (U+FFFD). A SentencePiece tokenizer with byte pieces
    (Llama 2, Mistral: "<0x80>") decodes a run of them together, one U+FFFD for each byte
    when they are no UTF-8: after the last byte of a prompt's "😀" alone, the "😀" that
    follows it would read "����".

    Examples:
        >>> from attnlab.tokenizers import BPETokenizer
        >>> tok = BPETokenizer.fit(["x"], vocab_size=260)
        >>> ids = tok.encode("a\u00e9")  # "a" and the two bytes of "é"
        >>> whole_end(tok, ids) == ids[1:]
        True
    """
    least = min(least, len(ids))
    for n in range(least, min(len(ids), least + UTF8_MAX_BYTES - 1) + 1):
        if not tokenizer.decode(ids[-n:]).startswith("\ufffd"):
            return ids[-n:]
    return ids[-least:]


def prompt_ids(tokenizer, text: str, what: str = "--prompt") -> list[int]:
    """The ids a language model continues ``text`` from. A checkpoint's own tokenizer (kind
    "hf") adds what it adds around every text, as ``tok(text)`` does: Llama's and Mistral's
    bos first (GPT-2 and Qwen add nothing). So a run from ``--init`` reads a prompt as its
    checkpoint was trained to, and as ``attnlab generate DIR`` and ``transformers`` on its
    export read it. attnlab's own tokenizers add nothing.

    Raises:
        UsageError: naming ``what`` when ``text`` itself encodes to no token (a bos alone is
            no prompt to continue).

    Examples:
        >>> from attnlab.tokenizers import CharTokenizer
        >>> tok = CharTokenizer.fit(["ab"])
        >>> prompt_ids(tok, "ab") == tok.encode("ab")
        True
    """
    from ...errors import UsageError

    if not tokenizer.encode(text):
        raise UsageError(f"{what} is empty; give some text to continue")
    if tokenizer.kind == "hf":
        return tokenizer.encode(text, add_special_tokens=True)
    return tokenizer.encode(text)


def prompt_read(prompt_tokens: int, max_len: int) -> int:
    """How many of a prompt's last tokens the model reads: all of them up to max_len - 1 (room
    for the first new token), as ``CausalLM.stream(..., slide=True)`` cuts a longer one.

    Examples:
        >>> prompt_read(5, 32), prompt_read(40, 32)
        (5, 31)
    """
    return min(prompt_tokens, max_len - 1)


def note_cut(prompt_tokens: int, max_len: int, label: str, source: str | None = None) -> None:
    """One line on stderr when the prompt ``label`` names is longer than the model reads: the
    limit named as a run's --block-size, or as the context length of ``source`` (a Hugging
    Face directory or GGUF file, which has no --block-size). Many prompts continued within
    ``said_once`` (``generate --input-file``): one line, naming the first such prompt and how
    many there are (``say``)."""
    from ...notes import say

    read = prompt_read(prompt_tokens, max_len)
    if read < prompt_tokens:
        limit = f"--block-size {max_len}" if source is None else \
            f"{source}'s context length, {max_len}"
        first = (f"note: {label} has {prompt_tokens} tokens; the model reads its last {read} "
                 f"({limit})")
        say("cut prompt", 1, lambda count, inputs: first if count == 1 else (
            f"{first}; and {count - 1:,} more of the {inputs:,} prompts, each cut to its last "
            f"{read}"), 1)


def prompt_end(tokenizer, ids: list[int], stops: list[str] | None) -> str:
    """The text at the end of the prompt ``ids`` that a stop string may begin in: at least as
    many characters as the longest stop string has (each in at most ``UTF8_MAX_BYTES`` tokens:
    a byte-level piece may hold one byte of a character), from where a character starts
    (``whole_end``), when ``tokenizer`` prints text after the prompt (``AfterPrompt``); else
    none (a chat's reply is printed alone: a stop string starts within it)."""
    if not stops or not isinstance(tokenizer, AfterPrompt):
        return ""
    form = getattr(tokenizer, "normalized", None) or (lambda s: s)
    characters = max(len(form(s)) for s in stops)
    return tokenizer.tokenizer.decode(whole_end(tokenizer.tokenizer, ids,
                                                least=UTF8_MAX_BYTES * characters))


def text_stops(tokenizer) -> list[int]:
    """The ids that end a text generated without a chat: the eos ids of the checkpoint a run
    from ``--init`` was made from (``HFTokenizer.checkpoint_eos_ids``: Llama 3's several), and
    the tokenizer's own eos, each once, as ``transformers``' ``generate`` stops."""
    from ...interop.chat import joined_stops

    return joined_stops(getattr(tokenizer, "checkpoint_eos_ids", []), tokenizer.eos_id, None)


def continue_prompt(model, tokenizer, ids: list[int], max_new_tokens: int, *,
                    greedy: bool = True, temperature: float = 1.0,
                    top_k: int | None = None, top_p: float | None = None,
                    generator: torch.Generator | None = None, stops: list[str] | None = None,
                    write: Callable[[str], None] | None = None, label: str = "--prompt",
                    stop_ids: list[int] | None = None, source: str | None = None,
                    finite: list[bool] | None = None) -> str:
    """The text a ``CausalLM`` generates after the prompt ``ids``, up to ``max_new_tokens``
    tokens, a stop id or a stop string (cut before it); each piece is passed to ``write`` as
    soon as it is printable. A prompt longer than the model reads is cut to its end, said on
    stderr naming ``label``, and past the context length the window slides.

    Args:
        stops: strings that end the text, cut before the first one found.
        stop_ids: ids that end generation, not printed: a checkpoint's eos ids and a chat
            template's end-of-turn (``attnlab generate DIR``); default ``text_stops``: the
            tokenizer's EOS, and those of the checkpoint a run from ``--init`` was made from.
        source: the Hugging Face directory or GGUF file the model is (``note_cut``).
        finite: when given, gets whether the logits of every step were finite (one entry: a
            model trained to NaN writes the argmax of NaN rows, as sure as any text).
    """
    note_cut(len(ids), model.max_len, label, source)
    steps_finite: list[bool] = []  # one entry per window the stream read
    ends = text_stops(tokenizer) if stop_ids is None else stop_ids
    stream = model.stream(torch.tensor([ids]), max_new_tokens, do_sample=not greedy,
                          temperature=temperature, top_k=top_k, top_p=top_p,
                          eos_token_id=ends or None, generator=generator,
                          slide=True,  # past the context length: keep its last half
                          **({} if finite is None else {"finite": steps_finite}))
    # a stop string may begin in the prompt, after which the text is printed
    out, pieces = StopStreamer(tokenizer, stops or [], before=prompt_end(tokenizer, ids, stops)), []
    try:
        for token in stream:
            t = int(token[0, 0])
            if t in ends:
                break
            pieces.append(out.add(t))
            if write is not None:
                write(pieces[-1])
            if out.stopped:
                break
    except KeyboardInterrupt:  # Ctrl-C: the text held back (a run of bytes) is printed too
        if write is not None:
            write(out.flush())
        raise
    stream.close()  # its watch has read every step taken (``steps_finite``)
    if finite is not None:
        finite.append(all(steps_finite))
    pieces.append(out.flush())
    if write is not None:
        write(pieces[-1])
    return "".join(pieces)
