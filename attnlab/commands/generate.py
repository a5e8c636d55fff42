r"""``attnlab generate DIR --prompt TEXT``: continue a prompt with a trained language model,
printing the text as it is produced. ``--input-file FILE`` (``-``: standard input) continues
one prompt per line and prints one line per prompt (prompt and continuation, with newlines,
tabs and backslashes written as ``\n``, ``\t``, ``\\``), or with ``--json`` a JSON object per
line. Never imports Lightning.

DIR is an ``attnlab train lm`` run, or a Hugging Face causal-LM directory or GGUF file
(``hf_generate``):
its model converted as ``--init`` converts it, with its own tokenizer, sampling as its
``generation_config.json`` says where no flag says otherwise. ``--chat TEXT``
(``--system TEXT``) answers a message through the checkpoint's chat template, and
``--input-file FILE --chat`` answers one message per line: on a checkpoint, or on a run whose
tokenizer kept the chat template of the checkpoint it was trained from."""
from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from ..interop.source import LOAD_DTYPES
from ..settings import (GenerationSettings, ModelRunSettings, add_flags, check_options,
                        seed_setting, setting)
from .checkpoint import add_checkpoint_flag
from .inputs import (add_input_file_flags, check_utf8, checked_ids, json_line, one_or_file,
                     stop_said)
from .quantize import add_quantize_flag, note_if_slower
from .threads import use_threads

# --stop's escapes (a shell passes "\n" as a backslash and an n; the docs' --stop "\n\n"
# means a blank line). Any other backslash is refused rather than kept: a stop string that
# silently never matches would let generation run on.
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
_HEX4 = re.compile("[0-9a-fA-F]{4}")
SEEDS = 2**32  # --seed's range (``seed_setting``)


@dataclass
class GenerateOptions(GenerationSettings, ModelRunSettings):
    """``attnlab generate``'s flags: the generation's length and how its next tokens are
    chosen (the library's declaration, ``GenerationSettings``), --threads, and these."""

    seed: int = seed_setting(None, help="seed for reproducible sampling; with --input-file, "
                                        "input number k is sampled with seed S+k-1 (mod "
                                        "2^32), so --prompt with that --seed writes its "
                                        "text again")
    greedy: bool = setting(False, help="argmax decoding instead of sampling (--no-greedy: "
                                       "sample where DIR's generation_config.json says "
                                       "do_sample false)")
    # "auto" as transformers 5's from_pretrained: the checkpoint's own dtype (bf16 for most
    # published ones), read straight into the model, so it takes the memory it takes on disk
    dtype: str = setting("auto", choices=LOAD_DTYPES,
                         help="the model's weights and arithmetic: auto (the checkpoint's own "
                              "dtype; float32 for an attnlab run), bfloat16, float16 or "
                              "float32; --quantize int8 runs float32")


# `--input-file FILE --chat`: --chat without TEXT, the messages being the file's lines
CHAT_LINES = "(one message per line of --input-file)"

# what --greedy makes pointless: given with it, they are refused
SAMPLING_FLAGS = ("temperature", "top_k", "top_p", "seed")
# the flags a checkpoint's generation_config.json stands in for when they are not given
# (``attnlab.interop.generation_config.resolve``)
FILE_DEFAULTED = ("greedy", "temperature", "top_k", "top_p")


def register(sub) -> None:
    p = sub.add_parser(
        "generate", help="continue a prompt with a trained lm run or a Hugging Face model "
                         "directory; chat with an instruct model (streams the text)",
        description="Continue --prompt with the language model of an `attnlab train lm` run "
                    "or of a Hugging Face causal-LM directory (config.json, weights, tokenizer "
                    "files) or .gguf file (nothing is downloaded), printing each piece of text as soon as it "
                    "is generated. With a directory whose tokenizer has a chat template, --chat "
                    "TEXT answers TEXT as the assistant and prints the reply alone. Samples by "
                    "default (--temperature, --top-k, --top-p); --greedy takes the most likely "
                    "token each step. A directory's generation_config.json sets the ones not "
                    "given, as its authors set it; a note says which, and where "
                    "transformers' defaults decode it otherwise.")
    p.add_argument("run_dir", metavar="DIR").path_kind = "directory or .gguf file"
    p.add_argument("--prompt", metavar="TEXT")
    p.add_argument("--chat", nargs="?", const=CHAT_LINES, metavar="TEXT",
                   help="a DIR with a chat template (a checkpoint's, or a run's trained from "
                        "one): answer TEXT as the assistant "
                        "(the template applied, stopping at its end-of-turn token) and print "
                        "the reply alone; with --input-file and no TEXT, one message per line")
    p.add_argument("--system", metavar="TEXT", help="the system message of --chat")
    add_flags(p, GenerateOptions)
    p.add_argument("--stop", action="append", metavar="S", default=[],
                   help=r"stop before this text appears (repeatable); \n is a newline, \t a "
                        r"tab, \r a carriage return, \\ a backslash, \uXXXX the character of "
                        r"four hex digits (--stop '\n\n' stops at a blank line); any other "
                        r"backslash escape is an error")
    add_input_file_flags(p, "prompt")
    add_quantize_flag(p)
    add_checkpoint_flag(p)
    p.set_defaults(func=run)


