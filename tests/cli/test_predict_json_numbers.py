"""What `predict --json` writes is read by other programs (pandas, `jq`, `json.load`): the
probabilities are the model's own numbers, each the shortest text of its float32, not rounded
to 6 decimals (a class the model gives 1e-13 read 0, an infinite log-loss, and the rounded ones
did not sum to 1) nor written with float32 noise (0.19701890647411346), and every line is
standard JSON (Python's `NaN`, which `jq` and `JSON.parse` refuse, is written null)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import attnlab
from attnlab.cli import main

from ..reliability.conftest import task_data, tiny_args

pytestmark = pytest.mark.slow

TEXTS = ["the film was great", "the film was dull", "lovely", "the film was poor really"]
SETS = ["0 1 2 3 4", "10 11 12 13 14", "7 8 9 20 21", "100 200 300 400 500"]  # anomaly's


@pytest.fixture(scope="module")
def classify_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("json_numbers")
    run = tmp / "run"
    assert main(["train", "classify", *tiny_args("classify", task_data(tmp), "--max-steps", "5"),
                 "--out", str(run)]) == 0
    return run


@pytest.fixture(scope="module")
def anomaly_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("json_numbers_anomaly")
    run = tmp / "run"
    assert main(["train", "anomaly", *tiny_args("anomaly", {}, "--max-steps", "5"),
                 "--out", str(run)]) == 0
    return run


def _classify_logits(run):
    model, tokenizer = attnlab.load(run)
    return [model(torch.tensor([tokenizer.encode(text)]))[0] for text in TEXTS]


def _anomaly_logits(run):
    from attnlab.data.digits_sets import features_of

    model = attnlab.load(run)
    return [model(features_of([int(i) for i in s.split()])[None])[0] for s in SETS]


# task: its run, its inputs, the model's logits for each input alone, and the factor that
# makes the tiny run sure (its logits after 5 steps are about 0.2 apart for anomaly, 1 for
# classify) without a probability below float32's smallest normal number (exp(-87))
CASES = {"classify": ("classify_run", TEXTS, _classify_logits, 60.0),
         "anomaly": ("anomaly_run", SETS, _anomaly_logits, 200.0)}


def _with_head_scaled(run, tmp_path, factor: float):
    """A copy of ``run`` whose last layer (the class logits) is multiplied by ``factor``."""
    copy = shutil.copytree(run, tmp_path / "copy")
    weights = load_file(copy / "model.safetensors")
    head = sorted(k for k in weights if k.startswith("output_net."))[-1].rpartition(".")[0]
    for name in (f"{head}.weight", f"{head}.bias"):
        weights[name] = weights[name] * factor
    save_file(weights, copy / "model.safetensors")
    return copy


def _predict_json(capsys, run, tmp_path, texts=TEXTS) -> list[dict]:
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    capsys.readouterr()  # what training the run printed
    assert main(["predict", str(run), "--input-file", str(path), "--json"]) == 0
    out = capsys.readouterr().out

    def refuse(constant):
        raise ValueError(f"{constant} is not standard JSON")

    return [json.loads(line, parse_constant=refuse) for line in out.splitlines()]


@pytest.mark.parametrize("task", CASES)
def test_probabilities_are_the_models_own_numbers(task, request, tmp_path, capsys):
    """A sure model: the probability of a class (an anomaly position) it all but rules out is
    written as the model gives it, never 0: its log equal to the log-softmax of the model's
    logits for the input alone within 1e-4 (predict batches the inputs with padding, which
    moves a logit by float32 noise, here multiplied by the factor)."""
    fixture, texts, logits_of, factor = CASES[task]
    run = _with_head_scaled(request.getfixturevalue(fixture), tmp_path, factor)
    records = _predict_json(capsys, run, tmp_path, texts)
    with torch.no_grad():
        expected_rows = [row.double().log_softmax(-1) for row in logits_of(run)]
    for record, expected in zip(records, expected_rows, strict=True):
        written = record["probabilities"]
        # in the run's order of labels (positions), as the model's outputs
        values = list(written.values()) if isinstance(written, dict) else written
        assert all(v > 0 for v in values), written
        # each the shortest text of its float32, not float32 noise (0.19701890647411346)
        assert all(float(str(np.float32(v))) == v for v in values), written
        logs = torch.tensor(values, dtype=torch.float64).log()
        torch.testing.assert_close(logs, expected, rtol=0, atol=1e-4)
        assert expected.min() < -20  # the scaled head is sure: a probability below 1e-9
        assert sum(values) == pytest.approx(1.0, abs=1e-6)


def test_a_model_that_gives_nan_writes_standard_json(classify_run, tmp_path, capsys):
    """A model whose outputs are NaN gave the argmax of a NaN row, its first class, as sure as
    any answer: there is no answer (null; plain ``nan``), and one warning says how many."""
    run = _with_head_scaled(classify_run, tmp_path, float("nan"))
    records = _predict_json(capsys, run, tmp_path)
    assert [r["input"] for r in records] == TEXTS
    assert all(set(r["probabilities"].values()) == {None} for r in records)
    assert [r["prediction"] for r in records] == [None] * len(TEXTS)
    assert main(["predict", str(run), "--input-file", str(tmp_path / "inputs.txt")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["nan"] * len(TEXTS)
    warning, = [line for line in err.splitlines() if line.startswith("warning:")]  # one
    assert warning.startswith(f"warning: {run} gives NaN for 4 of 4 inputs (first: "
                              f"--input-file {tmp_path / 'inputs.txt'} line 1)"), warning
