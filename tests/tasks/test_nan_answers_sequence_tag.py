"""A reverse/copy/sort or tag run whose outputs are NaN (a run trained to NaN) answered with
the argmax of its NaN rows, symbol 0 or the first tag at every position, as sure as any answer;
classify, anomaly and jets said null with one warning. Now every task says it the same way
(``attnlab.tasks.base.without_nan_answers``): the prediction null with ``--json``, the line
``nan``, and one warning naming how many inputs and the first."""
import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from attnlab.cli import main
from attnlab.loading import check_run_dir
from attnlab.tasks import get_task


pytestmark = pytest.mark.slow  # reads the session's tag and reversal runs (tests/conftest.py)

INPUTS = {"reverse": ["1 2 3", "4 0 0 1"], "tag": ["Anna met Bob", "the cat sat"]}


def _nan_copy(run, tmp_path):
    """A copy of ``run`` whose every weight is NaN, as a run trained to NaN leaves them."""
    copy = shutil.copytree(run, tmp_path / "nan")
    weights = load_file(copy / "model.safetensors")
    save_file({k: v * float("nan") if v.is_floating_point() else v for k, v in weights.items()},
              copy / "model.safetensors")
    return copy


@pytest.mark.parametrize("task", ["reverse", "tag"])
def test_nan_outputs_give_no_answer_and_one_warning(task, reverse_run, tag_run, tmp_path,
                                                    capsys):
    run = _nan_copy(reverse_run if task == "reverse" else tag_run, tmp_path)
    texts = INPUTS[task]
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", str(run), "--input-file", str(path), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["prediction"] for r in records] == [None, None]
    assert all("finite" not in r for r in records)  # the runtime's mark is no output
    assert main(["predict", str(run), "--input-file", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["nan", "nan"]
    warning, = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warning == (f"warning: {run} gives NaN for 2 of 2 inputs (first: --input-file "
                       f"{path} line 1); their prediction is null")
    run_dir, cfg = check_run_dir(run)  # from Python, as the command
    answers = get_task(cfg.task).runtime().predict_many(get_task(cfg.task), run_dir, cfg, texts)
    assert [a["prediction"] for a in answers] == [None, None]


@pytest.mark.parametrize("task", ["reverse", "tag"])
def test_finite_outputs_answer_as_before(task, reverse_run, tag_run, capsys):
    run = reverse_run if task == "reverse" else tag_run
    capsys.readouterr()
    assert main(["predict", str(run), "--input", INPUTS[task][0], "--json"]) == 0
    out, err = capsys.readouterr()
    record = json.loads(out)
    assert record["prediction"] is not None and "finite" not in record
    assert "NaN" not in err


@pytest.mark.parametrize("task", ["reverse", "tag"])
def test_evaluate_of_nan_outputs_scores_null_with_one_warning(task, reverse_run, tag_run,
                                                              tmp_path, capsys):
    # evaluate scored the argmax of NaN rows (a tag run's f1 0.7 and recall 1.0, exit 0)
    run = _nan_copy(reverse_run if task == "reverse" else tag_run, tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run)]) == 0
    out, err = capsys.readouterr()
    scores = {k: v for k, v in json.loads(out).items() if k != "test_per_type"}
    assert scores and all(v is None for v in scores.values())
    warning, = [line for line in err.splitlines() if line.startswith("warning:")]
    first = "test sequence 1" if task == "reverse" else "sentence 1 of the test sentences"
    assert warning.startswith(f"warning: {run} gives NaN for ")
    assert f"(first: {first}" in warning and warning.endswith("; its metrics are null")


@pytest.mark.parametrize("task", ["reverse", "tag"])
def test_evaluate_of_finite_outputs_scores_and_warns_nothing(task, reverse_run, tag_run,
                                                             capsys):
    capsys.readouterr()
    assert main(["evaluate", str(reverse_run if task == "reverse" else tag_run)]) == 0
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert all(isinstance(v, float) for k, v in scores.items() if k != "test_per_type")
    assert "NaN" not in err
