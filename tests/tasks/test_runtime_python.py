"""A task's runtime called from Python, as a notebook calls it after ``attnlab train``:
``predict_many`` gives what ``attnlab predict --json`` gives for the same texts, value by value
(no class for an input whose outputs are NaN, where the command says null); a text given as
one ``str``, bytes or a number is a ``TypeError`` naming it, not one input per character or a
traceback from inside the tokenizer (``attention_maps``' one text likewise, and a blank one
is refused as ``plot attention`` refuses it); and neither ``attnlab.load``, ``predict_many`` nor
``attention_maps`` nor ``evaluate`` moves what a seeded notebook draws next."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import attnlab
from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.loading import check_run_dir
from attnlab.tasks import get_task

# the tiny classify run (a fixture), its texts, ``predict --json``, a copy with its head scaled
from ..cli.test_predict_json_numbers import TEXTS, _predict_json, _with_head_scaled, classify_run  # noqa: F401
from ..reliability.conftest import task_data, tiny_args

pytestmark = pytest.mark.slow  # trains a run


def predict_many(run, texts, *labels, **options):
    """The runtime's ``predict_many`` as a notebook calls it (no labels: it names them)."""
    run_dir, cfg = check_run_dir(run)
    task = get_task(cfg.task)
    return task.runtime().predict_many(task, run_dir, cfg, texts, *labels, **options)


def test_python_answers_are_the_commands(classify_run, reverse_run, tmp_path, capsys):
    for run, texts in ((classify_run, TEXTS), (reverse_run, ["1 2 3", "4 0 0 1", "9"])):
        records = _predict_json(capsys, run, tmp_path, texts)
        answers = predict_many(run, texts)
        assert [r["prediction"] for r in records] == [a["prediction"] for a in answers]
        assert ([r.get("probabilities") for r in records]
                == [a.get("probabilities") for a in answers])


def test_nan_outputs_give_no_class_as_the_command_does(classify_run, tmp_path, capsys):
    """The argmax of a NaN row is the first class, as sure as any answer: Python gave it where
    the command says null."""
    run = _with_head_scaled(classify_run, tmp_path, float("nan"))
    records = _predict_json(capsys, run, tmp_path)
    assert [r["prediction"] for r in records] == [None] * len(TEXTS)
    answers = predict_many(run, TEXTS)
    assert [a["prediction"] for a in answers] == [None] * len(TEXTS)
    warning, = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith("warning:")]  # one, naming the first text as Python gave it
    assert warning == (f"warning: {run} gives NaN for 4 of 4 inputs (first: texts[0]); their "
                       f"prediction is null")


@pytest.mark.parametrize("texts, message", [
    ("the film was great", "texts must be a list of texts, not one str ('the film was great')"),
    ([b"the film"], "texts[0] must be a str, got bytes (b'the film'); decode it first"),
    (["the film", 7], "texts[1] must be a str, got int (7)"),
    (np.array([1, 2]), "texts[0] must be a str, got int64 (np.int64(1))"),
])
def test_texts_of_another_type_are_named(classify_run, texts, message):
    with pytest.raises(TypeError) as e:
        predict_many(classify_run, texts)
    assert str(e.value).startswith(message)


def test_texts_that_python_gives(classify_run, reverse_run, lm_and_translate_runs, capsys):
    assert predict_many(reverse_run, []) == []  # no texts, no answers, as for a classify run
    assert predict_many(classify_run, []) == []
    # a numpy array of texts, or a tuple, is a list of texts
    assert predict_many(classify_run, np.array(TEXTS)) == predict_many(classify_run, tuple(TEXTS))
    # an input error names the text by its place in the list
    with pytest.raises(UsageError, match=r"^texts\[1\] is empty"):
        predict_many(reverse_run, ["1 2", " "])
    # a blank text is refused, as predict --input ' ' is: a classify run called it 'neg' at
    # 0.667, a translate run translated it and an lm run continued it
    for run in (classify_run, *lm_and_translate_runs):
        for blank in ("", " ", "\t\n"):
            with pytest.raises(UsageError) as e:
                predict_many(run, ["the film", blank])
            assert str(e.value) == "texts[1] is empty"
        with pytest.raises(UsageError) as e:  # named by the caller's label
            predict_many(run, [" "], ["reviews.txt line 1"])
        assert str(e.value) == "reviews.txt line 1 is empty"
    with pytest.raises(ValueError, match="labels must name each of the 2 texts, got 1"):
        predict_many(reverse_run, ["1 2", "3"], ["line 1"])


