"""Memory-mapped corpora: prepare streams files into token files; windows read only what they
touch."""
import gzip
import json
import random
import signal
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.data.corpus import SPLITS, TokenWindows, encode_file, iter_text_chunks, prepare
from attnlab.errors import UsageError
from attnlab.tokenizers import load_tokenizer

TEXT = "the cat sat on the mat.\nA dog ran — far away! ünïcödé\n\n" * 40


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_chunks_rebuild_each_file_and_never_cut_a_word(tmp_path):
    a, b = write(tmp_path, "a.txt", TEXT), write(tmp_path, "b.txt", "x y\nz")
    chunks = list(iter_text_chunks([a, b], chunk_chars=50))
    assert "".join(t for i, t in chunks if i == 0) == TEXT
    assert "".join(t for i, t in chunks if i == 1) == "x y\nz"
    assert all(len(t) <= 50 for _, t in chunks)
    words = set(TEXT.split())
    pieces = [t for i, t in chunks if i == 0]
    for t in pieces[:-1]:  # every piece of file a ends before white space, which starts the next
        assert not t[-1].isspace() and set(t.split()) <= words
    assert all(t[0].isspace() for t in pieces[1:])


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_prepare_word_and_bpe_tokens_equal_encoding_the_whole_text(tmp_path, kind):
    """Pieces cut before white space: a word keeps the space its token starts with."""
    a = write(tmp_path, "a.txt", TEXT)
    prepare([a], tmp_path / "out", tokenizer=kind, vocab_size=300 if kind == "bpe" else None,
            val_fraction=0.2, chunk_chars=64)
    tok = load_tokenizer(tmp_path / "out" / "tokenizer.json")
    train = np.fromfile(tmp_path / "out" / "train.bin", dtype=np.uint16)
    assert train.tolist() == tok.encode(TEXT[:int(len(TEXT) * 0.8)])


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_the_validation_split_starts_at_a_word_not_inside_one(tmp_path, kind):
    """The split fell at its character count, inside " crlf": the word tokenizer read " cr"
    and "lf" as two pieces it never saw (two unk where the text had a word), bpe spelt them
    otherwise than the whole text; the split now moves back to the word's space, as for a
    checkpoint's tokenizer."""
    text = "Straße groß 我喜欢 crlf\r\n" * 21
    at = int(len(text) * 0.9)
    assert text[at - 3:at + 1] == "crlf"  # the character count falls inside " crlf"
    prepare([write(tmp_path, "a.txt", text)], tmp_path / "out", tokenizer=kind,
            vocab_size=300 if kind == "bpe" else None, val_fraction=0.1)
    tok = load_tokenizer(tmp_path / "out" / "tokenizer.json")
    train, val = (np.fromfile(tmp_path / "out" / f"{s}.bin", dtype=np.uint16).tolist()
                  for s in ("train", "val"))
    assert train + val == tok.encode(text) and tok.unk_id not in train + val
    assert tok.decode(val) == text[text.rindex(" ", 0, at):]  # held out from the word's space


@pytest.mark.parametrize("kind", ["bpe"])  # (to word, such a text is one word)
def test_a_text_without_spaces_keeps_its_training_split(tmp_path, kind):
    """A Chinese text with one newline at its start: the split moved back to that newline, and
    train.bin held 6 tokens of 20,000 characters, val.bin the rest (review of the word-start
    rule); white space far from the split does not move it."""
    text = "标题\n" + "".join("我喜欢这部电影因为它的故事很好看"[i * 7 % 16] for i in range(3000))
    meta = prepare([write(tmp_path, "zh.txt", text)], tmp_path / "out", tokenizer=kind,
                   vocab_size=300 if kind == "bpe" else None, val_fraction=0.1)
    tok = load_tokenizer(tmp_path / "out" / "tokenizer.json")
    val = np.fromfile(tmp_path / "out" / "val.bin", dtype=np.uint16).tolist()
    assert tok.decode(val) == text[int(len(text) * 0.9):]  # the last tenth, as counted
    assert meta["train_tokens"] > 4 * meta["val_tokens"]


