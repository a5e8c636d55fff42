"""`translate` and `predict` of a translate run whose outputs are NaN (a run trained to NaN)
printed empty translations, the argmax of NaN rows, with exit 0 and not a word. Now they follow
the rule of every task's `predict` (``attnlab.tasks.base.without_nan_answers``): no answer
(``nan``; null with --json) and ONE warning on stderr naming how many inputs and the first."""
from __future__ import annotations

import json

import pytest

from attnlab.cli import main

from ..tasks.test_nan_answers_sequence_tag import _nan_copy

pytestmark = pytest.mark.slow  # reads the session's runs (tests/cli/conftest.py)


def _nan_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "NaN" in line]


def test_translate_of_nan_outputs_answers_null_with_one_warning(runs, tmp_path, capsys):
    run = _nan_copy(runs["translate"][0], tmp_path)
    inputs = tmp_path / "numbers.txt"
    inputs.write_text("12\n34\n5\n")
    capsys.readouterr()
    assert main(["translate", str(run), "--input-file", str(inputs), "--json",
                 "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [
        {"input": text, "translation": None} for text in ("12", "34", "5")]
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 3 of 3 inputs (first: "
                               f"--input-file {inputs} line 1); their prediction is null"]
    assert main(["translate", str(run), "12", "34", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["nan", "nan"]
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 2 of 2 inputs (first: TEXT "
                               f"number 1); their prediction is null"]


def test_predict_of_a_nan_translate_run_answers_null_with_one_warning(runs, tmp_path, capsys):
    run = _nan_copy(runs["translate"][0], tmp_path)
    capsys.readouterr()
    assert main(["predict", str(run), "--input", "12", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["nan"]
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 1 of 1 inputs (first: --input); "
                               f"their prediction is null"]


def test_translate_of_finite_outputs_warns_nothing(runs, capsys):
    capsys.readouterr()
    assert main(["translate", str(runs["translate"][0]), "12", "34", "--json",
                 "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert all(isinstance(json.loads(line)["translation"], str) for line in out.splitlines())
    assert _nan_lines(err) == []


def test_train_translate_whose_weights_went_nan_writes_null_scores(tmp_path, monkeypatch, capsys):
    """A run whose weights are NaN when training ends (a last step that overflowed them with a
    loss still finite) wrote test_bleu 0.0 into metrics.json, a score as if computed."""
    import torch

    import attnlab.training as training

    real_fit = training.fit

    def fit_to_nan(module, *args, **kwargs):
        result = real_fit(module, *args, **kwargs)
        with torch.no_grad():
            for p in module.parameters():
                p.fill_(float("nan"))
        return result

    monkeypatch.setattr(training, "fit", fit_to_nan)
    run = tmp_path / "run"
    assert main(["train", "translate", "--max-number", "200", "--test-size", "8", "--val-size",
                 "8", "--num-layers", "1", "--batch-size", "16", "--model-dim", "16",
                 "--num-heads", "2", "--dim-feedforward", "32", "--max-steps", "2",
                 "--threads", "1", "--out", str(run)]) == 0
    err = capsys.readouterr().err
    metrics = json.loads((run / "metrics.json").read_text())
    assert {k: metrics[k] for k in ("test_bleu", "test_chrf", "test_exact_match")} == \
        dict.fromkeys(("test_bleu", "test_chrf", "test_exact_match"))
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 8 of 8 inputs (first: test pair "
                               f"number 1); its metrics are null"]


def test_evaluate_of_a_diverged_lm_run_writes_its_perplexity_null_and_says_why(runs, tmp_path,
                                                                            capsys):
    """A val_loss past 709.78 nats has an exp past the largest float: val_perplexity read
    1.01423e+304, exp(700), a number as if measured."""
    import shutil

    from safetensors.torch import load_file, save_file

    run = shutil.copytree(runs["lm"][0], tmp_path / "diverged")
    weights = load_file(run / "model.safetensors")
    weights["lm_head.weight"] = weights["lm_head.weight"] * 1e4  # huge, finite logits
    save_file(weights, run / "model.safetensors")
    capsys.readouterr()
    assert main(["evaluate", str(run), "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert scores["val_loss"] > 709.78 and scores["val_perplexity"] is None
    note, = [line for line in err.splitlines() if "val_perplexity" in line]
    assert note.startswith("note: val_perplexity is null: exp(val_loss), val_loss ")


def _nan_chat_run(tmp_path):
    """(a run trained on chat rows from a tiny chat model, every weight then NaN; its rows)."""
    pytest.importorskip("transformers")
    from ..interop.test_instruct_lm import TRAIN, _rows, _write, save_chat_model

    rows = _write(tmp_path / "rows.jsonl", _rows())
    run = tmp_path / "sft"
    steps = ["--max-steps", "2", *TRAIN[2:]]
    assert main(["train", "lm", "--init", str(save_chat_model(tmp_path / "chatml")), "--data",
                 str(rows), "--out", str(run), *steps]) == 0
    return _nan_copy(run, tmp_path), rows


def test_evaluate_of_a_nan_instruction_run_scores_null_with_one_warning(tmp_path, capsys):
    """An lm run trained on chat rows had no NaN rule: evaluate wrote null without a word."""
    run, rows = _nan_chat_run(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"val_loss": None, "val_perplexity": None}
    warning, = _nan_lines(err)
    assert warning.startswith(f"warning: {run} gives NaN for ")
    assert warning.endswith(f" inputs (first: conversation 1 of --data {rows}, held out); its "
                            f"metrics are null")


def test_predict_and_generate_of_a_nan_lm_run_warn_once_and_sampling_ends(runs, tmp_path,
                                                                          capsys):
    """predict of an lm run trained to NaN printed an empty continuation without a word, and
    generate's sampling stopped with torch.multinomial's traceback."""
    run = _nan_copy(runs["lm"][0], tmp_path)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the quick\nthe fox\n")
    capsys.readouterr()
    assert main(["predict", str(run), "--input-file", str(prompts), "--max-new-tokens", "3",
                 "--json", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["prediction"] for line in out.splitlines()] == [None, None]
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 2 of 2 inputs (first: "
                               f"--input-file {prompts} line 1); their prediction is null"]
    for sampling in (["--seed", "1"], ["--greedy"]):
        assert main(["generate", str(run), "--input-file", str(prompts), "--max-new-tokens",
                     "3", *sampling]) == 0
        out, err = capsys.readouterr()
        assert len(out.splitlines()) == 2
        assert _nan_lines(err) == [f"warning: {run} gives NaN for 2 of 2 inputs (first: "
                                   f"--input-file {prompts} line 1); their text is the argmax "
                                   f"of NaN scores, not the model's"]


def test_generate_of_a_finite_lm_run_warns_nothing(runs, capsys):
    capsys.readouterr()
    assert main(["generate", str(runs["lm"][0]), "--prompt", "the quick", "--max-new-tokens",
                 "3", "--seed", "1"]) == 0
    assert _nan_lines(capsys.readouterr().err) == []


def _one_nan_row(run, tmp_path):
    """A copy of ``run`` whose first embedding row alone is NaN (a token whose update
    overflowed)."""
    import shutil

    from safetensors.torch import load_file, save_file

    copy = shutil.copytree(run, tmp_path / "one_nan_row")
    weights = load_file(copy / "model.safetensors")
    name = next(k for k in weights if "embed" in k and weights[k].dim() == 2)
    weights[name][0] = float("nan")
    save_file(weights, copy / "model.safetensors")
    return copy


@pytest.mark.parametrize("whose", ["every weight", "one embedding row"])
@pytest.mark.parametrize("argv", [["translate", "12"], ["evaluate"],
                                  ["generate", "--prompt", "the quick", "--max-new-tokens", "2"]],
                         ids=["translate", "evaluate lm", "generate"])
def test_quantize_of_a_nan_run_is_refused_in_one_line(argv, whose, runs, tmp_path, capsys):
    """--quantize int8 of a run trained to NaN stopped with torch's traceback ("min should be
    less than or equal to max"), exit 1."""
    task = "translate" if argv[0] == "translate" else "lm"
    run = (_nan_copy if whose == "every weight" else _one_nan_row)(runs[task][0], tmp_path)
    capsys.readouterr()
    assert main([argv[0], str(run), *argv[1:], "--quantize", "int8", "--threads", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == (f"attnlab: error: --quantize int8: {run}'s weights hold NaN "
                                    f"(a run trained to NaN); run without --quantize")


def test_predict_and_generate_chat_of_a_nan_instruction_run_warn_once(tmp_path, capsys):
    """A chat run trained to NaN replied with an empty text (the argmax of NaN rows) and not a
    word: predict's answer is now null, and generate --chat warns, as for any lm run."""
    run, _ = _nan_chat_run(tmp_path)
    capsys.readouterr()
    assert main(["predict", str(run), "--input", "hello", "--json", "--max-new-tokens", "3",
                 "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["prediction"] is None
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 1 of 1 inputs (first: --input); "
                               f"their prediction is null"]
    assert main(["generate", str(run), "--chat", "hello", "--max-new-tokens", "3",
                 "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 1 of 1 inputs (first: --chat); "
                               f"their text is the argmax of NaN scores, not the model's"]


def test_generate_json_of_a_nan_run_writes_null_text(runs, tmp_path, capsys):
    """generate --json wrote the argmax of NaN rows as an input's "text", unmarked; predict
    --json writes such an answer null."""
    run = _nan_copy(runs["lm"][0], tmp_path)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the quick\nthe fox\n")
    capsys.readouterr()
    assert main(["generate", str(run), "--input-file", str(prompts), "--max-new-tokens", "3",
                 "--greedy", "--json", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [
        {"prompt": "the quick", "text": None}, {"prompt": "the fox", "text": None}]
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 2 of 2 inputs (first: "
                               f"--input-file {prompts} line 1); their text is null"]


def test_an_interrupted_generate_of_a_nan_run_still_warns(runs, tmp_path, capsys, monkeypatch):
    """The warning was said after the file's run had ended: a run stopped (Ctrl-C) after some
    inputs printed their texts and never said they came from NaN."""
    import attnlab.commands.generate as generate

    run = _nan_copy(runs["lm"][0], tmp_path)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the quick\nthe fox\n")
    real = generate.continuation
    calls = []

    def stop_at_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(generate, "continuation", stop_at_the_second)
    capsys.readouterr()
    assert main(["generate", str(run), "--input-file", str(prompts), "--max-new-tokens", "3",
                 "--greedy", "--threads", "1"]) != 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1
    assert _nan_lines(err) == [f"warning: {run} gives NaN for 1 of 2 inputs (first: "
                               f"--input-file {prompts} line 1); their text is the argmax of "
                               f"NaN scores, not the model's"]
