"""`evaluate` of a jets, translate or lm run whose outputs are NaN (trained to NaN) printed a
traceback (jets: tagging_metrics refused the NaN scores, exit 1), scores of 0 with exit 0 and
not a word (translate: greedy search wrote the argmax of NaN rows), or null without a word (lm).
Now each says so as the other tasks do, one warning naming how many inputs and the first, and
writes its metrics null (``attnlab.tasks.base.without_nan_metrics``)."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnlab.cli import main

from ..models.test_generate_finite import nan_later
from ..tasks.test_nan_answers_sequence_tag import _nan_copy

pytestmark = pytest.mark.slow  # reads the session's runs (tests/cli/conftest.py)

KEYS = {"jets": ["test_accuracy", "test_auc", "test_rejection_30", "test_rejection_50"],
        "translate": ["test_bleu", "test_chrf", "test_exact_match"],
        "lm": ["val_loss", "val_perplexity"]}


def _first(task, runs) -> str:
    """What the warning names as the first input of the run's own test (or validation) split."""
    if task == "jets":
        return f"{runs['jets'][1].rpartition(':')[0]}:64"  # 80 jets: the test split's first
    return {"translate": "test pair number 1", "lm": "window 1 of the validation split"}[task]


@pytest.mark.parametrize("task", sorted(KEYS))
def test_evaluate_of_nan_outputs_scores_null_with_one_warning(task, runs, tmp_path, capsys):
    run = _nan_copy(runs[task][0], tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == dict.fromkeys(KEYS[task])
    warning, = [line for line in err.splitlines() if "NaN" in line]
    assert warning.startswith(f"warning: {run} gives NaN for ")
    assert warning.endswith(f" inputs (first: {_first(task, runs)}); its metrics are null")


@pytest.mark.parametrize("task", sorted(KEYS))
def test_evaluate_of_finite_outputs_scores_and_warns_nothing(task, runs, capsys):
    capsys.readouterr()
    assert main(["evaluate", str(runs[task][0]), "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert sorted(scores) == KEYS[task] and all(isinstance(v, float) for v in scores.values())
    assert "NaN" not in err


def _evaluate_data(run, tmp_path, capsys, pairs: str):
    """(scores, stderr lines, the file) of ``evaluate RUN --data`` a TSV of ``pairs``."""
    data = tmp_path / "pairs.tsv"
    data.write_text("source\ttarget\n" + pairs, encoding="utf-8")
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(data), "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err.splitlines(), data


def test_evaluate_data_names_the_first_nan_line_of_the_file(runs, tmp_path, capsys):
    run = _nan_copy(runs["translate"][0], tmp_path)
    scores, err, data = _evaluate_data(run, tmp_path, capsys, "seven\tsieben\neight\tacht\n")
    assert scores == dict.fromkeys(KEYS["translate"])
    assert f"warning: {run} gives NaN for 2 of 2 inputs (first: --data {data} line 2); its " \
           f"metrics are null" in err


def test_evaluate_by_length_of_nan_outputs_scores_every_bucket_null(runs, tmp_path, capsys):
    run = _nan_copy(runs["translate"][0], tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--by-length", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert [scores[key] for key in KEYS["translate"]] == [None] * 3
    assert scores["by_length"] and all(row["exact_match"] is None and row["chrf"] is None
                                       and row["pairs"] > 0 for row in scores["by_length"])
    assert len([line for line in err.splitlines() if "NaN" in line]) == 1
    assert (run / "by_length.png").is_file()


def _nan_later_copy(run, tmp_path, source: str):
    """A copy of a translate ``run`` finite at the first decoding step of ``source`` and NaN
    from the next (``tests/models/test_generate_finite.py``'s ``nan_later``)."""
    import attnlab

    copy = shutil.copytree(run, tmp_path / "nan_later")
    model, tok = attnlab.load(copy)
    nan_later(model, torch.tensor(tok.encode_sources([source])))
    weights = load_file(copy / "model.safetensors")
    state = model.state_dict()
    save_file({k: state[k].contiguous() for k in weights}, copy / "model.safetensors")
    return copy


@pytest.mark.parametrize("beam", ["1", "3"])
def test_evaluate_of_a_run_nan_after_its_first_step_scores_null(runs, tmp_path, beam, capsys):
    """Its first step is finite, so the old check (that step again) scored the NaN argmaxes
    BLEU 0.0 with exit 0 and no word; the search's own logits now say NaN, greedy or beam."""
    run = _nan_later_copy(runs["translate"][0], tmp_path, "seven")
    config = run / "config.yaml"  # the run's own search (evaluate has no --beam)
    config.write_text(config.read_text().replace("\nbeam: 1\n", f"\nbeam: {beam}\n"))
    scores, err, data = _evaluate_data(run, tmp_path, capsys, "seven\tsieben\n")
    assert scores == dict.fromkeys(KEYS["translate"])
    assert [line for line in err if "NaN" in line] == [
        f"warning: {run} gives NaN for 1 of 1 inputs (first: --data {data} line 2); its "
        f"metrics are null"]
