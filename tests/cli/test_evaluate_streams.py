"""`evaluate DIR --data FILE` reads and scores a long file a chunk of rows at a time, as
`predict` answers one: what it holds grows with the chunk, not the file (a classify CSV of 10^6
rows took 900 MB), a first pass checks every row before any is scored, a long file says on
stderr how far it is, and the metrics are those of all the rows at once, exactly: the
confusion counts are summed, not the chunks' scores averaged, and a regression keeps each row's
two numbers for R² and Spearman's ranks. The chunk is made small here (8 rows) so that a file
of 61 rows has eight."""
from __future__ import annotations

import json
import random
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import attnlab.tasks.classify.runtime as classify_runtime
from attnlab.cli import main
from attnlab.loading import check_run_dir
from attnlab.tasks import get_task
from attnlab.tasks.classify.runtime import test_scores as scores_at_once

from .test_predict_json_numbers import classify_run  # noqa: F401

metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")

WORDS = "film was great lovely superb awful dull poor really".split()
ROWS = 61


def _chunks(n: int, sizes=(7, 1, 13, 8)):
    """Uneven chunks covering 0..n-1."""
    start, k = 0, 0
    while start < n:
        stop = min(n, start + sizes[k % len(sizes)])
        yield slice(start, stop)
        start, k = stop, k + 1


def _cfg(**kw):
    from types import SimpleNamespace

    return SimpleNamespace(**{"labels": ["a", "b", "c"], "regression": False,
                              "multi_label": False, **kw})


def _tallied(cfg, answers, truth):
    from attnlab.tasks.classify.labels import objective_of
    from attnlab.tasks.classify.metrics import Tally

    tally = Tally(cfg.labels, objective_of(cfg.multi_label, cfg.regression))
    for part in _chunks(len(truth)):
        tally.add(answers[part], truth[part])
    return tally.scores()


def test_classes_tallied_in_chunks_are_the_scores_of_all_rows_at_once():
    g = torch.Generator().manual_seed(0)
    truth = torch.randint(0, 3, (1001,), generator=g)
    answers = torch.where(torch.rand(1001, generator=g) < 0.3, (truth + 1) % 3, truth)
    cfg = _cfg()
    tallied = _tallied(cfg, answers, truth)
    assert tallied == scores_at_once(cfg, answers, truth)
    assert abs(tallied["test_accuracy"] - metrics.accuracy_score(truth, answers)) <= 1e-12
    assert abs(tallied["test_macro_f1"] - metrics.f1_score(truth, answers, average="macro")
               ) <= 1e-12


def test_label_sets_tallied_in_chunks_are_the_scores_of_all_rows_at_once():
    g = torch.Generator().manual_seed(1)
    truth = torch.rand(503, 3, generator=g) < 0.4
    answers = truth ^ (torch.rand(503, 3, generator=g) < 0.2)
    cfg = _cfg(multi_label=True)
    tallied = _tallied(cfg, answers, truth)
    assert tallied == scores_at_once(cfg, answers, truth)
    assert abs(tallied["test_accuracy"] - metrics.accuracy_score(truth, answers)) <= 1e-12
    assert abs(tallied["test_micro_f1"] - metrics.f1_score(truth, answers, average="micro")
               ) <= 1e-12


def test_numbers_tallied_in_chunks_are_the_scores_of_all_rows_at_once():
    g = torch.Generator().manual_seed(2)
    truth = torch.randn(777, generator=g, dtype=torch.float64).round(decimals=1)  # ties
    answers = truth + 0.5 * torch.randn(777, generator=g, dtype=torch.float64)
    cfg = _cfg(regression=True, labels=None)
    tallied = _tallied(cfg, answers, truth)
    assert tallied == scores_at_once(cfg, answers, truth)
    assert abs(tallied["test_mse"] - metrics.mean_squared_error(truth, answers)) <= 1e-12
    assert abs(tallied["test_r2"] - metrics.r2_score(truth, answers)) <= 1e-12
    assert abs(tallied["test_spearman"] - stats.spearmanr(answers, truth).statistic) <= 1e-12


def _rows():
    """(text, label) rows of the run's words, of 1 to 9 words after "the"."""
    rng = random.Random(0)
    return [("the " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9))),
             rng.choice(["pos", "neg"])) for _ in range(ROWS)]


@pytest.fixture(scope="module")
def mixed_run(classify_run, tmp_path_factory):
    """A copy of the classify run whose answers to ``_rows``' texts are both classes (five
    training steps answer one class to all): its head's bias moved to the widest gap between
    two of the texts' logit differences near their middle."""
    import attnlab

    copy = shutil.copytree(classify_run, tmp_path_factory.mktemp("mixed") / "run")
    model, tokenizer = attnlab.load(copy)
    with torch.no_grad():
        logits = torch.stack([model(torch.tensor([tokenizer.encode(text)]))[0]
                              for text, _ in _rows()])  # (N, 2)
    diff = (logits[:, 1] - logits[:, 0]).sort().values
    middle = range(ROWS // 4, 3 * ROWS // 4)
    i = max(middle, key=lambda j: float(diff[j + 1] - diff[j]))
    weights = load_file(copy / "model.safetensors")
    head = sorted(k for k in weights if k.startswith("output_net."))[-1].rpartition(".")[0]
    weights[f"{head}.bias"][1] -= float(diff[i] + diff[i + 1]) / 2  # pos above the gap
    save_file(weights, copy / "model.safetensors")
    return copy


@pytest.fixture
def data(tmp_path):
    path, rows = tmp_path / "held.csv", _rows()
    path.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    return path, rows


@pytest.fixture
def scored(monkeypatch):
    """How many rows each call of the model on a list of batches was given."""
    real, sizes = classify_runtime.collect_predictions, []

    def counted(model, batches):
        sizes.append(sum(len(batch[-1]) for batch in batches))
        return real(model, batches)

    monkeypatch.setattr(classify_runtime, "collect_predictions", counted)
    return sizes


def _evaluate(capsys, run, path, code=0):
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(path)]) == code
    out, err = capsys.readouterr()
    return (json.loads(out) if code == 0 else out), err


