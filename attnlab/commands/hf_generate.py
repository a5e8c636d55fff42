"""``attnlab generate DIR`` where DIR is a Hugging Face causal-LM directory (config.json, the
weights and the tokenizer's files) or a ``.gguf`` file (its tokenizer and chat template in its
metadata; ``attnlab.interop.gguf``) rather than an attnlab run.

The model is converted to attnlab's ``CausalLM`` by ``read_checkpoint(DIR, task="lm")``, the
conversion ``attnlab train lm --init DIR`` uses: a family it converts works here, and a
directory of another family is refused there, naming its ``model_type`` and the supported
ones. The tokenizer is the directory's own (``HFTokenizer``): ``--prompt`` is encoded as
``transformers``' ``tok(prompt)`` encodes it (special tokens such as a bos included) and the
continuation decoded as it reads after the prompt (``AfterPrompt``; special tokens skipped),
so ``--greedy`` prints what ``transformers``' greedy ``generate`` continues the prompt with.

``--chat TEXT`` (``--system TEXT``) renders the message with the checkpoint's chat template
and prints the assistant's reply alone, generation stopping at the template's end-of-turn
token (``attnlab.interop.chat``). Generation stops at the config's eos token(s) too, and at
the tokenizer's, which a note names where no config does (``transformers`` would go on).

The sampling settings not given as flags come from the directory's ``generation_config.json``
(do_sample, temperature, top_k, top_p: ``attnlab.interop.generation_config``), as
``transformers``' ``generate`` takes them, said in one note on stderr.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from .quantize import int8_slower
from .threads import use_threads

LM = "lm"  # the task whose conversion (--init's) reads the directory


def check_hf_flags(args) -> None:
    """The refusals of ``generate DIR`` with a Hugging Face directory or GGUF file that need
    neither its weights nor torch (``generate.run`` says them before it imports torch for
    --seed's generator): --checkpoint, and --chat without a chat template."""
    from ..interop.chat import check_chat_template
    from ..interop.gguf import check_gguf_chat_template, is_gguf

    directory = Path(args.run_dir)
    if args.checkpoint is not None:
        raise UsageError(f"--checkpoint {args.checkpoint}: {directory} is a Hugging Face model "
                         f"directory or GGUF file, which has no training checkpoints (an "
                         f"attnlab run has)")
    if args.chat is not None:  # before the model is read: it may take a while
        (check_gguf_chat_template if is_gguf(directory) else check_chat_template)(directory)


def from_directory(args, texts: list[str], labels: list[str], generator=None):
    """For ``attnlab generate DIR`` with a Hugging Face directory ``args.run_dir``: the inputs
    ``texts`` (prompts, or chat messages with ``--chat``) checked and encoded (each again as it
    is generated after: ``checked_ids``), the model loaded; ``generator``: the one sampling
    draws from (``input_generator``'s). Returns (each input's ids, ``produce(ids, write,
    label)``: the text generated after ``ids``, each piece passed to ``write`` as it comes),
    for ``print_outputs``."""
    from ..interop.chat import (chat_ids, check_system_kept, conversation, end_of_turn_id,
                                joined_stops, load_chat_tokenizer)
    from ..interop.gguf import is_gguf, load_gguf_tokenizer
    from ..tokenizers import note_unknown
    from .inputs import checked_ids

    directory = Path(args.run_dir)  # its flags checked before (``check_hf_flags``)
    chat_tokenizer, gguf = None, is_gguf(directory)
    if not gguf:  # a GGUF file holds no sampling defaults
        _sample_as_the_directory_says(directory, args)
    if args.chat is not None:  # its --system checked before the model is read
        chat_tokenizer = (load_gguf_tokenizer if gguf else load_chat_tokenizer)(directory)
        if args.system and args.system.strip():
            check_system_kept(chat_tokenizer, directory)
    model, tokenizer = _load(directory, args)
    if args.chat is not None:
        all_ids = checked_ids(texts, labels, lambda message: chat_ids(
            chat_tokenizer, conversation(message, args.system), directory))
    else:
        all_ids = checked_ids(texts, labels, lambda prompt: _encode(tokenizer, prompt))
        note_unknown(tokenizer, texts, labels)
        if not gguf:
            _note_tokenizer_stop(directory, tokenizer)
    end = end_of_turn_id(chat_tokenizer) if chat_tokenizer is not None else None
    # the checkpoint's eos ids as its tokenizer was read with them: generation_config.json's
    # (else config.json's), a GGUF file's eos, eot and eom ids (its metadata's)
    stops = joined_stops(tokenizer.checkpoint_eos_ids, tokenizer.eos_id, end)
    return all_ids, lambda ids, write, label: reply(model, tokenizer, ids, stops, args,
                                                     generator, write=write, label=label,
                                                     source=str(directory))


def _sample_as_the_directory_says(directory: Path, args) -> None:
    """The sampling settings the user did not give, from ``directory``'s
    ``generation_config.json`` (``transformers``' ``generate`` reads them there too), set on
    ``args``; one line on stderr saying what came from the file and what it asks for that
    attnlab does not do. Refuses a value out of range before the model is read."""
    import sys

    from ..interop.generation_config import read_sampling, resolve

    taken, note = resolve(args.given, read_sampling(directory))
    for name, value in taken.items():
        setattr(args, name, value)
    if note:
        print(note, file=sys.stderr, flush=True)


def _note_tokenizer_stop(directory: Path, tokenizer) -> None:
    """One line on stderr where generation stops at a token ``transformers``' ``generate``
    does not stop at: the tokenizer's eos, when it is not among the eos ids
    generation_config.json or config.json names (``generate`` stops only at those, and writes
    on after it). attnlab stops there all the same: the tokenizer's eos ends a text, and what a
    model writes after it belongs to no text of the prompt."""
    import sys

    from ..interop.chat import config_eos_ids

    named = config_eos_ids(directory)
    if tokenizer.eos_id is None or tokenizer.eos_id in named:
        return
    (name,) = tokenizer.labels([tokenizer.eos_id], skip_special_tokens=False)
    which = (f"which is not among the eos ids {named} that generation_config.json or "
             f"config.json of {directory} names" if named else
             f"which neither generation_config.json nor config.json of {directory} names")
    print(f"note: generation stops at the tokenizer's eos token {name} (id "
          f"{tokenizer.eos_id}), {which}: transformers' generate would write on past it, to "
          f"--max-new-tokens",
          file=sys.stderr, flush=True)


def _load(directory: Path, args):
    """The directory's model (eval mode; int8 with --quantize) and tokenizer."""
    from ..interop.checkpoint import read_checkpoint
    from ..nn.quantize import quantized

    # --quantize int8 quantises float32 linear layers (--dtype other than float32 is refused)
    checkpoint = read_checkpoint(directory, task=LM,
                                 dtype="float32" if args.quantize else args.dtype)
    use_threads(args, "one", directory)  # one input at a time, token by token
    slower = int8_slower(LM, int(checkpoint.config.model_dim)) if args.quantize else None
    if slower:
        import sys

        print(f"note: {slower}", file=sys.stderr, flush=True)
    return quantized(checkpoint.model, args.quantize), checkpoint.tokenizer


def _encode(tokenizer, prompt: str) -> list[int]:
    """``prompt``'s ids with the checkpoint's special tokens (``tok(prompt)``'s): the one rule
    of a prompt, ``prompt_ids``, which a run from the checkpoint reads by too."""
    from ..tasks.lm.continuation import prompt_ids

    return prompt_ids(tokenizer, prompt, "--input")  # each_input names it


def reply(model, tokenizer, ids: list[int], stops: list[int], args, generator, *,
          write=None, label: str = "--prompt", source: str | None = None,
          finite: list[bool] | None = None) -> str:
    """The text generated after ``ids`` up to --max-new-tokens tokens, any id of ``stops``
    (not printed) or a --stop string (cut before it); each printable piece is passed to
    ``write`` as it comes. Past the model's positions the window slides, as for a run: the
    one loop of ``continue_prompt``, with the checkpoint's stop ids (``source``: the
    checkpoint, None for a run); ``finite`` as ``continue_prompt`` takes it."""
    from ..tasks.lm.continuation import AfterPrompt, continue_prompt

    if args.chat is None:  # the text goes on from the prompt printed before it
        tokenizer = AfterPrompt(tokenizer, ids)
    return continue_prompt(model, tokenizer, ids, args.max_new_tokens, greedy=args.greedy,
                           temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                           generator=generator, stops=args.stop, write=write, label=label,
                           stop_ids=stops, source=source, finite=finite)
