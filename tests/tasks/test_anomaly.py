"""Set anomaly detection: the digit sets, and a tiny `attnlab train anomaly` run."""
import json

import numpy as np
import pytest
import torch

from attnlab.cli import main
from attnlab.data.digits_sets import DigitSets, digit_pools, features_of
from attnlab.runs import read_yaml
from attnlab.tasks.anomaly import TASKS


def test_pools_are_disjoint_and_hold_every_class():
    pools = digit_pools()
    idx = [set(p.indices.tolist()) for p in pools.values()]
    assert not (idx[0] & idx[1] or idx[0] & idx[2] or idx[1] & idx[2])
    assert sum(map(len, idx)) == 1797
    assert all(set(p.labels.tolist()) == set(range(10)) for p in pools.values())
    assert abs(len(pools["train"].labels) / 1797 - 0.6) < 0.01


def test_each_set_has_one_anomaly_at_the_target_position():
    pool = digit_pools()["test"]
    sets = DigitSets(pool, 50, set_size=10, seed=2)
    for i in range(50):
        x, target = sets[i]
        rows, _ = sets.draw(i)
        classes = pool.labels[rows]
        odd = [j for j in range(10) if (classes == classes[j]).sum() == 1]
        assert odd == [target] and (np.bincount(classes) == 9).any()
        assert len(set(rows.tolist())) == 10  # no image twice in a set
        torch.testing.assert_close(x, features_of(sets.digit_indices(i).tolist()), rtol=0, atol=0)
    assert len({sets[i][1] for i in range(50)}) > 5  # the anomaly is not always in one place


def test_sets_are_fixed_by_seed_and_index():
    pool = digit_pools()["val"]
    a, b, c = (DigitSets(pool, 5, seed=s) for s in (1, 1, 7))
    assert all(torch.equal(a[i][0], b[i][0]) for i in range(5))
    assert not all(torch.equal(a[i][0], c[i][0]) for i in range(5))


def test_set_size_larger_than_a_class_is_an_error():
    with pytest.raises(ValueError, match=r"set_size must be in \[3, \d+\].*got 500"):
        DigitSets(digit_pools()["test"], 5, set_size=500)


@pytest.fixture(scope="module")
def anomaly_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("anomaly") / "run"
    code = main(["train", "anomaly", "--out", str(out), "--max-steps", "60", "--model-dim", "32",
                 "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "64",
                 "--val-sets", "50", "--test-sets", "200", "--warmup", "10", "--lr", "3e-3"])
    assert code == 0
    return out


@pytest.mark.slow
def test_tiny_anomaly_run_writes_the_run_directory_and_beats_chance(anomaly_run):
    metrics = json.loads((anomaly_run / "metrics.json").read_text())
    assert set(metrics) >= {"test_accuracy", "steps", "train_seconds", "parameters"}
    assert metrics["steps"] == 60
    assert metrics["test_accuracy"] > 0.3  # chance is 1 / 10
    assert (anomaly_run / "attention.png").stat().st_size > 1000
    assert (anomaly_run / "sets.png").stat().st_size > 1000


