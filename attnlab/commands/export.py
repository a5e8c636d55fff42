"""``attnlab export DIR --hf OUT``: a trained run as a Hugging Face model directory.

OUT holds what ``transformers``' ``from_pretrained`` reads — ``config.json``, the weights and
the tokenizer — with the run's logits:

- an lm run becomes a ``GPT2LMHeadModel``, or the Llama family's ``*ForCausalLM`` that holds
  its parts (``AutoModelForCausalLM.from_pretrained(OUT)``), and its tokenizer
  (``AutoTokenizer.from_pretrained(OUT)``);
- a translate run (``--arch transformer``) becomes a ``MarianMTModel``
  (``AutoModelForSeq2SeqLM``) with the source tokenizer in OUT and the target tokenizer in
  ``OUT/target_tokenizer`` (decode the generated ids with it), and the run's beams, length
  penalty and longest translation in its ``generation_config.json`` (``DECODING``); a run
  started from a Marian checkpoint (``--init``) has Marian's one tokenizer, written as
  Marian's files (``source.spm``, ``target.spm``, ``vocab.json``, ``tokenizer_config.json``:
  ``MarianTokenizer.from_pretrained(OUT)``);
- a classify run from ``--init`` of a BERT-family checkpoint becomes its family's
  ``*ForSequenceClassification`` (``AutoModelForSequenceClassification``; ``id2label`` the
  run's labels) with the checkpoint's tokenizer (``attnlab.interop.bert_classify``). A run
  pooled by the mean of its tokens (its encoder had no pooler) is refused: every Hugging Face
  head reads the first token;
- a tag run from ``--init`` of a BERT-family checkpoint becomes its family's
  ``*ForTokenClassification`` (``AutoModelForTokenClassification``; ``id2label`` the run's
  tags) with the checkpoint's tokenizer. A tag or classify run of attnlab's own encoder is
  refused: Hugging Face has no class for it.

Each task that can be written declares the ``transformers`` class that loads it
(``Capabilities.hf_auto_class``), and its runtime's ``export_hf`` calls the conversion of
``attnlab.interop``; a task without it is refused, naming the tasks that have it. The
tokenizers encode as the run's own (``attnlab.interop.tokenizer``), as ``AutoTokenizer`` reads
them from OUT: a model_type whose tokenizer transformers reads as a class of its own, whatever
OUT holds (``qwen2``: ``Qwen2Tokenizer``), is written only with that family's own tokenizer
(an lm run's q/k/v biases go as Llama's ``attention_bias`` otherwise). OUT is written whole
or not at all (a temporary directory renamed) and never over an existing path, one made while
it was being written included.
"""
from __future__ import annotations

from .checkpoint import add_checkpoint_flag
from .threads import add_threads_flag, check_threads

# a run's settings that say how ``attnlab`` decodes with it, each with the ``GenerationConfig``
# field that says the same to ``transformers``' ``generate`` and how its value is written:
# set in OUT's generation_config.json, so that transformers translates as ``attnlab translate
# RUN`` does (its beams, its length penalty, its longest output), where without them it would
# decode greedily and stop at its own default of 20 tokens. The longest output is written as
# max_length, which counts the decoder's start token too, and not as max_new_tokens: a
# max_length given to generate would lose to the file's max_new_tokens, while both of the
# arguments win over the file's max_length.
DECODING = {"beam": ("num_beams", int), "length_penalty": ("length_penalty", float),
            "max_target_len": ("max_length", lambda n: int(n) + 1)}


def export_tasks() -> tuple[str, ...]:
    """The tasks whose runs ``export`` writes: those that declare ``hf_auto_class``.

    Examples:
        >>> export_tasks()
        ('lm', 'translate', 'tag', 'classify')
    """
    from ..loading import tasks_that

    return tasks_that(lambda task: task.capabilities.hf_auto_class is not None)


