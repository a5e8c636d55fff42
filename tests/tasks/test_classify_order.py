"""The order of a classifier's classes (its outputs, metrics.json, the confusion matrix):
classes named by numbers in the numbers' order; a run whose classes were ordered as text (runs
from before) keeps its head's meaning when resumed or used as --init."""
import pytest
from safetensors.torch import load_file

from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks.classify import data as classify_data
from attnlab.tasks.classify import runtime as classify_runtime

TINY = ["--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "32",
        "--warmup", "1", "--val-every", "2", "--checkpoint-every", "2"]
HEAD = "output_net.4"  # SequenceClassifier's last layer: a row per class


def _write(path):
    rows = [f"word{i % 7} thing{i % 3},{(i % 3) * 5 + 2}" for i in range(60)]  # 2, 7, 12
    path.write_text("\n".join(["text,label", *rows]) + "\n")
    return path


def _as_text_order(monkeypatch):
    """Train as runs from before did: classes sorted as text (12, 2, 7)."""
    monkeypatch.setattr(classify_runtime, "classes_of", lambda splits: sorted(
        classify_data.classes_of(splits)))


def _head(run):
    state = load_file(str(run / "model.safetensors"))
    return state[f"{HEAD}.weight"], state[f"{HEAD}.bias"]


@pytest.mark.slow
def test_classes_named_by_numbers_are_in_the_numbers_order(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "classify", "--data", str(_write(tmp_path / "c.csv")), "--out",
                 str(run), "--max-steps", "2", *TINY]) == 0
    assert read_yaml(run / "config.yaml")["labels"] == ["2", "7", "12"]
    assert (run / "confusion.csv").read_text().splitlines()[0] == "true \\ predicted,2,7,12"
    table = [line.split()[0] for line in capsys.readouterr().out.splitlines()
             if line.split()[:1] in (["2"], ["7"], ["12"])]  # the per-class table's rows
    assert table == ["2", "7", "12"]


@pytest.mark.slow
def test_a_text_ordered_run_resumed_keeps_its_classes_order(tmp_path, monkeypatch):
    data, run = _write(tmp_path / "c.csv"), tmp_path / "run"
    with monkeypatch.context() as patch:
        _as_text_order(patch)
        assert main(["train", "classify", "--data", str(data), "--out", str(run),
                     "--max-steps", "2", *TINY]) == 0
    assert read_yaml(run / "config.yaml")["labels"] == ["12", "2", "7"]
    assert main(["train", "classify", "--data", str(data), "--out", str(run), "--resume",
                 "--max-steps", "4", *TINY]) == 0
    assert read_yaml(run / "config.yaml")["labels"] == ["12", "2", "7"]  # the head's rows


@pytest.mark.slow
def test_init_from_a_text_ordered_run_moves_the_head_rows_with_their_classes(tmp_path,
                                                                             monkeypatch):
    data, old, new = _write(tmp_path / "c.csv"), tmp_path / "old", tmp_path / "new"
    with monkeypatch.context() as patch:
        _as_text_order(patch)
        assert main(["train", "classify", "--data", str(data), "--out", str(old),
                     "--max-steps", "2", *TINY]) == 0
    # a learning rate too small to move a weight: the new run's head is the one it started from
    assert main(["train", "classify", "--data", str(data), "--out", str(new), "--init",
                 str(old), "--max-steps", "1", "--lr", "1e-12", *TINY]) == 0
    assert read_yaml(new / "config.yaml")["labels"] == ["2", "7", "12"]
    (old_w, old_b), (new_w, new_b) = _head(old), _head(new)
    rows = [1, 2, 0]  # 2, 7, 12 in the old run's 12, 2, 7
    assert (new_w - old_w[rows]).abs().max() < 1e-6
    assert (new_b - old_b[rows]).abs().max() < 1e-6


def test_init_from_a_run_of_other_classes_says_the_head_starts_anew(capsys):
    """A run from --init of a run whose classes are spelled otherwise ('100.0' there, '1e2'
    in this run's JSONL) silently trained a new last layer; now one line says so, and
    nothing is said where the classes are the same."""
    import torch

    from attnlab.models import SequenceClassifier
    from attnlab.tasks.classify.start import Start

    def model():
        return SequenceClassifier(2, vocab_size=20, model_dim=8, num_heads=2, num_layers=1)

    torch.manual_seed(0)
    start = Start(model=model(), labels=["2.5", "100.0"])
    start.weights_into(model(), ["2.5", "100.0"])
    assert capsys.readouterr().err == ""
    start.weights_into(model(), ["2.50", "1e2"])
    assert capsys.readouterr().err == (
        "note: the --init run's classes ('2.5', '100.0') are not this run's ('2.50', '1e2'): "
        "the last layer of the head starts anew, the rest from the --init run\n")


def test_the_new_head_note_is_said_by_the_first_ddp_process_alone(capsys, monkeypatch):
    """Each DDP process builds its model from --init RUN: the note that the head starts anew
    was said once per process."""
    from attnlab.models import SequenceClassifier
    from attnlab.settings import RANK_KEYS
    from attnlab.tasks.classify.start import Start

    def model():
        return SequenceClassifier(2, vocab_size=20, model_dim=8, num_heads=2, num_layers=1)

    for key in RANK_KEYS:
        monkeypatch.delenv(key, raising=False)
    start = Start(model=model(), labels=["a", "b"])
    for rank, said in ((None, True), ("1", False)):
        if rank:
            monkeypatch.setenv("LOCAL_RANK", rank)
        start.weights_into(model(), ["c", "d"])
        assert ("the last layer of the head starts anew" in capsys.readouterr().err) is said


@pytest.mark.slow
def test_init_from_a_run_made_before_decimals_were_read_as_written_keeps_its_head(
        tmp_path, capsys):
    """A classify run made before a JSONL decimal was read as written (config.yaml without
    json_decimals_as_written) named its classes '2.5' and '100.0'; a run from --init of it on
    the same file read '2.50' and '1e2', said the classes differ and trained a new last layer.
    Now it reads the file as the --init run did: the same classes, its head kept."""
    from attnlab.runs import write_yaml

    data, old, new = tmp_path / "d.jsonl", tmp_path / "old", tmp_path / "new"
    data.write_text("".join(f'{{"text": "word{i % 7} thing{i % 2}", "label": '
                            f'{["2.50", "1e2"][i % 2]}}}\n' for i in range(60)))
    assert main(["train", "classify", "--data", str(data), "--out", str(old),
                 "--max-steps", "2", *TINY]) == 0
    cfg = read_yaml(old / "config.yaml")
    assert cfg.pop("json_decimals_as_written") is True and cfg["labels"] == ["2.50", "1e2"]
    write_yaml(old / "config.yaml", {**cfg, "labels": ["2.5", "100.0"]})  # as it was written
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--out", str(new), "--init",
                 str(old), "--max-steps", "1", "--lr", "1e-12", *TINY]) == 0
    assert "starts anew" not in capsys.readouterr().err
    recorded = read_yaml(new / "config.yaml")
    assert recorded["labels"] == ["2.5", "100.0"]
    assert recorded["json_decimals_as_written"] is False  # its evaluate reads the file so too
    (old_w, old_b), (new_w, new_b) = _head(old), _head(new)
    assert (new_w - old_w).abs().max() < 1e-6 and (new_b - old_b).abs().max() < 1e-6