@pytest.mark.parametrize("chunk_chars", [37, 1 << 20])
def test_prepare_char_tokens_equal_encoding_the_whole_text(tmp_path, chunk_chars):
    a, b = write(tmp_path, "a.txt", TEXT), write(tmp_path, "b.txt", "second file\n")
    meta = prepare([a, b], tmp_path / "out", tokenizer="char", val_fraction=0.2,
                   chunk_chars=chunk_chars)
    tok = load_tokenizer(tmp_path / "out" / "tokenizer.json")
    train = np.fromfile(tmp_path / "out" / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "out" / "val.bin", dtype=np.uint16)
    total = len(TEXT) + len("second file\n")
    cut = int(total * 0.8)
    # the files with EOS between them; the last 20 % of the characters are held out
    assert train.tolist() == tok.encode(TEXT[:cut])
    assert val.tolist() == tok.encode(TEXT[cut:]) + [tok.eos_id] + tok.encode("second file\n")
    assert meta["train_tokens"] == len(train) and meta["val_tokens"] == len(val)
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == tok.vocab_size
    assert json.loads((tmp_path / "out" / "meta.json").read_text()) == meta


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_prepare_word_and_bpe_decode_back_to_the_text(tmp_path, kind):
    a = write(tmp_path, "a.txt", TEXT)
    prepare([a], tmp_path / "out", tokenizer=kind, vocab_size=300 if kind == "bpe" else None,
            chunk_chars=64)
    tok = load_tokenizer(tmp_path / "out" / "tokenizer.json")
    ids = [np.fromfile(tmp_path / "out" / f"{s}.bin", dtype=np.uint16) for s in ("train", "val")]
    assert tok.decode(np.concatenate(ids).tolist()) == TEXT


def test_prepare_errors_name_the_problem(tmp_path):
    with pytest.raises(UsageError, match="missing.txt"):
        prepare([tmp_path / "missing.txt"], tmp_path / "o")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe no")
    with pytest.raises(UsageError, match="bad.txt is not UTF-8"):
        prepare([bad], tmp_path / "o")
    with pytest.raises(UsageError, match="too small"):
        prepare([write(tmp_path, "tiny.txt", "ab")], tmp_path / "o")
    with pytest.raises(UsageError, match="--tokenizer"):
        prepare([bad], tmp_path / "o", tokenizer="sentencepiece")


@pytest.mark.parametrize("name", ["books.txt", "books.parquet"])
def test_a_file_under_an_unexpanded_tilde_is_named_as_meant(tmp_path, monkeypatch, name):
    """``prepare(["~/books.txt"], ...)`` called from Python (the command line expands the '~',
    tests/cli/test_paths_home.py): the file is there under the home directory; the message
    says which path was meant."""
    monkeypatch.setenv("HOME", str(tmp_path))
    if name.endswith(".txt"):
        write(tmp_path, name, TEXT)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": [TEXT]}), tmp_path / name)
    with pytest.raises(UsageError) as e:
        prepare([f"~/{name}"], tmp_path / "o")
    assert str(e.value) == (f"file not found: ~/{name} ('~' is not expanded here (a path "
                            f"handed to a Python function): write it out in full, e.g. "
                            f"{tmp_path / name})")
    assert not (tmp_path / "o").exists()


def test_a_bpe_vocabulary_too_small_is_refused_before_the_corpus_is_read(tmp_path):
    """`prepare big.txt --tokenizer bpe --vocab-size 100` read the whole corpus once before
    it said "--vocab-size: vocab_size must be at least 260 ..."; `train` says it at once."""
    from attnlab.tokenizers import vocab_too_small

    with pytest.raises(UsageError) as e:  # (a file that is not there is not even looked at)
        prepare([tmp_path / "not-read.txt"], tmp_path / "o", tokenizer="bpe", vocab_size=100)
    assert str(e.value) == vocab_too_small("bpe", 100) == (
        "--vocab-size must be an integer >= 260 for --tokenizer bpe, got 100")
    assert not (tmp_path / "o").exists()