def register(sub) -> None:
    p = sub.add_parser("export", help="write a trained run as a Hugging Face model directory",
                       description="Write a trained lm, translate, classify (--init) or tag "
                                   "(--init) run as a directory that transformers' "
                                   "from_pretrained loads, with the same logits.")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--hf", metavar="OUT", required=True,
                   help="the Hugging Face directory to write (must not exist)")
    add_threads_flag(p)
    add_checkpoint_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import sys

    from ..errors import UsageError
    from ..interop.export_dtype import in_written_dtype
    from ..loading import check_run_dir, checkpoint_file, weights_from
    from ..paths import check_output
    from ..tasks import get_task

    check_threads(args.threads)
    # export writes beside OUT and renames onto it: the parent is where it must write, and
    # the only directory a user other than root can write in when OUT is a killed export's
    # claim (mode 000)
    out = check_output(args.hf, "--hf", directory=True, make_parents=False, renamed=True)
    if (out.exists() or out.is_symlink()) and not _a_killed_claim(out):
        raise _exists(out)  # (a killed export's claim is removed once the run is checked)
    run_dir, cfg = check_run_dir(args.run_dir, tasks=export_tasks(), command="export",
                                 checkpoint=args.checkpoint)
    try:
        import transformers  # noqa: F401  (the hf extra)
    except ImportError:
        raise UsageError("export --hf needs transformers: pip install 'attnlab[hf]'") from None
    task = get_task(cfg.task)
    try:
        with weights_from(run_dir, cfg, args.checkpoint, say=True) as step:
            model, tokenizers, note = task.runtime().export_hf(task, run_dir, cfg)
    except ValueError as e:  # what the architecture cannot represent, named by to_hf
        raise UsageError(f"export: {run_dir}: {str(e).removeprefix('to_hf: ')}") from None
    _decode_as_the_run(model, cfg)
    model, weights = in_written_dtype(model, cfg)  # a bf16-true run's: bfloat16
    _write_atomically(out, model, tokenizers)
    # which weights OUT holds, as a resumed, compiled or --keep-best run leaves a reader unsure
    source = (f"{checkpoint_file(run_dir, args.checkpoint)} (step {step})" if args.checkpoint
              else run_dir / "model.safetensors")
    merged = (", its --lora-rank update merged" if cfg.declares("lora_rank") and cfg.lora_rank
              else "")
    print(f"wrote {out} from {source} ({type(model).__name__}{merged}; {weights}; "
          f"load it with "
          f"transformers.{task.capabilities.hf_auto_class}.from_pretrained({str(out)!r}))",
          file=sys.stderr)
    if note is not None:  # what the written model cannot do that the run can (lm)
        print(note, file=sys.stderr)
    if args.checkpoint is None:
        _say_a_best_step(run_dir)
    return 0


def _say_a_best_step(run_dir) -> None:
    """Say on stderr that a ``--keep-best`` run's ``model.safetensors``, which export writes,
    holds the weights of its best validation's step where that is not its last step (read
    from ``metrics.json``; a run without one, or unreadable, is exported without the note)."""
    import sys

    from ..errors import UsageError
    from ..runs import read_json

    try:
        metrics = read_json(run_dir / "metrics.json", what="a metrics file")
    except (OSError, UsageError):
        return
    best, steps = (metrics.get(key) if isinstance(metrics, dict) else None
                   for key in ("best_step", "steps"))
    if not isinstance(best, int) or not isinstance(steps, int) or best == steps:
        return
    print(f"note: {run_dir} kept its best validation (--keep-best): the export holds step "
          f"{best}'s weights ({metrics.get('best_metric')} {metrics.get('best_value')}), not "
          f"the last step's ({steps}); --checkpoint last exports those", file=sys.stderr)


def _decode_as_the_run(model, cfg) -> None:
    """Set on ``model.generation_config`` the run's settings of ``DECODING`` that it records
    (a length penalty only for beam search: greedy decoding has no use for it, and
    ``transformers`` refuses to save one beside a single beam); with beams, ``early_stopping``
    "never", the rule attnlab's beam search keeps (docs/translation.md). An encoder–decoder
    never writes its pad token (``attnlab.generation.translate_from_start``), unless it is the
    eos: ``bad_words_ids`` [[pad]], as opus-mt's checkpoints ban it, without which
    ``transformers`` writes it where it wins and the tokenizer drops it from the text."""
    values = {key: getattr(cfg, key) for key in DECODING
              if cfg.declares(key) and cfg.readable(key) and getattr(cfg, key) is not None}
    if values.get("beam", 1) == 1:
        values.pop("length_penalty", None)
    for key, value in values.items():
        name, written = DECODING[key]
        setattr(model.generation_config, name, written(value))
    if values.get("beam", 1) > 1:  # attnlab's beam search stops as transformers' "never" does
        model.generation_config.early_stopping = "never"  # (its default, False, stops sooner)
    pad = model.config.pad_token_id
    if model.config.is_encoder_decoder and pad is not None \
            and pad != model.generation_config.eos_token_id:
        model.generation_config.bad_words_ids = [[pad]]