def test_loading_and_predicting_keep_the_seeded_stream(classify_run, reverse_run):
    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(0)
    attnlab.load(classify_run)
    attnlab.load(reverse_run)
    predict_many(classify_run, TEXTS)
    predict_many(reverse_run, ["1 2 3"])
    assert torch.equal(torch.rand(4), expected)


def attention_maps(run, text):
    run_dir, cfg = check_run_dir(run)
    task = get_task(cfg.task)
    return task.runtime().attention_maps(task, run_dir, cfg, text)


@pytest.mark.parametrize("text, error, message", [
    (b"the film", TypeError, "text must be a str, got bytes (b'the film'); decode it first"),
    (["the film"], TypeError, "text must be a str, got list (['the film'])"),
    # a classify model failed inside on no tokens: "token inputs must be integer ids"
    ("  ", UsageError, "text is empty"),
])
def test_attention_maps_of_a_text_that_is_none_are_named(classify_run, text, error, message):
    with pytest.raises(error) as e:
        attention_maps(classify_run, text)
    assert str(e.value) == message


def test_attention_maps_name_the_text_not_the_flag(reverse_run, tmp_path, capsys):
    """A Python caller gave ``text``, not ``--input`` (which ``plot attention`` still names)."""
    with pytest.raises(UsageError) as e:
        attention_maps(reverse_run, "1 x")
    assert str(e.value).startswith("text: token 'x' is not a symbol of this model")
    assert main(["plot", "attention", str(reverse_run), "--input", "1 x",
                 "--out", str(tmp_path / "a.png")]) == 2
    assert capsys.readouterr().err.startswith(
        "attnlab: error: --input: token 'x' is not a symbol of this model")
    assert not (tmp_path / "a.png").exists()


def test_attention_maps_and_evaluate_keep_the_seeded_stream(classify_run, reverse_run):
    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(0)
    for run, text in ((classify_run, TEXTS[0]), (reverse_run, "1 2 3")):
        maps, _, _ = attention_maps(run, text)
        assert not any(m.requires_grad for m in maps)  # nothing to detach in a notebook
        run_dir, cfg = check_run_dir(run)
        task = get_task(cfg.task)
        task.runtime().evaluate(task, run_dir, cfg, None)
    assert torch.equal(torch.rand(4), expected)


@pytest.fixture(scope="module")
def lm_and_translate_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runtime_python_decoding")
    data = task_data(tmp)
    for task in ("lm", "translate"):
        assert main(["train", task, *tiny_args(task, data, "--max-steps", "3"),
                     "--out", str(tmp / task)]) == 0
    return tmp / "lm", tmp / "translate"


@pytest.mark.parametrize("n, message", [
    ("5", "max_new_tokens must be a positive integer, got '5'"),   # failed inside generation
    (0, "max_new_tokens must be a positive integer, got 0"),  # as predict refuses it
    (True, "max_new_tokens must be a positive integer, got True"),
])
def test_an_lm_continuation_length_is_checked_as_the_flag(lm_and_translate_runs, n, message):
    """By --max-new-tokens' rule, named as the argument a Python caller gave."""
    with pytest.raises(UsageError) as e:
        predict_many(lm_and_translate_runs[0], ["the "], max_new_tokens=n)
    assert str(e.value).startswith(message)


def test_an_lm_continuation_length_may_be_a_numpy_integer(lm_and_translate_runs):
    """``np.int64(3)`` (a length read from an array) was refused as not an integer."""
    run = lm_and_translate_runs[0]
    assert (predict_many(run, ["the "], max_new_tokens=np.int64(3))
            == predict_many(run, ["the "], max_new_tokens=3))


def test_translate_from_python_takes_a_list_of_texts(lm_and_translate_runs):
    """One ``str`` was translated character by character: five translations of "seven"."""
    run = lm_and_translate_runs[1]
    run_dir, cfg = check_run_dir(run)
    task = get_task(cfg.task)
    with pytest.raises(TypeError, match=r"^texts must be a list of texts, not one str \('seven'\)"):
        task.runtime().translate(task, run_dir, cfg, "seven")
    assert len(task.runtime().translate(task, run_dir, cfg, ["seven"])) == 1