def _check(args) -> None:
    from ..errors import UsageError

    for flag in ("--prompt", "--chat", "--system", "--stop"):
        value = getattr(args, flag[2:])
        for text in value if isinstance(value, list) else [value]:
            check_utf8(text, flag)
    # --greedy would ignore every sampling option without a word: refuse them together
    sampling = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in SAMPLING_FLAGS
                if getattr(args, name) is not None]
    if args.greedy and sampling:
        raise UsageError(f"--greedy takes the most likely token, so {', '.join(sampling)} "
                         f"would do nothing: drop {'it' if len(sampling) == 1 else 'them'}, or "
                         f"drop --greedy to sample")
    _check_chat(args)
    # before the defaults; --seed too: given, it means sampling (the file has no key for it)
    args.given = {name: getattr(args, name) for name in (*FILE_DEFAULTED, "seed")}
    check_options(args, GenerateOptions)  # the temperature's floor included (SamplingSettings)
    if args.quantize and args.dtype not in ("auto", "float32"):
        raise UsageError(f"--dtype {args.dtype}: --quantize {args.quantize} multiplies int8 "
                         f"weights in float32 (PyTorch's int8 kernels); drop one of them")
    args.stop = [unescape(s) for s in args.stop]
    if any(not s for s in args.stop):
        raise UsageError("--stop must not be empty")


def _check_chat(args) -> None:
    """--chat and --system against --prompt and each other; a blank message refused, but for
    --system '' (an empty system turn, in place of a chat template's default system prompt,
    as a run trained on rows with an empty system message was)."""
    from ..errors import UsageError
    from ..tasks.base import refuse_blank

    if args.system is not None and args.chat is None:
        raise UsageError("--system is the system message of a chat: give it with --chat")
    if args.chat is not None and args.prompt is not None:
        raise UsageError("give --prompt TEXT (continue a text) or --chat TEXT (the assistant's "
                         "reply to it), not both")
    if args.chat is not None:
        refuse_blank(args.chat, "--chat")
    if args.system and not args.system.strip():
        raise UsageError("--system is blank; give it text, or --system '' for an empty system "
                         "turn (in place of the chat template's default one)")


def inputs(args) -> tuple[list[str], list[str]]:
    """(the prompts or chat messages, their labels): --prompt's or --chat's one text, or the
    lines of --input-file."""
    if args.chat is None:
        return one_or_file(args.prompt, "--prompt", args.input_file, args.input_column,
                           command="generate")
    return one_or_file(None if args.chat is CHAT_LINES else args.chat, "--chat", args.input_file,
                       args.input_column, command="generate")


def unescape(text: str, flag: str = "--stop") -> str:
    r"""``text`` with ``\n``, ``\t``, ``\r``, ``\\`` and ``\uXXXX`` (four hex digits, as
    ``escape`` writes them) turned into the characters they name; ``UsageError`` naming any
    other escape (or a lone backslash at the end).

    Examples:
        >>> unescape(r"\n\n")
        '\n\n'
    """
    from ..errors import UsageError

    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1: i + 2]
        if nxt == "u" and _HEX4.fullmatch(text[i + 2: i + 6]):  # escape()'s \uXXXX
            out.append(chr(int(text[i + 2: i + 6], 16)))
            i += 6
            continue
        if nxt not in ESCAPES:
            shown = f"unknown escape '\\{nxt}'" if nxt else "a lone '\\' at the end"
            raise UsageError(f"{flag}: {shown}; use \\n (newline), \\t (tab), \\r (carriage "
                             f"return), \\\\ (a backslash) or \\uXXXX (the character of "
                             f"four hex digits)")
        out.append(ESCAPES[nxt])
        i += 2
    return "".join(out)


def continuation(model, tokenizer, ids: list[int], args, generator, write=None,
                 label: str = "--prompt", finite: list[bool] | None = None) -> str:
    """The text generated after the prompt ``ids`` (cut before any --stop string); each piece
    is passed to ``write`` as soon as it is printable (``continue_prompt``, which ``predict``
    on an lm run goes through too). The text is printed after the prompt, so it is decoded as
    it reads after it (``AfterPrompt``: a run from a SentencePiece checkpoint keeps the space
    before its first word, as ``attnlab generate DIR`` does)."""
    from ..tasks.lm.continuation import AfterPrompt, continue_prompt

    return continue_prompt(model, AfterPrompt(tokenizer, ids), ids, args.max_new_tokens,
                           greedy=args.greedy, temperature=args.temperature, top_k=args.top_k,
                           top_p=args.top_p, generator=generator, stops=args.stop, write=write,
                           label=label, finite=finite)


