"""``translate`` from Python checks ``num_beams`` and ``length_penalty`` as ``attnlab
translate`` checks ``--beam`` and ``--length-penalty`` (one declaration): ``num_beams=0``
translated with the run's own beams in silence, where ``--beam 0`` is refused."""
import pytest

from attnlab.cli import main
from attnlab.loading import check_run_dir
from attnlab.tasks import get_task

from ..reliability.conftest import task_data, tiny_args

pytestmark = pytest.mark.slow  # trains a run


@pytest.fixture(scope="module")
def translate_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("translate_beams")
    assert main(["train", "translate", *tiny_args("translate", task_data(tmp), "--max-steps", "2"),
                 "--beam", "2", "--out", str(tmp / "run")]) == 0
    return tmp / "run"


@pytest.mark.parametrize("options, message", [
    ({"num_beams": 0}, "num_beams must be a positive integer, got 0"),
    ({"num_beams": -1}, "num_beams must be a positive integer, got -1"),
    ({"num_beams": 101}, "num_beams 101 is too large (at most 100)"),
    ({"length_penalty": float("nan")}, "length_penalty must be a number, got nan"),
])
def test_a_bad_beam_is_refused_as_the_command_refuses_it(translate_run, options, message,
                                                        capsys):
    run_dir, cfg = check_run_dir(translate_run)
    task = get_task(cfg.task)
    with pytest.raises(ValueError) as e:
        task.runtime().translate(task, run_dir, cfg, ["seven"], **options)
    assert str(e.value).startswith(message)
    flag = "--beam" if "num_beams" in options else "--length-penalty"
    value = str(next(iter(options.values())))
    capsys.readouterr()
    assert main(["translate", str(translate_run), "seven", flag, value]) == 2  # as the CLI
    assert flag in capsys.readouterr().err


def test_given_beams_translate_as_the_command(translate_run, capsys):
    run_dir, cfg = check_run_dir(translate_run)
    task = get_task(cfg.task)
    ours = task.runtime().translate(task, run_dir, cfg, ["seven", "twelve"], num_beams=1)
    capsys.readouterr()
    assert main(["translate", str(translate_run), "seven", "twelve", "--beam", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == ours



def _greedy_penalty_refusal(run, **options):
    run_dir, cfg = check_run_dir(run)
    task = get_task(cfg.task)
    with pytest.raises(ValueError) as e:
        task.runtime().translate(task, run_dir, cfg, ["seven"], length_penalty=0.5, **options)
    return str(e.value)


def test_a_length_penalty_for_greedy_decoding_is_refused_as_the_command_refuses_it(
        translate_run, tmp_path):
    # it translated, the penalty ignored without a word, where the command refuses it
    assert _greedy_penalty_refusal(translate_run, num_beams=1) == (
        "length_penalty=0.5 is for beam search, and this translation is greedy (num_beams=1); "
        "give num_beams=N > 1 with it, or drop it")
    greedy = tmp_path / "run"  # greedy by its own setting
    assert main(["train", "translate", *tiny_args("translate", task_data(tmp_path),
                                                  "--max-steps", "1"),
                 "--beam", "1", "--out", str(greedy)]) == 0
    assert "(num_beams=1, the run's setting)" in _greedy_penalty_refusal(greedy)
