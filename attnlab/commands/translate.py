"""``attnlab translate DIR TEXT... [--beam N]``: translate with a trained translate run.

Prints one translation per line, in the order of the texts; ``--input-file FILE`` (``-``:
standard input) reads the texts one per line (a table's column with ``--src-column NAME``),
``--json`` writes a JSON object per line;
``--checkpoint last`` translates with an interrupted run's last saved step. Never imports
Lightning.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..settings import (MAX_BEAM, ModelRunSettings, add_flags, beam_setting, check_options,
                        length_penalty_setting)
from .checkpoint import add_checkpoint_flag
from .inputs import (CHUNK, add_input_file_flags, check_utf8, column_needs_file, read_inputs,
                     write_in_chunks)
from .quantize import add_quantize_flag, note_if_slower
from .threads import use_threads


@dataclass
class TranslateOptions(ModelRunSettings):
    """``attnlab translate``'s typed flags (and --threads); not given, the run's own. --beam
    and --length-penalty are declared as ``train translate``'s are (``beam_setting``,
    ``length_penalty_setting``): the same values are refused by both."""

    beam: int = beam_setting(None, help=f"beam search with N beams, 1 to {MAX_BEAM} (default: "
                                        f"the run's setting; 1 = greedy)")
    length_penalty: float = length_penalty_setting(
        None, help="beam search: score = log-probability / length**F (default: the run's)")


def register(sub) -> None:
    p = sub.add_parser(
        "translate", help="translate texts with a trained translate run",
        description="Translate each TEXT with the model of a `train translate` run; one line of "
                    "output per TEXT. With the built-in numbers a TEXT may also be digits (342).")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("texts", nargs="*", metavar="TEXT")
    add_flags(p, TranslateOptions)
    # --src-column: the name `train translate` gives the table's column of source texts
    add_input_file_flags(p, "text", column="--src-column")
    add_quantize_flag(p)
    add_checkpoint_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import UsageError
    from ..loading import check_run_dir, tasks_that, weights_from
    from ..notes import said_once
    from ..tasks import get_task
    from ..tasks.base import check_each, loaded_once

    check_options(args, TranslateOptions, unset=("beam", "length_penalty"))  # the run's
    if bool(args.texts) == (args.input_file is not None):
        raise UsageError("give the TEXTs to translate or --input-file FILE (one of the two)")
    empty = [i + 1 for i, t in enumerate(args.texts) if not t.strip()]
    if empty:
        raise UsageError(f"TEXT number {empty[0]} is empty")
    labels = [f"TEXT number {n}" for n in range(1, len(args.texts) + 1)]
    for text, label in zip(args.texts, labels):
        check_utf8(text, label)
    column_needs_file(args.input_column, args.input_file, "--src-column")
    if args.input_file is not None:
        args.texts, labels = read_inputs(args.input_file, args.input_column, "--src-column",
                                          command="translate")
    run_dir, cfg = check_run_dir(args.run_dir, command="translate", checkpoint=args.checkpoint,
                                 tasks=tasks_that(lambda task: task.capabilities.translate))
    task = get_task(cfg.task)
    runtime = task.runtime()
    runtime.check_greedy_penalty(cfg, args.beam, args.length_penalty, flags=True)
    use_threads(args, "decode" if len(args.texts) > 1 else "one", run_dir)
    note_if_slower(args.quantize, cfg.task, cfg, len(args.texts))
    if len(args.texts) > CHUNK:  # a bad line of a later chunk refused before the model loads
        check_each(args.texts, labels, runtime.input_reader(task, run_dir, cfg))

    def translations(texts, named):  # predict's rule: no answer where the outputs are NaN
        return runtime.predict_many(task, run_dir, cfg, texts, named, num_beams=args.beam,
                                    length_penalty=args.length_penalty, quantize=args.quantize)

    with weights_from(run_dir, cfg, args.checkpoint, say=True), loaded_once(), \
            said_once(len(args.texts)):
        write_in_chunks(args.texts, labels, translations, as_json=args.json,
                        output_key="translation", command="translate", chunk=CHUNK)
    return 0