def escape(text: str) -> str:
    r"""``text`` on one line: a backslash, newline, tab or carriage return written as ``\\``,
    ``\n``, ``\t`` or ``\r``, any other character ``str.splitlines`` ends a line at (U+2028,
    NEL, a form feed) as ``\uXXXX`` (what ``unescape`` reads back).

    Examples:
        >>> print(escape("a\\b\n\tc\u2028d"))
        a\\b\n\tc\u2028d
        >>> unescape(escape("x\n\\ny\x85")) == "x\n\\ny\x85"
        True
    """
    inverse = {v: "\\" + k for k, v in ESCAPES.items()}
    return "".join(inverse.get(c, f"\\u{ord(c):04x}" if c.splitlines() == [""] else c)
                   for c in text)


def run(args) -> int:
    from ..interop.chat import is_hf_directory
    from ..interop.gguf import is_gguf
    from ..loading import check_run_dir, tasks_that

    _check(args)
    texts, labels = inputs(args)
    if is_hf_directory(args.run_dir) or is_gguf(args.run_dir):  # a checkpoint, not a run
        from .hf_generate import check_hf_flags, from_directory

        check_hf_flags(args)  # before --seed's generator imports torch
        generator = input_generator(args.seed)
        all_ids, produce = from_directory(args, texts, labels, generator)
        chatting = args.chat is not None  # the reply alone, not the message before it
        print_outputs(args, texts, labels, all_ids, produce,
                      key="chat" if chatting else "prompt", echo=not chatting,
                      generator=generator)
        return 0
    run_dir, cfg = check_run_dir(args.run_dir, command="generate", checkpoint=args.checkpoint,
                                 tasks=tasks_that(lambda task: task.capabilities.encode_prompt))
    if args.chat is not None:  # before the model is read
        _check_run_chat(run_dir, args.system)
    _note_init_defaults(run_dir, cfg, args)
    import torch

    from ..loading import weights_from
    from ..tasks import get_task
    from ..tasks.base import set_options
    from ..tokenizers import note_unknown

    use_threads(args, "one", run_dir)  # one prompt at a time, token by token
    task = get_task(cfg.task)
    runtime = task.runtime()
    note_if_slower(args.quantize, cfg.task, cfg)  # one prompt at a time: batch 1 each
    with weights_from(run_dir, cfg, args.checkpoint, say=True):
        model, tokenizer = runtime.load(task, run_dir, cfg, **set_options(quantize=args.quantize))
    if args.dtype not in ("auto", "float32"):  # a run's weights are float32 ("auto")
        from ..interop.weights import TORCH_DTYPES

        model = model.to(TORCH_DTYPES[args.dtype])
    generator = input_generator(args.seed)
    finite: list[bool] = []  # per input: whether its every step's logits were finite
    nan = NaNTexts(finite, run_dir)
    if args.chat is not None:  # a run trained from a checkpoint with a chat template
        _chat(args, model, tokenizer, run_dir, texts, labels, generator, nan)
        return 0
    all_ids = checked_ids(texts, labels,
                          lambda p: runtime.encode_prompt(task, tokenizer, p, what="--input"))
    note_unknown(tokenizer, texts, labels)  # the model continues what it read
    print_outputs(args, texts, labels, all_ids, lambda ids, write, label: continuation(
        model, tokenizer, ids, args, generator, write=write, label=label, finite=finite),
        generator=generator, nan=nan)
    return 0


def _check_run_chat(run_dir, system: str | None) -> None:
    """The run's chat template, and that it keeps a --system message, checked from its
    tokenizer.json before the model is read."""
    from ..interop.chat import check_chat_template, check_system_kept
    from ..interop.hf_tokenizer import HFTokenizer

    check_chat_template(run_dir)
    if system and system.strip():
        saved = HFTokenizer.load(f"{run_dir}/tokenizer.json")
        check_system_kept(saved.to_transformers(), run_dir)


def _chat(args, model, tokenizer, run_dir, texts, labels, generator, nan: NaNTexts) -> None:
    """``generate RUN --chat``: each input the user's message, the reply alone printed."""
    from ..tasks.lm.instruct import ChatSession
    from .hf_generate import reply

    session = ChatSession(tokenizer, run_dir)
    all_ids = checked_ids(texts, labels, lambda message: session.ids(message, args.system))
    print_outputs(args, texts, labels, all_ids, lambda ids, write, label: reply(
        model, tokenizer, ids, session.stops, args, generator, write=write, label=label,
        finite=nan.finite), key="chat", echo=False, generator=generator, nan=nan)


