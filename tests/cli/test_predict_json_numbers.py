"""What `predict --json` writes is read by other programs (pandas, `jq`, `json.load`): the
probabilities are the model's own numbers, not rounded to 6 decimals (a class the model gives
1e-13 read 0, an infinite log-loss, and the rounded ones did not sum to 1), and every line is
standard JSON (Python's `NaN`, which `jq` and `JSON.parse` refuse, is written null)."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import attnlab
from attnlab.cli import main

from ..reliability.conftest import task_data, tiny_args

pytestmark = pytest.mark.slow

TEXTS = ["the film was great", "the film was dull", "lovely", "the film was poor really"]


@pytest.fixture(scope="module")
def classify_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("json_numbers")
    run = tmp / "run"
    assert main(["train", "classify", *tiny_args("classify", task_data(tmp), "--max-steps", "5"),
                 "--out", str(run)]) == 0
    return run


def _with_head_scaled(run, tmp_path, factor: float):
    """A copy of ``run`` whose last layer (the class logits) is multiplied by ``factor``."""
    copy = shutil.copytree(run, tmp_path / "copy")
    weights = load_file(copy / "model.safetensors")
    head = sorted(k for k in weights if k.startswith("output_net."))[-1].rpartition(".")[0]
    for name in (f"{head}.weight", f"{head}.bias"):
        weights[name] = weights[name] * factor
    save_file(weights, copy / "model.safetensors")
    return copy


def _predict_json(capsys, run, tmp_path) -> list[dict]:
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["predict", str(run), "--input-file", str(path), "--json"]) == 0
    out = capsys.readouterr().out

    def refuse(constant):
        raise ValueError(f"{constant} is not standard JSON")

    return [json.loads(line, parse_constant=refuse) for line in out.splitlines()]


def test_probabilities_are_the_models_own_numbers(classify_run, tmp_path, capsys):
    """A sure model: the probability of a class it all but rules out is written as the model
    gives it, never 0: its log equal to the log-softmax of the model's logits for the text
    alone within 1e-4 (predict batches the texts with padding, which moves a logit by float32
    noise, here multiplied by the factor of 60)."""
    run = _with_head_scaled(classify_run, tmp_path, 60.0)
    records = _predict_json(capsys, run, tmp_path)
    model, tokenizer = attnlab.load(run)
    for text, record in zip(TEXTS, records, strict=True):
        with torch.no_grad():
            expected = model(torch.tensor([tokenizer.encode(text)])).double().log_softmax(-1)[0]
        written = record["probabilities"]
        names = list(written)  # in the run's order of labels, as the model's outputs
        assert all(written[n] > 0 for n in names), written
        logs = torch.tensor([written[n] for n in names], dtype=torch.float64).log()
        torch.testing.assert_close(logs, expected, rtol=0, atol=1e-4)
        assert expected.min() < -20  # the scaled head is sure: a probability below 1e-9
        assert sum(written.values()) == pytest.approx(1.0, abs=1e-6)


def test_a_model_that_gives_nan_writes_standard_json(classify_run, tmp_path, capsys):
    run = _with_head_scaled(classify_run, tmp_path, float("nan"))
    records = _predict_json(capsys, run, tmp_path)
    assert [r["input"] for r in records] == TEXTS
    assert all(set(r["probabilities"].values()) == {None} for r in records)