@pytest.mark.slow
def test_evaluate_and_predict_on_the_trained_run(anomaly_run, capsys):
    assert main(["evaluate", str(anomaly_run)]) == 0
    again = json.loads(capsys.readouterr().out)
    metrics = json.loads((anomaly_run / "metrics.json").read_text())
    assert again["test_accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-6)
    # nine zeros and a one: the one (position 4) is the odd digit
    digits = digit_pools()["test"]
    zeros = digits.indices[digits.labels == 0][:9].tolist()
    one = int(digits.indices[digits.labels == 1][0])
    assert main(["predict", str(anomaly_run), "--input", " ".join(map(str, zeros[:4] + [one] + zeros[4:]))]) == 0
    position = int(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 <= position < 10
    task = TASKS["anomaly"]
    model = task.runtime().load(task, anomaly_run,
                                task.typed(read_yaml(anomaly_run / "config.yaml"), anomaly_run))
    x = features_of(zeros[:4] + [one] + zeros[4:])[None]
    assert position == int(model.predict(x)[0])


@pytest.mark.slow
def test_predict_notes_a_set_with_no_single_odd_one(anomaly_run, capsys):
    """Ten zeros (or five 0s and five 1s) have no odd one, and the run printed a position as
    if they had."""
    digits = digit_pools()["test"]
    zeros = digits.indices[digits.labels == 0][:10].tolist()
    ones = digits.indices[digits.labels == 1][:5].tolist()
    one_odd = zeros[:9] + ones[:1]
    assert main(["predict", str(anomaly_run), "--input", " ".join(map(str, one_odd))]) == 0
    assert capsys.readouterr().err == ""  # what the run learned: no note
    for odd in (zeros, zeros[:5] + ones):
        assert main(["predict", str(anomaly_run), "--input", " ".join(map(str, odd))]) == 0
        out, err = capsys.readouterr()
        assert 0 <= int(out) < 10  # still answered
        said = " ".join("0" if i in zeros else "1" for i in odd)
        assert err.startswith(f"note: --input is not one digit's images and one other's "
                              f"(digits {said})")
        assert "guess" in err and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", [
    # any set of 3 or more is read (the model has no positions), so the message does not ask
    # for exactly the training sets' 10
    (["--input", "1 2 x"], "--input must be image indices (0..1796) separated by spaces, at "
                           "least 3 (this run was trained on sets of 10), got '1 2 x'"),
    (["--input", "7"], "--input needs at least 3 image indices (a set of 2 has no odd one), "
                       "got 1"),
    (["--input", "1 2 99999"], "--input: digit image index 99999 is outside"),
    (["--input", "1 2"], "--input needs at least 3 image indices (a set of 2 has no odd one), "
                         "got 2"),
    # two sets on two lines were read as one set of 6, and one image named odd
    (["--input", "1 2 3\n4 5 6"], "--input holds 2 lines; it is one set, on one line"),
])
def test_predict_input_errors_exit_2(anomaly_run, capsys, argv, message):
    assert main(["predict", str(anomaly_run), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("size", ["1", "2"])
def test_bad_set_size_exits_2_before_a_run_directory_is_made(tmp_path, capsys, size):
    # of 2 images, one of each class, neither is the odd one: a model scores chance at best
    assert main(["train", "anomaly", "--out", str(tmp_path / "r"), "--set-size", size]) == 2
    err = capsys.readouterr().err
    assert "--set-size must be in [3, " in err and "a set of 2 has no odd one" in err
    assert err.endswith(f"got {size}\n") and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_plot_attention_labels_each_image_by_its_digit(anomaly_run, tmp_path):
    digits = digit_pools()["test"]
    chosen = digits.indices[:10].tolist()
    task = TASKS["anomaly"]
    maps, x_labels, _ = task.runtime().attention_maps(
        task, anomaly_run, task.typed(read_yaml(anomaly_run / "config.yaml"), anomaly_run),
        " ".join(map(str, chosen)))
    assert x_labels == [f"{i}:{d}" for i, d in enumerate(digits.labels[:10].tolist())]
    assert len(maps) == 1 and maps[0].shape == (2, 10, 10)
    out = tmp_path / "a.png"
    assert main(["plot", "attention", str(anomaly_run), "--input", " ".join(map(str, chosen)),
                 "--out", str(out)]) == 0
    assert out.stat().st_size > 1000


@pytest.mark.slow
def test_evaluate_of_a_run_trained_on_sets_of_2_is_refused_in_one_line(anomaly_run, tmp_path,
                                                                        capsys):
    # a run made before sets of 2 were refused: evaluate drew its test sets of 2 and died with
    # a traceback (exit 1)
    import shutil

    from attnlab.runs import write_yaml

    run = tmp_path / "old"
    shutil.copytree(anomaly_run, run)
    write_yaml(run / "config.yaml", {**read_yaml(run / "config.yaml"), "set_size": 2})
    capsys.readouterr()
    assert main(["evaluate", str(run)]) == 2
    err = capsys.readouterr().err
    assert err == (f"attnlab: error: {run / 'config.yaml'}: set_size 2: a set of 2 has no odd "
                   f"one, so no test set can score this run; train it again with --set-size 3 "
                   f"or more\n")