def _write_atomically(out, model, tokenizers) -> None:
    """``out`` whole: written as a hidden sibling, then renamed (a failure or an interruption
    leaves nothing: neither the sibling nor the claimed, empty ``out``)."""
    import contextlib
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from ..paths import hold
    from ..runs import naming, process_umask

    from transformers.utils import logging

    logging.disable_progress_bar()  # "Writing model shards" on stderr
    _remove_a_killed_claim(out)
    _remove_leftovers(out)
    # made under a name the sweep of another export ignores (``.new``), held, then given its
    # ``.partial`` name (the lock stays with the directory): made as ``.partial``, another
    # export starting to OUT before the lock was taken removed it under this one
    new = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".new", dir=out.parent))
    partial = new.with_name(new.name.removesuffix(".new") + PARTIAL)
    lock, claimed = None, False
    try:
        lock = hold(new, "--hf", "export")  # while it is written: see _remove_leftovers
        new.rename(partial)
        model.save_pretrained(partial)
        for sub, tokenizer in tokenizers.items():
            tokenizer.save_pretrained(partial / sub if sub else partial)
        # mkdtemp makes the directory 0700 and safetensors its file 0600: the modes any
        # other file gets under the umask
        mask = process_umask()
        for path in [partial, *partial.rglob("*")]:
            path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)
        # OUT may have appeared while the model was written (another export to the same OUT,
        # a directory the user made): a POSIX rename alone would replace an empty directory
        # in silence and fail with a traceback on a full one. Making OUT claims it at once or
        # fails if it exists; the rename then replaces only that empty directory of ours.
        # Windows' rename replaces no directory: it fails on any OUT, and is the claim itself
        if _rename_replaces_an_empty_directory():
            try:
                out.mkdir(mode=CLAIM_MODE)  # (a kill before the rename: _remove_a_killed_claim)
            except FileExistsError:
                raise _exists(out, made_since=True) from None
            claimed = True
        try:
            partial.rename(out)
        except FileExistsError:  # (Windows)
            raise _exists(out, made_since=True) from None
        claimed = False
    except BaseException as e:
        for made in (new, partial):  # (one of them, or neither once renamed to OUT)
            shutil.rmtree(made, ignore_errors=True)
        if claimed:  # claimed and not renamed onto: the next export would call it taken
            with contextlib.suppress(OSError):  # (removes only an empty directory)
                out.rmdir()
        raise naming(e, out)  # a full disk: one line naming --hf's directory, not a traceback
    finally:
        if lock is not None:
            os.close(lock)


# how the temporary directory of an export ends (``.OUT.<random>.partial``): the one name by
# which a later export tells those of its own from a user's files beside OUT
PARTIAL = ".partial"

# the mode of the empty OUT by which an export claims it just before it renames its files
# there: no one's own directory has it, so the claim of an export killed between the two
# steps is told from a directory a user made (``_remove_a_killed_claim``); the rename needs
# no permission on the directory it replaces
CLAIM_MODE = 0o000


def _a_killed_claim(out) -> bool:
    """Whether ``out`` is the claim of an export killed before its last rename (SIGKILL,
    out of memory): a directory of ``CLAIM_MODE`` while no export holds a temporary
    directory beside it (one writing now claims OUT before its rename). Only an empty one is
    removed (``_remove_a_killed_claim``); its mode cannot always be read past (a user other
    than root), so its emptiness is left to ``rmdir``."""
    import stat

    try:
        st = out.lstat()
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o777 == CLAIM_MODE
            and not _held(out))


def _remove_a_killed_claim(out) -> None:
    """Remove ``out`` where it is the empty claim of a killed export (``_a_killed_claim``),
    saying so; its files, left beside it, are removed next (``_remove_leftovers``). Any
    other OUT — a user's directory, a finished export — is left as it is (``rmdir`` removes
    only an empty directory), and refused."""
    import os
    import sys

    if not _a_killed_claim(out):
        return
    try:
        os.rmdir(out)
    except OSError:  # not empty: not a claim, but a directory of someone's
        raise _exists(out) from None
    print(f"note: --hf: removed {out}, the empty directory by which an export to it that was "
          f"killed before it finished had claimed it", file=sys.stderr)


