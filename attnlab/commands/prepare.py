"""``attnlab prepare FILE... --out DIR``: tokenise text once into memory-mapped token files."""
from __future__ import annotations


def register(sub) -> None:
    from ..tokenizers import TOKENIZER_KINDS  # the one registry of tokenizer kinds

    p = sub.add_parser(
        "prepare", help="tokenise text files into memory-mapped token files for `train lm`",
        description="Tokenise UTF-8 text files (streamed in chunks, so corpora larger than "
                    "memory work) into DIR/train.bin and DIR/val.bin, with tokenizer.json and "
                    "meta.json. Train on them with `attnlab train lm --data DIR`.")
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory to write: new or empty (see --force)")
    p.add_argument("--force", action="store_true",
                   help="replace the prepared corpus already in DIR (only a directory holding "
                        "meta.json and nothing but the files prepare writes); runs trained on "
                        "the old corpus will then refuse to evaluate or resume")
    p.add_argument("--tokenizer", choices=tuple(TOKENIZER_KINDS), default="char",
                   help="char (default), word, or byte-level bpe")
    p.add_argument("--vocab-size", type=int, metavar="N",
                   help="vocabulary cap (char/word) or target size (bpe; default 1000)")
    p.add_argument("--val-fraction", type=float, default=0.1, metavar="F",
                   help="share of the text held out for validation (default 0.1)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..data.corpus import prepare
    from ..errors import UsageError

    if args.vocab_size is not None and args.vocab_size < 5:
        raise UsageError(f"--vocab-size must be at least 5, got {args.vocab_size}")
    if not 0 < args.val_fraction <= 0.5:
        raise UsageError(f"--val-fraction must be in (0, 0.5], got {args.val_fraction}")
    meta = prepare(args.files, args.out, tokenizer=args.tokenizer, vocab_size=args.vocab_size,
                   val_fraction=args.val_fraction, force=args.force)
    print(f"prepared {args.out}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val "
          f"tokens, {meta['tokenizer']} vocabulary of {meta['vocab_size']:,} ({meta['dtype']})")
    return 0
