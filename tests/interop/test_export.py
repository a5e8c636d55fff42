"""``attnlab export RUN --hf OUT``: what ``transformers`` loads from OUT gives the run's ids and
logits (exactly: the weights are copied), and every refusal is one line before OUT exists."""
import os
import stat

import pytest
import torch
from torch.testing import assert_close

import attnlab
from attnlab.cli import main
from attnlab.interop.tokenizer import to_hf_tokenizer
from attnlab.runs import read_json
from attnlab.tokenizers import TOKENIZER_KINDS

STEPS = ["--max-steps", "3", "--warmup", "1", "--model-dim", "16", "--num-layers", "1",
         "--batch-size", "8", "--threads", "1"]
TINY = [*STEPS, "--num-heads", "2", "--dim-feedforward", "32"]
TEXT = "the quick brown fox jumps over the lazy dog. " * 40
TEXTS = ["the quick brown fox", "  two  spaces\tand a tab\n", "ünïcödé, punctuation!?",
         "unseen: Ω ≠ ∑", "<pad> and <sos> are text here", "", "a\n\nb"]


def _exported(kind, text, tmp_path):
    """(attnlab's ``kind`` tokeniser fit on TEXT and ``text``, what transformers loads from its
    exported form)."""
    from transformers import AutoTokenizer

    options = {"vocab_size": 300} if kind == "bpe" else {}
    ours = TOKENIZER_KINDS[kind].fit([TEXT, text] * 3, **options)
    to_hf_tokenizer(ours).save_pretrained(tmp_path)
    return ours, AutoTokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize("kind", sorted(TOKENIZER_KINDS))
def test_the_hf_tokenizer_encodes_as_attnlabs_after_a_save_and_load(kind, tmp_path):
    ours, theirs = _exported(kind, "ünïcödé, punctuation!?", tmp_path)
    for text in TEXTS:
        ids = ours.encode(text)
        assert theirs(text)["input_ids"] == ids, (kind, text)
        if ours.unk_id not in ids:  # Hugging Face writes an unknown id as "<unk>", we as U+FFFD
            assert theirs.decode(ids) == ours.decode(ids) == text
    assert (theirs.pad_token_id, theirs.bos_token_id, theirs.eos_token_id,
            theirs.unk_token_id) == (ours.pad_id, ours.sos_id, ours.eos_id, ours.unk_id)


@pytest.mark.parametrize("kind", sorted(TOKENIZER_KINDS))
def test_the_hf_tokenizer_reads_decomposed_accents_as_attnlabs_does(kind, tmp_path):
    import unicodedata

    ours, theirs = _exported(kind, "ünïcödé, café!", tmp_path)
    decomposed = unicodedata.normalize("NFD", "ünïcödé, café!")  # e + U+0301, as macOS writes
    assert theirs(decomposed)["input_ids"] == ours.encode(decomposed) == ours.encode(
        "ünïcödé, café!")


# Where Python's \w and \s (attnlab's word pieces) differ from Oniguruma's (the tokenizers
# library's): combining marks, Devanagari vowel signs and virama, numbers of \p{No} and \p{Nl},
# connector punctuation other than "_", the separators U+001C-U+001F.
MARKED = ["नमस्ते दुनिया", "q\u0303 x", "cafe\u0301 olé", "x² Ⅻ", "a\u203fb c_d", "a\x1cb \x1f c"]


@pytest.mark.parametrize("normalize", [None, "NFC"])
def test_the_hf_word_tokenizer_cuts_words_where_attnlabs_does(normalize, tmp_path):
    from transformers import AutoTokenizer

    ours = TOKENIZER_KINDS["word"].fit(MARKED, normalize=normalize)  # None: a file made earlier
    to_hf_tokenizer(ours).save_pretrained(tmp_path)
    theirs = AutoTokenizer.from_pretrained(tmp_path)
    for text in MARKED:
        assert ours.unk_id not in ours.encode(text)
        assert theirs(text)["input_ids"] == ours.encode(text), text


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    (tmp / "text.txt").write_text(TEXT, encoding="utf-8")
    # the built-in data's held-out sets at a few examples: generating, scoring and drawing the
    # defaults' 2,000 test pairs (translate) and 50,000 sequences (reverse) was most of this
    held = ["--val-size", "8", "--test-size", "8"]
    for name, args in {
        "lm": ["lm", "--data", str(tmp / "text.txt"), "--block-size", "16"],
        "translate": ["translate", *held],
        "rnn": ["translate", "--arch", "rnn-additive", *STEPS, *held],
        "preln": ["translate", "--norm-first", *held],
        "rope": ["lm", "--data", str(tmp / "text.txt"), "--block-size", "16",
                 "--positional", "rope"],
        "reverse": ["reverse", "--train-size", "64", *held],
    }.items():
        sizes = [] if name == "rnn" else TINY
        assert main(["train", *args, "--out", str(tmp / name), *sizes]) == 0, name
    return tmp