class NaNTexts:
    """Whether the text just generated came from logits that were not finite (a run trained
    to NaN: each such token is the argmax of a NaN row, as sure as any text), read from
    ``finite`` (``continue_prompt`` appends one entry per input), and the one warning of
    predict's and evaluate's (``say_nan``), said as each such input is found, so that an
    interrupted file run says it too."""

    def __init__(self, finite: list[bool], run_dir) -> None:
        self.finite, self.run_dir = finite, run_dir

    def said(self, label: str, inputs: int, *, json: bool) -> bool:
        """True (and the warning said, of one more of ``inputs``) when the last input's
        logits were not finite; with ``json`` its text is null, as predict --json's answer."""
        from ..tasks.base import say_nan

        if not self.finite or self.finite[-1]:
            return False
        say_nan(self.run_dir, 1, inputs, label, "their text is null" if json else
                "their text is the argmax of NaN scores, not the model's")
        return True


def _note_init_defaults(run_dir, cfg, args) -> None:
    """A run keeps its --init DIR's weights, tokenizer and chat template, not DIR's sampling
    defaults (training changed the distribution they were chosen for), so it decodes by
    attnlab's. When DIR is still there and its generation_config.json would decode otherwise,
    one note on stderr names the flags that decode as DIR says, and, as ``generate DIR``'s
    note does, where transformers' defaults decode DIR otherwise than that."""
    from ..errors import UsageError
    from ..interop.chat import is_hf_directory
    from ..interop.generation_config import (FILE, as_flags, read_sampling, resolve,
                                             transformers_differs)

    init = getattr(cfg, "init", None)
    if not init or not is_hf_directory(init):
        return
    try:
        file = read_sampling(init)
        taken, _ = resolve(args.given, file)
    except UsageError:  # advice only: a file broken since training stops nothing here
        return
    parts = [f"give {as_flags(taken)} to decode as it says"] if taken else []
    differs = transformers_differs(args.given, file) if file is not None else None
    if differs:  # the same words as `generate DIR`'s note
        parts.append(differs.format(file="it"))
    if parts:
        print(f"note: {run_dir} decodes by attnlab's defaults, not by --init {init}'s {FILE}; "
              + "; ".join(parts), file=sys.stderr, flush=True)


def input_generator(seed: int | None):
    """The random generator of sampling (None without --seed: torch's global one), which
    ``print_outputs`` seeds again for each input."""
    if seed is None:  # torch not imported yet: --chat on a directory without a template is
        return None   # refused before it is (hf_generate.check_hf_flags)
    import torch

    return torch.Generator().manual_seed(seed)


def print_outputs(args, texts: list[str], labels: list[str], all_ids: Iterable[list[int]],
                  produce, *, key: str = "prompt", echo: bool = True, generator=None,
                  nan: NaNTexts | None = None) -> None:
    """Print what ``produce(ids, write, label)`` generates after each input's ``ids``: one
    input streamed (after the input itself when ``echo``), else one line per input (escaped,
    or with --json an object of the input under ``key`` and the generated ``"text"``:
    ``json_line``). ``generator`` (``input_generator``'s, the one ``produce`` samples with)
    is seeded with --seed S + k - 1 (mod 2**32) before input number k, so that an input's sample does not
    depend on the inputs before it: given alone with that seed, it is the same text. ``nan``
    says which texts came from NaN logits (a run's), said once (``NaNTexts``); with --json
    their text is null."""
    if args.input_file is None and not args.json:  # one input: stream it
        if echo:
            sys.stdout.write(texts[0])
        produce(next(iter(all_ids)), _write_now, labels[0])
        sys.stdout.write("\n")
        sys.stdout.flush()
        if nan is not None:
            nan.said(labels[0], 1, json=False)
        return
    from ..notes import said_once

    rows = zip(texts, all_ids, labels)
    with said_once(len(texts)):  # a note of each kind (a prompt cut) once, of all the inputs
        for k in range(len(texts)):
            # a stop, or a chunk of a file changed since it was checked: what the output holds
            with stop_said(k, len(texts)):
                text, ids, label = next(rows)
                # within --seed's range, where a seed reaches past its end
                if generator is not None:
                    generator.manual_seed((args.seed + k) % SEEDS)
                out = produce(ids, None, label)
                if nan is not None and nan.said(label, len(texts), json=args.json) and args.json:
                    out = None  # null, as predict --json answers an input of NaN outputs
            with stop_said(k, len(texts), writing=1):
                print(json_line({key: text, "text": out}) if args.json
                      else escape(text + out if echo else out), flush=True)


def _write_now(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()