def test_a_utf8_byte_order_mark_is_no_token(tmp_path):
    """Notepad's "UTF-8 with BOM": the mark is not text, so the corpus is the plain file's (no
    U+FEFF token the model would learn to write after every end of text)."""
    plain = prepare([write(tmp_path, "plain.txt", TEXT)], tmp_path / "plain")
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + TEXT.encode("utf-8"))
    for chunk_chars in (2, 7, 1 << 20):  # the mark split across reads too
        assert "".join(t for _, t in iter_text_chunks([marked], chunk_chars)) == TEXT
    meta = prepare([marked], tmp_path / "marked")
    assert "\ufeff" not in load_tokenizer(tmp_path / "marked" / "tokenizer.json").pieces
    assert meta["vocab_size"] == plain["vocab_size"]
    for split in ("train.bin", "val.bin"):
        ours, theirs = (tmp_path / d / split for d in ("marked", "plain"))
        assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("data, message", [
    ("hello world\n".encode("utf-16") * 20, "u.txt: the file is UTF-16"),  # Windows "Unicode"
    ("hello world\n".encode("utf-16-le") * 20, "u.txt holds a NUL byte at byte 1:"),  # no mark
    ("é ".encode() * 5000 + b"\0", "u.txt holds a NUL byte at byte 15000:"),
    (b"a b " * 5000 + b"caf\xe9", r"u.txt is not UTF-8 text \(.* at byte 20003\)"),
    (gzip.compress(b"hello world\n" * 20, mtime=0), "u.txt is gzip-compressed, not text"),
], ids=["utf16", "utf16-without-mark", "nul", "latin1", "gzip"])
def test_prepare_refuses_utf16_and_binary_naming_the_byte(tmp_path, data, message):
    """UTF-16 without its mark decodes as "valid" UTF-8 with a NUL after every letter; the byte
    named is the file's (not a count restarted every 8 KiB)."""
    (tmp_path / "u.txt").write_bytes(data)
    with pytest.raises(UsageError, match=message):
        prepare([tmp_path / "u.txt"], tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_stray_nul_deep_in_a_text_is_read_as_a_character(tmp_path):
    # a NUL far from the start is no sign of binary or UTF-16: a large text with one stray NUL
    # (scraped dumps hold them) was refused whole
    text = "a b " * 20_000 + "\0" + "c d " * 100  # the NUL at byte 80,000, past NUL_HEAD
    (tmp_path / "u.txt").write_text(text, encoding="utf-8")
    meta = prepare([tmp_path / "u.txt"], tmp_path / "o")
    assert "\0" in load_tokenizer(tmp_path / "o" / "tokenizer.json").pieces
    assert meta["train_tokens"] + meta["val_tokens"] == len(text)


def test_prepare_refuses_a_text_given_twice(tmp_path):
    """The val split is the end of the last file: given twice (or linked, or copied), that
    text is in train.bin too, and val_loss measures text the model learnt by heart."""
    a = write(tmp_path, "a.txt", TEXT)
    (tmp_path / "link.txt").symlink_to(a)
    copy = write(tmp_path, "copy.txt", TEXT)
    for paths, message in (([a, a], "a.txt is given twice"),
                           ([a, tmp_path / "link.txt"], "link.txt holds the same bytes as .*a.txt"),
                           ([a, copy], "copy.txt holds the same bytes as .*a.txt")):
        with pytest.raises(UsageError, match=message):
            prepare(paths, tmp_path / "o")
        assert not (tmp_path / "o").exists()
    empty = write(tmp_path, "empty.txt", "")
    assert prepare([a, empty, write(tmp_path, "none.txt", "")], tmp_path / "ok")["val_tokens"]


def test_windows_are_shifted_pairs_read_through_a_memmap(tmp_path):
    path = tmp_path / "t.bin"
    np.arange(100, dtype=np.uint16).tofile(path)
    train = TokenWindows(path, 8, dtype="uint16", stride=1)
    assert isinstance(train.data, np.memmap) and len(train) == 100 - 8
    x, y = train[5]
    assert x.dtype == torch.int64 and x.tolist() == list(range(5, 13)) and y.tolist() == list(range(6, 14))
    assert train[-1][1][-1] == 99
    val = TokenWindows(path, 8, dtype="uint16")  # non-overlapping tiles
    assert len(val) == 12 and val[1][0][0] == 8
    with pytest.raises(UsageError, match="--block-size"):
        TokenWindows(path, 100, dtype="uint16")


def _rss_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def test_windows_never_load_the_whole_file(tmp_path):
    # a 256 MiB token file (sparse on disk); reading windows must stay far below a 32 MiB cap
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        f.truncate(256 * 2**20)
    before = _rss_mib()
    ds = TokenWindows(path, 256, dtype="uint16", stride=1)
    rng = random.Random(0)
    batch = torch.stack([ds[rng.randrange(len(ds))][0] for _ in range(200)])
    grown = _rss_mib() - before
    assert batch.shape == (200, 256)
    assert grown < 32, f"resident memory grew by {grown:.0f} MiB reading 200 windows"


def prepare_peak_bytes(path, out) -> int:
    """The peak of Python's allocations while ``prepare`` makes a char corpus of ``path``."""
    tracemalloc.start()
    prepare([path], out, tokenizer="char", chunk_chars=4096)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.mark.slow
def test_prepare_memory_does_not_grow_with_the_corpus(tmp_path):
    def peak_bytes(n_chars: int) -> int:
        text = "".join(random.Random(n_chars).choices("abcdefgh \n", k=n_chars))
        path = write(tmp_path, f"corpus{n_chars}.txt", text)
        return prepare_peak_bytes(path, tmp_path / f"out{n_chars}")

    peak_bytes(20_000)  # imports and caches first
    small, large = peak_bytes(100_000), peak_bytes(400_000)
    assert large < 1.2 * small + 20_000, f"peak {small} B for 100 kB of text, {large} B for 400 kB"
    assert large < 400_000 / 2


@pytest.mark.slow
def test_prepare_bpe_peak_memory_does_not_grow_with_the_corpus(tmp_path):
    """The BPE trainer is Rust code (invisible to tracemalloc): measure each prepare's peak
    resident memory in its own process, for the same 100 kB of text repeated 10 and 40 times
    (1 and 4 MB). Measured on two cores: 291 and 298 MiB; with the library's thread pool and
    1 MB pieces for its trainer (as before prepare kept it on one thread and fed it small
    pieces), 331 and 420 MiB (+88 MiB, growing with the corpus; at 4 and 20 MB, +47 MiB)."""
    import subprocess
    import sys

    rng = random.Random(0)
    words = ["".join(rng.choices("abcdefghijklmnop", k=rng.randint(2, 9))) for _ in range(3000)]
    block = " ".join(rng.choices(words, k=17_000)) + "\n"  # ~100 kB
    peaks = []
    for copies in (10, 40):
        path = write(tmp_path, f"corpus{copies}.txt", block * copies)
        # VmHWM: this process's own peak (ru_maxrss would start from the parent's, vfork)
        code = ("import re\nfrom attnlab.data.corpus import prepare\n"
                f"prepare([{str(path)!r}], {str(tmp_path / f'out{copies}')!r}, tokenizer='bpe')\n"
                "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        peaks.append(int(proc.stdout.split()[-1]) / 1024)  # kB -> MiB
    small, large = peaks
    assert large - small < 20, f"peak {small:.0f} MiB for 1 MB of text, {large:.0f} MiB for 4 MB"


def test_prepare_never_overwrites_and_records_digests(tmp_path):
    import hashlib

    from attnlab.data.corpus import corpus_identity, read_meta

    a = write(tmp_path, "a.txt", TEXT)
    meta = prepare([a], tmp_path / "out")
    for name in ("train.bin", "val.bin", "tokenizer.json"):  # hashed while written
        assert meta["sha256"][name] == hashlib.sha256((tmp_path / "out" / name).read_bytes()).hexdigest()
    assert meta["files_sha256"] == [hashlib.sha256(a.read_bytes()).hexdigest()]
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    identity = corpus_identity(tmp_path / "out")
    b = write(tmp_path, "b.txt", TEXT.upper())
    with pytest.raises(UsageError, match=r"--out .*out already holds a prepared corpus; add --force"):
        prepare([b], tmp_path / "out")
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    prepare([b], tmp_path / "out", force=True)
    assert corpus_identity(tmp_path / "out") != identity
    # a token file that no longer has the size meta.json states is refused, naming it
    with open(tmp_path / "out" / "val.bin", "ab") as f:
        f.write(b"\x00\x00")
    with pytest.raises(UsageError, match=r"val.bin holds .* tokens but meta.json says"):
        read_meta(tmp_path / "out")


@pytest.mark.parametrize("text", ["\U0001f600", "ab cd ef", "é ü ø"])
def test_text_pieces_join_to_the_file_and_none_is_empty(tmp_path, text):
    # read as bytes, a piece of one character could be cut to nothing and yielded empty
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    pieces = [p for _, p in iter_text_chunks([tmp_path / "t.txt"], chunk_chars=2)]
    assert "".join(pieces) == text and all(pieces)


def test_a_corpus_too_small_to_split_is_named(tmp_path):
    # "the corpus is too small to split" named no file: with several inputs the user could not
    # tell which text the command read
    ws = write(tmp_path, "ws.txt", " " * 8 + "\n")
    with pytest.raises(UsageError, match=r"the corpus of \S*ws\.txt is too small to split"):
        prepare([ws], tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_prepare_notes_pieces_that_will_not_serve_the_model(tmp_path, capsys):
    """A text without spaces is one "word" per line to the word tokeniser (each line its own
    token, nothing shared between lines), and a vocabulary too small leaves much of the
    validation split unk: both trained without a word said. Now each is a note; English
    prose under the defaults gets none."""
    rng = random.Random(0)
    hanzi = "我你他的是在有人这上中大来和国地到说时要就出会可也对生能而子"
    lines = ["".join(rng.choice(hanzi) for _ in range(rng.randint(10, 60))) for _ in range(400)]
    spaceless = write(tmp_path, "zh.txt", "\n".join(lines))
    prepare([spaceless], tmp_path / "zh", tokenizer="word")
    err = capsys.readouterr().err
    assert err.startswith("note: the word tokenizer read ") and "characters each" in err
    assert "unk" not in err  # the vocabulary holds every line
    words = [f"w{rng.randint(0, 300)}" for _ in range(6000)]
    english = write(tmp_path, "en.txt", " ".join(words))
    prepare([english], tmp_path / "en", tokenizer="word", vocab_size=50)
    err = capsys.readouterr().err
    assert err.startswith("note: --vocab-size 50 leaves pieces") and " val " in err, err
    share = float(err.split("(")[1].split(" val ")[1].split("%")[0]) / 100
    val = np.fromfile(tmp_path / "en" / "val.bin", dtype=np.uint16)
    assert share == pytest.approx(np.mean(val == 3), abs=0.0005)
    prepare([english], tmp_path / "en-all", tokenizer="word")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("kind, cap", [("word", 60), ("char", 12)])
def test_prepare_says_the_share_of_unk_a_vocabulary_cap_leaves(tmp_path, capsys, kind, cap):
    """A --vocab-size that left a sixth of the corpus unk was said by nothing: the note
    waited for more than half of the validation split. Every unk in a corpus prepare fitted
    its tokenizer on is a piece the cap left out, so its share, of each split, is said once
    whatever it is; the shares are those of the token files."""
    rng = random.Random(1)
    common = [f"w{i}" for i in range(40)]
    rare = [f"r{i}x{j}" for i in range(300) for j in "yz"]  # a sixth of the words, each rare
    words = [rng.choice(rare) if rng.random() < 1 / 6 else rng.choice(common)
             for _ in range(8000)]
    corpus = write(tmp_path, "c.txt", " ".join(words))
    prepare([corpus], tmp_path / "c", tokenizer=kind, vocab_size=cap)
    err = capsys.readouterr().err
    ids = {s: np.fromfile(tmp_path / "c" / f"{s}.bin", dtype=np.uint16) for s in SPLITS}
    every = np.concatenate(list(ids.values()))
    assert 0.02 < np.mean(every == 3) < 0.5  # below the share said before
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"note: --vocab-size {cap} leaves "), err
    said = dict(part.rsplit(" ", 1) for part in lines[0].split("(")[1].split(")")[0].split(", "))
    for s in SPLITS:
        assert float(said[s].rstrip("%")) / 100 == pytest.approx(np.mean(ids[s] == 3), abs=5e-4)
    assert f"of the corpus's {len(every):,} tokens are unk" in err


@pytest.mark.parametrize("kind", ["char", "word"])
def test_a_text_encoded_for_scoring_that_is_mostly_unk_is_said(tmp_path, capsys, kind):
    """`evaluate RUN --data greek.txt` on a char or word run fitted on other text read every
    Greek piece as its one unk token and reported a val_perplexity as good as on its own text
    or better (a word run: 14 against 35), without a word. Now the encoding (``encode_file``,
    evaluate's) says how much of the text is unk; a text of known pieces gets no note."""
    english = write(tmp_path, "en.txt", "the cat sat on the mat, and the dog ran. " * 50)
    prepare([english], tmp_path / "en", tokenizer=kind)
    tok = load_tokenizer(tmp_path / "en" / "tokenizer.json")
    capsys.readouterr()
    greek = write(tmp_path, "el.txt", "Καλημέρα κόσμε, τι κάνεις σήμερα; " * 20)
    n = encode_file([greek], tok, tmp_path / "el.bin")
    unknown = np.count_nonzero(np.fromfile(tmp_path / "el.bin", dtype=np.uint16) == tok.unk_id)
    assert capsys.readouterr().err == (
        f"note: {unknown / n:.0%} of the {n:,} tokens of {greek} are unk, pieces the {kind} "
        f"tokenizer fitted on the training text lacks (its vocabulary: {tok.vocab_size:,}): "
        f"the model learns one token for all of them; a bpe tokenizer has fewer\n")
    encode_file([english], tok, tmp_path / "en.bin")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("kind", ["char", "word"])
def test_a_tokenizer_given_to_prepare_names_itself_not_a_vocab_size(tmp_path, capsys, kind):
    """`attnlab prepare greek.txt --tokenizer RUN` (a run fitted on English) said "--vocab-size
    None leaves pieces of the text out ...; raise --vocab-size", a flag prepare refuses with a
    tokenizer given. The note now names the tokenizer that lacks the pieces, counted while
    the text is encoded."""
    english = write(tmp_path, "en.txt", "the cat sat on the mat, and the dog ran. " * 50)
    prepare([english], tmp_path / "en", tokenizer=kind)
    tok = load_tokenizer(tmp_path / "en" / "tokenizer.json")
    capsys.readouterr()
    greek = write(tmp_path, "el.txt", "the cat sat. " * 40 + "Καλημέρα κόσμε, τι κάνεις; " * 40)
    meta = prepare([greek], tmp_path / "el", tokenizer=tok)
    err = capsys.readouterr().err
    val = np.fromfile(tmp_path / "el" / "val.bin", dtype=meta["dtype"])
    n = meta["val_tokens"]
    assert err == (
        f"note: {np.count_nonzero(val == tok.unk_id) / n:.0%} of the {n:,} tokens of the "
        f"validation split are unk, pieces the {kind} tokenizer fitted on the training text "
        f"lacks (its vocabulary: {tok.vocab_size:,}): the model learns one token for all of "
        f"them; a bpe tokenizer has fewer\n"), err
    assert "--vocab-size" not in err


@pytest.mark.parametrize("where", ["hold", "mkdir"])
def test_a_prepare_stopped_as_it_makes_out_leaves_no_directory(tmp_path, monkeypatch, where):
    """A SIGTERM landing between the mkdir of --out and the lock on it (the suite's SIGTERM
    test polls for the directory and terminates at once) left the empty directory behind:
    the next prepare was then given an --out it never made."""
    from attnlab.data import corpus as corpus_module
    from attnlab.errors import Interrupted

    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat on the mat\n" * 50)
    out = tmp_path / "prepared"

    def stopped(*args, **kwargs):
        raise Interrupted("terminated (SIGTERM)", signal.SIGTERM)

    if where == "hold":
        monkeypatch.setattr(corpus_module, "hold", stopped)
    else:  # the signal as mkdir returns: the directory is made, then the stop
        made = Path.mkdir

        def mkdir_then_stop(self, *args, **kwargs):
            made(self, *args, **kwargs)
            if self == out:
                stopped()
        monkeypatch.setattr(Path, "mkdir", mkdir_then_stop)
    with pytest.raises(Interrupted):
        corpus_module.prepare([text], out, tokenizer="char")
    assert not out.exists()
