"""A text corpus encoded chunk by chunk by a checkpoint's own tokenizer (``attnlab prepare
--tokenizer DIR``, ``train lm --init DIR --data FILE``, ``evaluate --data FILE``) gets the ids
that one encode of each whole document gets, ``tok(text)``'s: no "▁" at a chunk's start where
a SentencePiece-style tokenizer (Llama 2's, Mistral's) puts one before every text it encodes,
and the bos those tokenizers put before a text at each document's start (none for GPT-2 and
Qwen, whose tokenizers add none).

Offline: tiny tokenizers of each layout ``--init`` takes, trained here with ``tokenizers``
(the library ``transformers``' fast tokenizers are): GPT-2's byte-level BPE, Llama 2's legacy
SentencePiece layout (a "▁" prepended by the normaliser), Llama 3's and Qwen's byte-level BPE
with their pre-tokenising pattern, and Mistral's "▁" prepended by the pre-tokeniser. The
chunks are 23 characters, so a short text is cut many times.
"""
import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import trainers

from attnlab.data.corpus import encode_file, prepare
from attnlab.interop.hf_tokenizer import HFTokenizer

LINES = ["the cat sat on the mat.", "a dog ran  fast!", "hello world,   hello there",
         "\tsun and moon\n", "x" * 22 + " end"]  # (a word cut in two)
TEXT = "\n".join(LINES * 4)
OTHER = "moon and sun, the end.\n"
RUNS = "x = 1\n" + " " * 600 + "y " + "a" * 600  # trained on: tokens of 2, 4, 8... spaces, a's
CHUNK = 23
# Llama 3's and Qwen 2's pre-tokenising pattern (their tokenizer.json's Split)
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
           r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_level(split=False, bos=None):
    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not split)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([
        pre_tokenizers.Split(PATTERN, "isolated"), byte_level]) if split else byte_level)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", *([bos] if bos else [])]
    tok.train_from_iterator([TEXT, OTHER, RUNS], trainers.BpeTrainer(
        vocab_size=200, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok, {"eos": 0, **({"bos": 1} if bos else {})}


def _sentencepiece(prepend_in):
    """Llama 2's legacy layout (``prepend_in="normalizer"``) or Mistral's ("pre_tokenizer")."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    tok.train_from_iterator([TEXT, OTHER, RUNS], trainers.BpeTrainer(
        vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False))
    if prepend_in == "normalizer":
        tok.pre_tokenizer = None
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)])
    return tok, {"unk": 0, "bos": 1, "eos": 2}


LAYOUTS = {"gpt2": lambda: _byte_level(),
           "llama2": lambda: _sentencepiece("normalizer"),
           "llama3": lambda: _byte_level(split=True, bos="<|begin_of_text|>"),
           "qwen": lambda: _byte_level(split=True),
           "mistral": lambda: _sentencepiece("pre_tokenizer")}


@pytest.fixture(params=sorted(LAYOUTS))
def tokenizers(request):
    fast, specials = LAYOUTS[request.param]()
    return fast, HFTokenizer(fast, specials)


def _whole(fast, text):
    """tok(text)'s ids: one encode of the whole document, its special tokens added."""
    return fast.encode(text).ids


def test_chunks_give_the_ids_of_each_whole_document(tokenizers, tmp_path):
    fast, tok = tokenizers
    (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "b.txt").write_text(OTHER, encoding="utf-8")
    out = tmp_path / "tokens.bin"
    encode_file([tmp_path / "a.txt", tmp_path / "b.txt"], tok, out, chunk_chars=CHUNK)
    got = np.fromfile(out, dtype=np.uint16).tolist()
    assert got == [*_whole(fast, TEXT), tok.eos_id, *_whole(fast, OTHER)]
    assert (got[0] == tok.sos_id) == (tok.sos_id is not None)  # a bos where the tokenizer has one


def test_the_validation_split_continues_the_documents_ids(tokenizers, tmp_path):
    fast, tok = tokenizers
    (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
    meta = prepare([tmp_path / "a.txt"], tmp_path / "corpus", tokenizer=tok, chunk_chars=CHUNK,
                   val_fraction=0.3)
    train, val = (np.fromfile(tmp_path / "corpus" / f"{s}.bin", dtype=meta["dtype"]).tolist()
                  for s in ("train", "val"))
    assert train + val == _whole(fast, TEXT)
    assert len(val) > 0.2 * len(train)


@pytest.mark.parametrize("run", [" " * 600, "a" * 600], ids=["spaces", "word"])
def test_a_split_inside_a_long_run_still_gives_each_character_once(tokenizers, tmp_path, run):
    """The validation split starts at a character count; inside a run of spaces or a word
    longer than the context each piece is read beside (256 characters), the two pieces'
    encodings need not meet there: the split moves back to where the run's word starts."""
    fast, tok = tokenizers
    text = TEXT * 2 + " x = 1\n" + run + "y " + TEXT
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    inside = text.index(run) + 290  # the split's character: inside the run
    meta = prepare([tmp_path / "a.txt"], tmp_path / "corpus", tokenizer=tok, chunk_chars=4096,
                   val_fraction=1 - (inside + 0.5) / len(text))
    train, val = (np.fromfile(tmp_path / "corpus" / f"{s}.bin", dtype=meta["dtype"]).tolist()
                  for s in ("train", "val"))
    assert train + val == _whole(fast, text)
