"""A new user's export of a fine-tuned BERT run, used as transformers users use it: the
exported tokenizer with ``truncation=True`` must cut a long text where the run cut it
(``--max-len``), so that the exported model gives the run's logits on it. It did not cut at all
(``model_max_length`` was lost, even a checkpoint's own 512), so a text past --max-len got other
logits than ``attnlab predict`` gave, and one past the positions an IndexError."""
import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.tasks.classify.runtime import Padding  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.tasks.test_tag import capitalised, write_conll  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
LONG = "the cat sat on the mat and a dog ran fast " * 4  # far more than 8 subwords
RUN = ["--max-len", "8", "--max-steps", "2", "--batch-size", "8", "--warmup", "0",
       "--threads", "1"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return save_bert(tmp_path_factory.mktemp("export") / "bert")


@pytest.mark.slow  # trains a run
def test_an_exported_classifier_cuts_a_long_text_where_the_run_did(bert, tmp_path):
    data = tmp_path / "r.csv"
    data.write_text("text,label\n" + "".join(f"the cat {i},{'ab'[i % 2]}\n" for i in range(20)))
    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "classify", "--init", str(bert), "--data", str(data),
                 "--out", str(run), *RUN]) == 0
    assert main(["export", str(run), "--hf", str(out)]) == 0
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    model, ours = attnlab.load(run)
    mine = Padding(ours.pad_id, ours.padding_side, ours.token_type_ids).pad(
        ours.encode_for_model([LONG], 8))
    batch = theirs([LONG], truncation=True, return_tensors="pt")
    assert batch["input_ids"].tolist() == mine[0].tolist()  # 8 ids, [SEP] last
    with torch.no_grad():
        assert_close(hf(**batch).logits, model.eval()(*mine), **TOL)


@pytest.mark.slow  # trains a run
def test_an_exported_tagger_cuts_a_long_sentence_where_the_run_did(bert, tmp_path):
    data = write_conll(tmp_path / "t.conll", capitalised(20))
    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "tag", "--init", str(bert), "--data", str(data),
                 "--out", str(run), *RUN]) == 0
    assert main(["export", str(run), "--hf", str(out)]) == 0
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    _, ours = attnlab.load(run)
    ids = theirs(LONG, truncation=True)["input_ids"]
    assert len(ids) == 8 and ids == ours.encode_for_model([LONG], 8)[0][0]


@pytest.mark.slow  # trains a run
def test_an_exported_gpt2_language_model_cuts_a_long_text_at_its_positions(tmp_path):
    """A GPT-2 reads at most n_positions ids (the run's --block-size): its tokenizer's
    truncation=True cut nothing, and the model's position table was indexed past its end."""
    data = tmp_path / "t.txt"
    data.write_text("the cat sat on the mat. " * 40)
    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "lm", "--data", str(data), "--out", str(run), "--tokenizer", "char",
                 "--block-size", "16", "--model-dim", "16", "--num-heads", "2",
                 "--num-layers", "1", *RUN[2:]]) == 0
    assert main(["export", str(run), "--hf", str(out)]) == 0
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    batch = theirs([LONG], truncation=True, return_tensors="pt")
    assert batch["input_ids"].shape == (1, hf.config.n_positions) == (1, 16)
    model, ours = attnlab.load(run)
    assert batch["input_ids"][0].tolist() == ours.encode(LONG)[:16]
    with torch.no_grad():
        assert_close(hf(**batch).logits, model.eval()(batch["input_ids"]), **TOL)


def _notes_of_maps(task, data, bert, tmp_path, capsys, short):
    """Train a ``task`` run from ``bert`` on ``data``; the stderr of ``plot attention`` of
    ``short`` and of ``LONG`` (past --max-len 8)."""
    run = tmp_path / "run"
    assert main(["train", task, "--init", str(bert), "--data", str(data),
                 "--out", str(run), *RUN]) == 0
    capsys.readouterr()
    errs = []
    for name, text in (("a", short), ("b", LONG)):
        assert main(["plot", "attention", str(run), "--input", text,
                     "--out", str(tmp_path / f"{name}.png")]) == 0
        errs.append(capsys.readouterr().err)
    return errs


@pytest.mark.slow  # trains a run
def test_a_pretrained_taggers_map_notes_a_cut_and_not_a_word_without_subwords(bert, tmp_path,
                                                                              capsys):
    """The note that the attention maps are of the first --max-len subwords' words counted a
    last word that gives the tokenizer no subword (a zero-width space) as cut."""
    data = write_conll(tmp_path / "t.conll", capitalised(20))
    short, long = _notes_of_maps("tag", data, bert, tmp_path, capsys, "the cat \u200b")
    assert "note: --input has" not in short
    assert f"note: --input has {len(LONG.split())} words; the model reads the first" in long


@pytest.mark.slow  # trains a run
def test_a_pretrained_classifiers_map_notes_a_text_cut_at_max_len(bert, tmp_path, capsys):
    """A classifier from --init drew the maps of a text's first --max-len tokens under a title
    showing the whole text, and said nothing (a classifier from scratch says so)."""
    data = tmp_path / "r.csv"
    data.write_text("text,label\n" + "".join(f"the cat {i},{'ab'[i % 2]}\n" for i in range(20)))
    short, long = _notes_of_maps("classify", data, bert, tmp_path, capsys, "the cat")
    assert "note: --input has" not in short
    assert "; the model reads the first 8 (--max-len 8): the attention maps are of those" in long
