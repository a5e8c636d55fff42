"""``attnlab prepare FILE... --out DIR``: tokenise text once into memory-mapped token files.

``--tokenizer`` is a kind to fit on the files (char, word, bpe), or a directory whose tokenizer
is used as it is: a Hugging Face model directory (the tokenizer ``attnlab train lm --init DIR``
trains with) or an attnlab lm run (its tokenizer.json); or a ``.gguf`` file (its metadata's
tokenizer, which ``--init FILE.gguf`` trains with).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..settings import CorpusSettings, add_flags, check_options, setting
from ..tokenizers import TOKENIZER_KINDS  # the one registry of tokenizer kinds (torch-free)


@dataclass
class PrepareOptions(CorpusSettings):
    """``attnlab prepare``'s typed flags: how the corpus is split (``CorpusSettings``, which
    ``attnlab.data.corpus.prepare`` checks too) and these."""

    # a kind, or a directory: checked by ``_tokenizer``, so no argparse choices
    tokenizer: str = setting("char", metavar="KIND|DIR",
                             blank_why=f"give {', '.join(TOKENIZER_KINDS)} or a directory",
                             help="char (default), word, or byte-level bpe; or a Hugging Face "
                                  "model directory, a .gguf file or an attnlab lm run, whose "
                                  "own tokenizer is used (for `train lm --init DIR`)")
    vocab_size: int = setting(None, low=5, optional=True, metavar="N",
                              help="vocabulary cap (char/word) or target size (bpe; default 1000)")
    text_column: str = setting("text", metavar="NAME",
                               help="the column of the texts in a table: a .csv, .tsv, .jsonl "
                                    "or .parquet file or a Hugging Face datasets directory "
                                    "(each row a document)")


def register(sub) -> None:
    p = sub.add_parser(
        "prepare", help="tokenise text files into memory-mapped token files for `train lm`",
        description="Tokenise UTF-8 text files, or the --text-column of tables (CSV, TSV, "
                    "JSON Lines and Parquet files, datasets directories), streamed in chunks "
                    "so that corpora larger than memory work, into DIR/train.bin and "
                    "DIR/val.bin, with tokenizer.json and meta.json. Train on them with "
                    "`attnlab train lm --data DIR`.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="UTF-8 text files (read whole), tables (.csv, .tsv, .jsonl, .parquet) "
                        "or Hugging Face datasets directories (save_to_disk; a DatasetDict's "
                        "split: DIR/train)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory to write: new or empty (see --force)")
    p.add_argument("--force", action="store_true",
                   help="replace the prepared corpus already in DIR (only a directory holding "
                        "meta.json and nothing but the files prepare writes); runs trained on "
                        "the old corpus will then refuse to evaluate or resume")
    add_flags(p, PrepareOptions)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..data.corpus import prepare

    given_column = args.text_column  # None where the flag was not given
    check_options(args, PrepareOptions)
    _column_is_read(given_column, args.files)
    meta = prepare(args.files, args.out, tokenizer=_tokenizer(args.tokenizer),
                   vocab_size=args.vocab_size, val_fraction=args.val_fraction, force=args.force,
                   text_column=args.text_column)
    print(f"prepared {args.out}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val "
          f"tokens, {meta['tokenizer']} vocabulary of {meta['vocab_size']:,} ({meta['dtype']})")
    return 0


def _column_is_read(column: str | None, files: list[str]) -> None:
    """--text-column names a column of a table (a .csv, .tsv, .jsonl or .parquet file, a
    datasets directory): given where every input is a text file, read whole, it would do
    nothing, unsaid."""
    from ..data.tables import file_format
    from ..errors import UsageError

    if column is None or any(not Path(f).exists() or file_format(f) for f in files):
        return  # (a missing input is named by prepare)
    raise UsageError(f"--text-column {column}: the column of a table (a .csv, .tsv, .jsonl or "
                     f".parquet file, a datasets directory), but every input is a text file, "
                     f"read whole; drop it")


def _tokenizer(value: str):
    """--tokenizer: a kind, or the tokenizer of a directory (``UsageError`` naming the flag)."""
    from ..errors import UsageError
    from ..interop.gguf import is_gguf

    if value in TOKENIZER_KINDS:
        return value
    if not Path(value).is_dir() and not (is_gguf(value) and Path(value).is_file()):
        raise UsageError(f"--tokenizer {value!r}: not one of {', '.join(TOKENIZER_KINDS)} nor a "
                         f"directory (a Hugging Face model directory or an attnlab lm run) or a "
                         f".gguf file; attnlab never downloads: fetch one with `huggingface-cli "
                         f"download NAME --local-dir DIR`")
    from ..tasks import get_task

    source = get_task("lm").init_source(value, flag="--tokenizer")
    if source.kind == "run":
        from ..interop.saved import load_any_tokenizer

        return load_any_tokenizer(source.path / "tokenizer.json")
    from ..interop.checkpoint import read_tokenizer

    return read_tokenizer(source.path, task="lm")
