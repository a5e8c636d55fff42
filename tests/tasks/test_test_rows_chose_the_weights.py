"""A practitioner whose weights are chosen by the validation split (``--keep-best`` keeps the
best-scoring ones, ``--patience`` stops the run by its scores) and whose ``--test`` file is the
``--val`` file, or shares rows with it: the test score in metrics.json was then measured on
rows that picked the weights, optimistic, and nothing said so. ``attnlab train`` now says it in
one warning line at the start naming both files, how many rows and the first, as it says it of
test rows shared with training (``attnlab.data.overlap``); without --keep-best or --patience the
validation split chooses nothing, and nothing is said."""
import numpy as np
import pytest

from attnlab.cli import main
from tests.tasks.test_tag import capitalised, write_conll

SMALL = ["--max-steps", "1", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
         "--threads", "1", "--warmup", "0"]


def _csv(path, rows, header="text,label"):
    path.write_text(header + "\n" + "".join(f"{a},{b}\n" for a, b in rows))
    return path


def _chosen_warnings(err):
    return [line for line in err.splitlines() if "optimistic" in line]


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("flags, same, expected", [
    (["--keep-best"], True, "6 of its 6 rows have an input that is in --val {val} too (first: "
     "line 2), and --keep-best keeps the weights that score best on --val {val}, so its scores "
     "are optimistic"),
    (["--patience", "2"], False, "2 of its 3 rows have an input that is in --val {val} too "
     "(first: line 2), and --patience 2 stops the run by its scores on --val {val}, so its "
     "scores are optimistic"),
    ([], True, None),
])
def test_classify_names_test_rows_that_the_validation_file_chose_by(tmp_path, capsys, flags,
                                                                    same, expected):
    data = _csv(tmp_path / "d.csv", [(f"text {i}", "ab"[i % 2]) for i in range(20)])
    val = _csv(tmp_path / "v.csv", [(f"val {i}", "ab"[i % 2]) for i in range(6)])
    test = val if same else _csv(tmp_path / "t.csv", [("val 1", "b"), ("new", "a"),
                                                      ("val 3", "b")])
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--val", str(val), "--test",
                 str(test), "--out", str(tmp_path / "run"), *SMALL, *flags]) == 0
    warnings = _chosen_warnings(capsys.readouterr().err)
    if expected is None:
        assert warnings == []
    else:
        assert warnings == [f"warning: --test {test}: " + expected.format(val=val)]


@pytest.mark.slow  # trains a run
def test_classify_from_a_bert_checkpoint_names_them_too(tmp_path, capsys):
    pytest.importorskip("transformers")
    from tests.interop.test_checkpoint import save_bert

    bert = save_bert(tmp_path / "bert")
    data = _csv(tmp_path / "d.csv", [(f"a film {i}", "ab"[i % 2]) for i in range(20)])
    val = _csv(tmp_path / "v.csv", [(f"a show {i}", "ab"[i % 2]) for i in range(6)])
    capsys.readouterr()
    assert main(["train", "classify", "--init", str(bert), "--data", str(data), "--val",
                 str(val), "--test", str(val), "--keep-best", "--max-steps", "1", "--threads",
                 "1", "--warmup", "0", "--out", str(tmp_path / "run")]) == 0
    warnings = _chosen_warnings(capsys.readouterr().err)
    assert len(warnings) == 1 and warnings[0].startswith(
        f"warning: --test {val}: 6 of its 6 rows have an input that is in --val {val} too"), \
        warnings


@pytest.mark.slow  # trains a run
def test_tag_names_test_sentences_that_the_validation_file_chose_by(tmp_path, capsys):
    data = write_conll(tmp_path / "d.conll", capitalised(20))
    val = write_conll(tmp_path / "v.conll", capitalised(6, seed=1))
    capsys.readouterr()
    assert main(["train", "tag", "--data", str(data), "--val", str(val), "--test", str(val),
                 "--keep-best", "--out", str(tmp_path / "run"), *SMALL]) == 0
    assert _chosen_warnings(capsys.readouterr().err) == [
        f"warning: --test {val}: 6 of its 6 rows have an input that is in --val {val} too "
        f"(first: line 3), and --keep-best keeps the weights that score best on --val {val}, "
        f"so its scores are optimistic"]


@pytest.mark.slow  # trains a run
def test_translate_names_test_pairs_among_the_validation_rows(tmp_path, capsys):
    """translate has no --val FILE: its validation rows are drawn from --data, and a --test
    file cut from the same corpus can hold some of them."""
    rows = [(f"src {i}", f"tgt {i}") for i in range(30)]
    data = _csv(tmp_path / "p.csv", rows, "source,target")
    test = _csv(tmp_path / "t.csv", rows, "source,target")
    capsys.readouterr()
    assert main(["train", "translate", "--data", str(data), "--test", str(test), "--patience",
                 "3", "--out", str(tmp_path / "run"), *SMALL]) == 0
    warnings = _chosen_warnings(capsys.readouterr().err)
    assert len(warnings) == 1 and warnings[0].startswith(
        f"warning: --test {test}: 3 of its 30 rows have an input that is in the validation "
        f"rows of --data {data} too (first: line "), warnings
    assert warnings[0].endswith(f"and --patience 3 stops the run by its scores on the "
                                f"validation rows of --data {data}, so its scores are "
                                f"optimistic")


def test_jets_names_test_jets_that_the_validation_file_chose_by(tmp_path, capsys):
    from attnlab.tasks.jets.checks import check_files
    from attnlab.tasks.jets.data import write_jets
    from tests.jets.test_task import synthetic_jets

    p4, labels = synthetic_jets(30, seed=4)
    write_jets(tmp_path / "data.h5", p4, labels)
    other, other_labels = synthetic_jets(10, seed=5)
    write_jets(tmp_path / "val.h5", other, other_labels)
    write_jets(tmp_path / "test.h5", np.r_[p4[[1]], other[[7, 2]]],
               np.r_[labels[[1]], other_labels[[7, 2]]])
    cfg = {"data": str(tmp_path / "data.h5"), "test": str(tmp_path / "test.h5"),
           "val": str(tmp_path / "val.h5"), "max_constituents": 30, "val_fraction": 0.1,
           "test_fraction": 0.2, "chunk_size": 16}
    check_files({**cfg, "keep_best": True})
    assert _chosen_warnings(capsys.readouterr().err) == [
        f"warning: --test {cfg['test']}: 2 of its 3 rows have an input that is in --val "
        f"{cfg['val']} too (first: row 1), and --keep-best keeps the weights that score best "
        f"on --val {cfg['val']}, so its scores are optimistic"]
    check_files(cfg)  # the validation file chose nothing
    assert _chosen_warnings(capsys.readouterr().err) == []