def _modes(root):
    return {p.relative_to(root).as_posix(): stat.S_IMODE(p.stat().st_mode)
            for p in [root, *root.rglob("*")]}


@pytest.mark.slow
def test_an_lm_run_loads_in_transformers_with_its_logits_and_ids(runs, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "hf"
    assert main(["export", str(runs / "lm"), "--hf", str(out)]) == 0
    ours, tokenizer = attnlab.load(runs / "lm")
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    hf_tokenizer = AutoTokenizer.from_pretrained(out)
    text = "the lazy fox"  # within the 16 positions
    ids = hf_tokenizer(text, return_tensors="pt")["input_ids"]
    assert ids[0].tolist() == tokenizer.encode(text)
    with torch.no_grad():
        assert_close(hf(ids).logits, ours(ids), atol=1e-5, rtol=1e-5)
    # files as any other the user writes: not safetensors' 0600
    mask = os.umask(0)
    os.umask(mask)
    assert set(_modes(out).values()) <= {0o777 & ~mask, 0o666 & ~mask}


@pytest.mark.slow
def test_a_translate_run_loads_as_marian_with_both_tokenizers(runs, tmp_path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    out = tmp_path / "hf"
    assert main(["export", str(runs / "translate"), "--hf", str(out)]) == 0
    ours, tok = attnlab.load(runs / "translate")
    hf = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    source = AutoTokenizer.from_pretrained(out)
    target = AutoTokenizer.from_pretrained(out / "target_tokenizer")
    texts = ["four hundred and two", "seven"]
    batch = source(texts, padding=True, return_tensors="pt")
    assert [[i for i in row if i != tok.src.pad_id] for row in batch["input_ids"].tolist()] == \
        [tok.src.encode(t) for t in texts]
    # the run reads a source without the spaces around it: so does the exported tokenizer
    assert source(" seven\t")["input_ids"] == source("seven")["input_ids"]
    tgt = torch.tensor([[ours.sos_id, 5, 6, 7]] * 2)
    with torch.no_grad():
        theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    decoder_input_ids=tgt).logits
        assert_close(theirs, ours(batch["input_ids"], tgt), atol=1e-5, rtol=1e-5)
        generated = hf.generate(**batch, max_new_tokens=8, do_sample=False, num_beams=1)
    assert generated.tolist() == ours.generate(batch["input_ids"], 8).tolist()
    assert [target.decode(row, skip_special_tokens=True) for row in generated.tolist()] == \
        [tok.decode(row[1:]) for row in generated.tolist()]


@pytest.mark.slow
@pytest.mark.parametrize("run, message", [
    ("reverse", "holds a 'reverse' run; this command needs one of: lm, translate"),
    ("rnn", "is a --arch rnn-additive run; Hugging Face has no recurrent translation model"),
    ("preln", "Marian is post-LN and needs norm_first=False"),
    ("rope", "GPT-2 needs positional='learned', this CausalLM has positional='rope'"),
])
def test_what_hugging_face_cannot_hold_is_refused_in_one_line(runs, run, message, tmp_path,
                                                               capsys):
    out = tmp_path / "hf"
    assert main(["export", str(runs / run), "--hf", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []  # neither OUT nor a partial one


@pytest.mark.slow
def test_a_full_disk_is_one_line_naming_out_and_leaves_nothing(runs, tmp_path):
    """`ulimit -f` (or a full disk) under export: safetensors' own error for the failed write
    ended in a traceback; it is one line naming --hf's directory, exit 1, and neither OUT nor
    a partial one is left."""
    import resource
    import subprocess
    import sys

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # the weights are larger

    out = tmp_path / "hf"
    done = subprocess.run([sys.executable, "-m", "attnlab", "export", str(runs / "lm"),
                           "--hf", str(out)], preexec_fn=small_files, capture_output=True,
                          text=True, timeout=600)
    assert (done.returncode, done.stderr) == (1, f"attnlab: cannot write to {out}: File too "
                                                 f"large\n")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_out_is_never_written_over(tmp_path, capsys):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "mine.txt").write_text("keep")
    assert main(["export", str(tmp_path / "no-run"), "--hf", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--hf {tmp_path / 'hf'} already exists" in err and len(err.splitlines()) == 1
    assert (tmp_path / "hf" / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]



@pytest.mark.parametrize("theirs", [[], ["mine.txt"]], ids=["empty", "with a file"])
def test_an_out_made_while_export_writes_is_refused_and_kept(theirs, tmp_path):
    """OUT made after export checked it (another export to the same OUT, the user's mkdir):
    the finished model was renamed over an empty directory in silence, and over a full one
    failed with a traceback, leaving the hidden partial directory behind."""
    from attnlab.commands.export import _write_atomically
    from attnlab.errors import UsageError

    out = tmp_path / "hf"

    class Model:  # stands in for the Hugging Face model: its files written, OUT appears
        def save_pretrained(self, where):
            (where / "config.json").write_text("{}")
            out.mkdir()
            for name in theirs:
                (out / name).write_text("keep")

    with pytest.raises(UsageError) as e:
        _write_atomically(out, Model(), {})
    assert str(e.value) == (f"--hf {out} already exists (made while export was writing it); "
                            f"give a new directory (export never writes over a path)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no partial left beside it
    assert sorted(p.name for p in out.iterdir()) == theirs
    assert all((out / name).read_text() == "keep" for name in theirs)


class _Model:
    """Stands in for the Hugging Face model: ``save_pretrained`` writes one file."""

    def save_pretrained(self, where):
        (where / "config.json").write_text("{}")


def _renames_as_windows(monkeypatch):
    """Path.rename as Windows': FileExistsError onto any existing path, an empty directory
    too, where POSIX replaces it."""
    from pathlib import Path

    from attnlab.commands import export

    rename = Path.rename

    def windows_rename(self, target):
        if os.path.lexists(target):
            raise FileExistsError(17, "Cannot create a file when that file already exists",
                                  str(self), None, str(target))
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", windows_rename)
    monkeypatch.setattr(export, "_rename_replaces_an_empty_directory", lambda: False,
                        raising=False)


def test_an_export_on_windows_writes_out(monkeypatch, tmp_path):
    """Windows' rename fails onto the empty OUT that export made to claim it: every export
    failed and left that empty OUT behind."""
    from attnlab.commands.export import _write_atomically

    _renames_as_windows(monkeypatch)
    out = tmp_path / "hf"
    _write_atomically(out, _Model(), {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]
    assert (out / "config.json").read_text() == "{}"


def test_an_out_made_while_export_writes_on_windows_is_refused_and_kept(monkeypatch, tmp_path):
    from attnlab.commands.export import _write_atomically
    from attnlab.errors import UsageError

    _renames_as_windows(monkeypatch)
    out = tmp_path / "hf"

    class Theirs(_Model):
        def save_pretrained(self, where):
            super().save_pretrained(where)
            out.mkdir()
            (out / "mine.txt").write_text("keep")

    with pytest.raises(UsageError) as e:
        _write_atomically(out, Theirs(), {})
    assert str(e.value) == (f"--hf {out} already exists (made while export was writing it); "
                            f"give a new directory (export never writes over a path)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_an_export_interrupted_after_claiming_out_leaves_nothing(monkeypatch, tmp_path):
    """Ctrl-C (or an error) between the claim of OUT and the rename left an empty OUT, and
    the next export to it said it already exists."""
    from pathlib import Path

    from attnlab.commands.export import _write_atomically

    def interrupted(self, target):
        raise KeyboardInterrupt

    out = tmp_path / "hf"
    with monkeypatch.context() as patch:
        patch.setattr(Path, "rename", interrupted)
        with pytest.raises(KeyboardInterrupt):
            _write_atomically(out, _Model(), {})
    assert list(tmp_path.iterdir()) == []
    _write_atomically(out, _Model(), {})  # the same OUT again: written
    assert (out / "config.json").read_text() == "{}"


@pytest.mark.slow
def test_a_keep_best_runs_export_says_it_holds_the_best_step_not_the_last(tmp_path, capsys):
    # at --lr 1 the first validation is the best of three: model.safetensors holds step 1's
    # weights, checkpoints/last.ckpt step 3's
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    run = tmp_path / "best"
    assert main(["train", "lm", "--data", str(tmp_path / "text.txt"), "--block-size", "16",
                 "--out", str(run), *TINY, "--lr", "1", "--val-every", "1", "--keep-best"]) == 0
    metrics = read_json(run / "metrics.json")
    assert (metrics["best_step"], metrics["steps"]) == (1, 3)
    capsys.readouterr()
    assert main(["export", str(run), "--hf", str(tmp_path / "hf")]) == 0
    err = capsys.readouterr().err
    assert ("the export holds step 1's weights (val_loss" in err and "not the last step's (3); "
            "--checkpoint last exports those" in err), err
    # the line that says OUT is written names the weights it holds
    assert f"wrote {tmp_path / 'hf'} from {run / 'model.safetensors'} (GPT2LMHeadModel; " in err
    assert main(["export", str(run), "--hf", str(tmp_path / "last"), "--checkpoint", "last"]) == 0
    err = capsys.readouterr().err
    assert "(step 3)" in err and "best validation" not in err, err
    assert (f"wrote {tmp_path / 'last'} from {run / 'checkpoints' / 'last.ckpt'} (step 3) "
            f"(GPT2LMHeadModel; ") in err, err