@pytest.mark.slow
def test_a_long_file_is_scored_a_chunk_at_a_time_with_the_scores_of_its_answers(
        mixed_run, data, scored, monkeypatch, capsys, tmp_path):
    path, rows = data
    whole, _ = _evaluate(capsys, mixed_run, path)  # one chunk
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8, raising=False)  # (none before)
    scored.clear()
    chunked, err = _evaluate(capsys, mixed_run, path)
    assert scored == [8] * 7 + [5]  # never more than a chunk of rows at once
    assert f"evaluate: {ROWS} of {ROWS} rows" in err  # progress of a long file
    assert chunked == whole
    # the scores of predict's answers to the same texts, as scikit-learn gives them: within
    # 1e-12 as the runtime gives them, to the 6 digits the command prints
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"{t}\n" for t, _ in rows))
    assert main(["predict", str(mixed_run), "--input-file", str(texts)]) == 0
    answers = capsys.readouterr().out.splitlines()
    truth = [y for _, y in rows]
    assert len(set(answers)) == 2  # both classes answered: the scores are not trivial
    run_dir, cfg = check_run_dir(mixed_run, command="evaluate")
    exact = get_task("classify").runtime().evaluate(get_task("classify"), run_dir, cfg, str(path))
    report = metrics.classification_report(truth, answers, output_dict=True, zero_division=0)
    expected = {"test_accuracy": metrics.accuracy_score(truth, answers),
                "test_macro_f1": metrics.f1_score(truth, answers, average="macro"),
                **{f"{label} {key}": report[label][key if key != "f1" else "f1-score"]
                   for label in ("pos", "neg") for key in ("precision", "recall", "f1")}}
    for scores, tolerance in ((exact, 1e-12), (chunked, 5e-7)):
        found = {"test_accuracy": scores["test_accuracy"],
                 "test_macro_f1": scores["test_macro_f1"],
                 **{f"{label} {key}": scores["test_per_class"][label][key]
                    for label in ("pos", "neg") for key in ("precision", "recall", "f1")}}
        assert found == pytest.approx(expected, abs=tolerance, rel=0)
        assert [scores["test_per_class"][c]["support"] for c in ("pos", "neg")] == \
            [report[c]["support"] for c in ("pos", "neg")]


@pytest.mark.slow
def test_a_bad_row_of_a_later_chunk_is_refused_before_any_is_scored(
        mixed_run, data, scored, monkeypatch, capsys):
    path, rows = data
    path.write_text(path.read_text() + "fine film,meh\n")
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8, raising=False)  # (none before)
    out, err = _evaluate(capsys, mixed_run, path, code=2)
    assert out == "" and scored == []
    assert err.splitlines() == [f"attnlab: error: --data {path} line {ROWS + 2}: label 'meh' "
                                f"never seen in training (labels: neg, pos)"]


@pytest.mark.slow
def test_a_file_that_changes_between_its_readings_is_refused(mixed_run, data, monkeypatch,
                                                             capsys):
    path, rows = data
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8, raising=False)  # (none before)
    real = classify_runtime._TrainedOn.note

    def note_and_append(self, what):  # after the first reading, before the second
        real(self, what)
        with open(path, "a") as f:
            f.write("a late row,pos\n")

    monkeypatch.setattr(classify_runtime._TrainedOn, "note", note_and_append)
    out, err = _evaluate(capsys, mixed_run, path, code=2)
    assert out == ""
    assert err.splitlines()[-1] == (f"attnlab: error: --data {path} changed while evaluate "
                                    f"read it (its SHA-256 differs between its readings); "
                                    f"evaluate it again once it is written")


@pytest.mark.slow
def test_the_test_split_scored_in_one_chunk_says_no_progress(mixed_run, scored, monkeypatch,
                                                             capsys):
    """`evaluate RUN` scores the run's test split in one chunk, however long: a line
    "evaluate: N of N rows" after it told nothing (the chunk made smaller than the split)."""
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8, raising=False)  # (none before)
    capsys.readouterr()
    assert main(["evaluate", str(mixed_run)]) == 0
    err = capsys.readouterr().err
    assert len(scored) == 1 and scored[0] > 8  # one chunk, longer than CHUNK_ROWS
    assert "evaluate:" not in err


@pytest.mark.slow
def test_a_tsv_whose_first_quote_is_past_its_head_is_scored_as_its_csv(mixed_run, monkeypatch,
                                                                       capsys, tmp_path):
    """A TSV whose first value that starts with a quote comes past the head that decides its
    quotes (4,194,304 characters; 64 here) was refused ("save it as .csv"); train classify
    reads it. It is scored, its quotes read as train reads them: the scores of the same rows
    as a CSV."""
    from attnlab.data import tables

    monkeypatch.setattr(tables, "TSV_HEAD_CHARS", 64)
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8, raising=False)  # (none before)
    rows = _rows() + [('"Hi" the film was great', "pos")]  # a person's quotes: text
    tsv, csv_ = tmp_path / "held.tsv", tmp_path / "held.csv"
    tsv.write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    csv_.write_text("text,label\n" + "".join(
        '"{}",{}\n'.format(t.replace('"', '""'), y) for t, y in rows))
    as_csv, _ = _evaluate(capsys, mixed_run, csv_)
    as_tsv, _ = _evaluate(capsys, mixed_run, tsv)
    assert as_tsv == as_csv
