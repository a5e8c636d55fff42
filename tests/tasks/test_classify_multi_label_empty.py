"""A ``--multi-label`` row with no label (an empty CSV, TSV or JSON Lines cell, a Parquet
``[]``) is the empty label set: every class no, as scikit-learn's ``MultiLabelBinarizer`` and
Hugging Face's multi-label targets read it (it was refused: all-negative rows are legitimate
multi-label data). Training says how many rows have none, and the first, in one note, so a
label left out by mistake is seen; the loss (binary cross-entropy of an all-zero target) and
the scores (checked against scikit-learn) take such rows; a file with no label at all is
refused."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score

from attnlab.cli import main
from attnlab.commands.train import build_config
from attnlab.tasks.classify.data import example_chunks, load_splits, read_examples
from attnlab.tasks.classify.metrics import Tally

CSV = "text,label\n" + "".join(f"t{i},{'a|b' if i % 3 == 0 else '' if i % 3 == 1 else 'a'}\n"
                               for i in range(30))


@pytest.mark.parametrize("name, text, first", [
    ("d.csv", "text,label\ngood,a|b\nbad,\nok,a\nfine,b\n", "line 3"),
    ("d.csv", "text,label\ngood,a|b\nbad,  \nok,a\nfine,b\n", "line 3"),
    ("d.tsv", "text\tlabel\ngood\ta|b\nbad\t\nok\ta\nfine\tb\n", "line 3"),
    ("d.jsonl", '{"text": "good", "label": "a|b"}\n{"text": "bad", "label": ""}\n'
                '{"text": "ok", "label": []}\n{"text": "fine", "label": ["b"]}\n', "line 2"),
    ("d.parquet", None, "row 2"),
])
def test_a_row_without_a_label_is_the_empty_set_in_every_format(tmp_path, name, text, first):
    data = tmp_path / name
    if text is None:
        pq.write_table(pa.table({"text": ["good", "bad", "ok", "fine"],
                                 "label": [["a", "b"], [], ["a"], ["b"]]}), data)
    else:
        data.write_text(text)
    cfg = build_config("classify", {"data": str(data), "multi_label": True, "out":
                                    str(tmp_path / "r"), "test_fraction": 0.25,
                                    "val_fraction": 0.25})
    pairs, _, _, _ = read_examples(cfg, "data", str(data))
    assert [label for _, label in pairs][1] == ()
    notes: list[str] = []
    load_splits(cfg, notes=notes)
    empty = 2 if name == "d.jsonl" else 1
    assert f"note: --data {data}: {empty} of its 4 rows have no label (first: {first}); " \
           f"--multi-label reads each as every class no" in notes
    # evaluate --data reads a chunk at a time: the same labels
    chunked = [label for chunk, *_ in example_chunks(cfg, "data", str(data), rows=1)
               for _, label in chunk]
    assert chunked == [label for _, label in pairs]


def test_a_file_with_no_label_at_all_is_refused(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("text,label\ngood,\nbad,\n")
    assert main(["train", "classify", "--data", str(data), "--multi-label", "--out",
                 str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnlab: error: --data {data}: column 'label' has no label in any row; a "
        f"classifier needs at least 2")
    assert not (tmp_path / "run").exists()


def test_an_empty_text_is_still_named_as_an_empty_value(tmp_path, capsys):
    """Only the label column may be empty under --multi-label: an empty text is refused,
    with its file, line and column, before a run directory is written."""
    data = tmp_path / "d.csv"
    data.write_text("text,label\ngood,a\n,b\n")
    assert main(["train", "classify", "--data", str(data), "--multi-label", "--out",
                 str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnlab: error: --data {data} line 3: empty value in column 'text'")
    assert not (tmp_path / "run").exists()


def test_the_scores_of_rows_without_a_label_are_scikit_learns():
    """Exact match counts an empty answer to an empty truth as right; micro and macro F1 as
    scikit-learn's (every class occurs, so its macro average is over the same classes)."""
    g = torch.Generator().manual_seed(0)
    truth = (torch.rand(40, 3, generator=g) < 0.3).long()
    truth[:10] = 0  # rows of no label
    answers = (torch.rand(40, 3, generator=g) < 0.3).long()
    answers[:5] = 0  # five of them answered right
    scores = Tally(["a", "b", "c"], "multi").add(answers, truth).scores()
    y, p = truth.numpy(), answers.numpy()
    assert scores["test_accuracy"] == pytest.approx(accuracy_score(y, p), abs=1e-12)
    assert scores["test_micro_f1"] == pytest.approx(f1_score(y, p, average="micro"), abs=1e-12)
    assert scores["test_macro_f1"] == pytest.approx(f1_score(y, p, average="macro"), abs=1e-12)
    assert np.all(y[:10] == 0) and accuracy_score(y[:5], p[:5]) == 1.0


@pytest.mark.slow  # trains a run
def test_a_run_with_rows_of_no_label_trains_and_says_how_many(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text(CSV)
    assert main(["train", "classify", "--data", str(data), "--multi-label", "--out",
                 str(tmp_path / "run"), "--max-steps", "2", "--model-dim", "16",
                 "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "16",
                 "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert err.count("rows have no label") == 1
    assert f"note: --data {data}: 10 of its 30 rows have no label (first: line 3)" in err


def test_a_test_file_with_rows_of_no_label_is_named_in_its_own_note(tmp_path):
    data, test = tmp_path / "d.csv", tmp_path / "t.csv"
    data.write_text(CSV)
    test.write_text("text,label\nt1,a\nt2,\n")
    cfg = build_config("classify", {"data": str(data), "test": str(test), "multi_label": True,
                                    "out": str(tmp_path / "r")})
    notes: list[str] = []
    load_splits(cfg, notes=notes)
    assert [n for n in notes if "no label" in n] == [
        f"note: --data {data}: 10 of its 30 rows have no label (first: line 3); --multi-label "
        f"reads each as every class no",
        f"note: --test {test}: 1 of its 2 rows have no label (first: line 3); --multi-label "
        f"reads each as every class no"]


@pytest.mark.slow  # trains a run
def test_evaluate_data_says_its_rows_of_no_label_as_training_does(tmp_path, capsys,
                                                                  monkeypatch):
    """``evaluate DIR --data FILE`` reads FILE a chunk at a time (2 rows here): its rows of
    no label are counted over every chunk and said in training's one note, the first named
    in the chunk it is in, before the scores."""
    import attnlab.tasks.classify.runtime as classify_runtime

    data, other = tmp_path / "d.csv", tmp_path / "e.csv"
    data.write_text(CSV)
    other.write_text("text,label\nt0,a|b\nt2,a\nt4,\nt5,b\nt7,\n")
    assert main(["train", "classify", "--data", str(data), "--multi-label", "--out",
                 str(tmp_path / "run"), "--max-steps", "2", "--model-dim", "16",
                 "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "16",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 2)
    assert main(["evaluate", str(tmp_path / "run"), "--data", str(other)]) == 0
    err = capsys.readouterr().err
    assert err.count("rows have no label") == 1
    assert (f"note: --data {other}: 2 of its 5 rows have no label (first: line 4); "
            f"--multi-label reads each as every class no") in err