def _held(out) -> bool:
    """Whether an export holds a temporary directory beside ``out``: it is writing ``out``
    now."""
    import os

    from ..errors import UsageError
    from ..paths import hold

    for path in _beside(out):
        if path.name.endswith(PARTIAL):
            try:
                fd = hold(path, "--hf", "export")
            except UsageError:
                return True
            except OSError:  # (another user's, say)
                continue
            if fd is not None:
                os.close(fd)
    return False


def _beside(out) -> list:
    """The directories beside ``out`` named as an export's temporary ones
    (``.OUT.<random>`` or ``.OUT.<random>.partial``; not ``.new``, which another export may
    be about to hold), links left out; none where the parent cannot be listed (a drop box:
    write and search, no read)."""
    import re

    ours = re.compile(re.escape(f".{out.name}.") + r"[a-z0-9_]{8}(" + re.escape(PARTIAL)
                      + ")?")
    try:
        beside = sorted(out.parent.iterdir())
    except OSError:
        return []
    return [path for path in beside
            if ours.fullmatch(path.name) and not path.is_symlink() and path.is_dir()]


def _remove_leftovers(out) -> None:
    """Remove the temporary directories that exports to ``out`` killed while writing (SIGKILL,
    out of memory) left beside it, unseen (hidden) and as large as the model, saying so in one
    line. Only attnlab's own (``.OUT.<random>.partial``, a directory) that no process holds:
    an export holds its own while it writes it (``paths.hold``), so one writing now is left
    to it. Where the file system has no locks (NFS), or for a directory named as exports
    before the ``.partial`` ending did (``.OUT.<random>``, a name a user's may have too),
    nothing is removed: the note names them instead."""
    import os
    import shutil
    import sys

    from ..errors import UsageError
    from ..paths import hold

    removed, named, size = [], [], 0
    for path in _beside(out):
        try:  # (raises where another export holds it: writing it now)
            fd = hold(path, "--hf", "export") if path.name.endswith(PARTIAL) else None
        except UsageError:
            continue
        except OSError:  # (another user's, say): not for this export to remove
            fd = None
        if fd is None:
            named.append(path)
            continue
        try:
            held = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            shutil.rmtree(path)
            size += held
            removed.append(path)
        except OSError:  # what it could not remove is named, and the export goes on
            named.append(path)
        finally:
            os.close(fd)
    if removed:
        print(f"note: --hf: removed {', '.join(map(str, removed))} ({size:,} bytes), left "
              f"by an export to {out} that was stopped while writing it", file=sys.stderr)
    if named:
        print(f"note: --hf: {', '.join(map(str, named))} may be left by an export to {out} "
              f"that was stopped while writing it; remove it if no export is writing {out} now",
              file=sys.stderr)


def _rename_replaces_an_empty_directory() -> bool:
    """Whether ``Path.rename`` onto an empty directory replaces it (POSIX) or fails
    (Windows: ``FileExistsError``)."""
    import os

    return os.name != "nt"


def _exists(out, *, made_since: bool = False):
    """The UsageError for an OUT that exists (``made_since``: since export checked it)."""
    from ..errors import UsageError

    when = " (made while export was writing it)" if made_since else ""
    left = [] if made_since else _left_beside_an_empty(out)
    if left:  # an export stopped at its last step whose claim is not told apart by its mode
        when = (f" (empty; beside it, {left[0]} is what an export to it left when it was "
                f"stopped: if you did not make {out.name}, remove it and export again)")
    return UsageError(f"--hf {out} already exists{when}; give a new directory (export never "
                      f"writes over a path)")


def _left_beside_an_empty(out) -> list:
    """The temporary directories of stopped exports beside ``out`` where ``out`` is an empty
    directory (none where it is not, or one is being written now)."""
    try:
        empty = out.is_dir() and not out.is_symlink() and not any(out.iterdir())
    except OSError:
        return []
    if not empty or _held(out):
        return []
    return [path for path in _beside(out) if path.name.endswith(PARTIAL)]
