"""What ``attnlab train lm --init`` now does before the run directory, and chunked encoding.

    python -m benchmarks.lm_checks_before_run [--rows 2000] [--megabytes 4] [--repeats 3]

1. Instruction rows are rendered by the chat template and encoded when the settings are
   checked (``instruct.encode_splits``), once: the run trains on those examples. Printed: rows
   per second, for a ChatML and a Llama 3 template on a byte-level BPE trained here.
2. --init's tokenizer is read when the settings are checked (``checks.init_tokenizer``), and
   the run reads the checkpoint again, tokenizer included: the second read is what the check
   adds. Printed: seconds per read of a tiny directory's tokenizer (transformers already
   imported).
3. A text corpus encoded in chunks by a checkpoint's tokenizer: each chunk now read between
   its neighbours (``HFTokenizer.encode_piece``) against each chunk encoded alone (the old
   way), interleaved in this process. Printed: MB/s of each, and the ratio.
Not a test.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
WORDS = "the cat sat on a mat while dogs ran fast under moon and sun hello world".split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _fast_tokenizer(template: str):
    """A byte-level BPE of 2,000 ids trained here, as ``transformers``' fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([_text(rng, 50) for _ in range(500)], trainers.BpeTrainer(
        vocab_size=2000, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                 eos_token="<|endoftext|>")
    hf.chat_template = template
    return hf


def _templates() -> dict[str, str]:
    """ChatML and a Llama 3 template, the instruction tests' (one copy of each)."""
    from tests.interop.test_instruct_lm import CHATML, LLAMA3

    return {"chatml": CHATML, "llama3": LLAMA3}


def rows_per_second(n: int) -> None:
    from attnlab.data.chat_rows import read_rows
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits

    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.jsonl"
        path.write_text("".join(json.dumps({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": _text(rng, 30)},
            {"role": "assistant", "content": _text(rng, 60)}]}) + "\n" for _ in range(n)))
        rows = read_rows(path)
        for name, template in _templates().items():
            tok = HFTokenizer.from_transformers(_fast_tokenizer(template))
            cfg = SimpleNamespace(instruction="chat", init=tmp, out=None, seed=0, block_size=512)
            start = time.perf_counter()
            encode_splits(cfg, tok, rows)
            took = time.perf_counter() - start
            print(f"rows {name}: {n} rows in {took:.2f} s, {n / took:,.0f} rows/s")


def tokenizer_read_seconds(repeats: int) -> None:
    from attnlab.tasks.lm.checks import init_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "ckpt"
        _fast_tokenizer(_templates()["chatml"]).save_pretrained(d)
        (d / "config.json").write_text('{"model_type": "qwen2"}')
        init_tokenizer(d)  # transformers imported
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            init_tokenizer(d)
            times.append(time.perf_counter() - start)
        print(f"tokenizer read: median {statistics.median(times):.3f} s of {repeats} "
              f"(a 2,000-id tokenizer.json)")


def chunked_encoding(megabytes: float, repeats: int) -> None:
    from attnlab.data.corpus import _CONTEXT_CHARS
    from attnlab.interop.hf_tokenizer import HFTokenizer

    tok = HFTokenizer.from_transformers(_fast_tokenizer(_templates()["chatml"]))
    rng = random.Random(2)
    chunk = _text(rng, 200_000)[: 1 << 20]  # 1 MiB, the corpus's chunk
    pieces = int(megabytes)

    def alone():
        for _ in range(pieces):
            tok.encode(chunk)

    def between():
        for _ in range(pieces):
            tok.encode_piece(chunk, chunk[-_CONTEXT_CHARS:], chunk[:_CONTEXT_CHARS])

    seconds = {"alone": [], "between": []}
    for _ in range(repeats):  # interleaved
        for name, f in (("alone", alone), ("between", between)):
            start = time.perf_counter()
            f()
            seconds[name].append(time.perf_counter() - start)
    a, b = (statistics.median(seconds[k]) for k in ("alone", "between"))
    mb = pieces * len(chunk.encode()) / 1e6
    print(f"chunks alone: {mb / a:.2f} MB/s; between neighbours: {mb / b:.2f} MB/s; "
          f"ratio between/alone time {b / a:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--megabytes", type=float, default=4)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    rows_per_second(args.rows)
    tokenizer_read_seconds(args.repeats)
    chunked_encoding(args.megabytes, args.repeats)


if __name__ == "__main__":
    main()
