"""``attention_maps`` called from Python names its input ``text`` in its notes, as its errors
already did: a word the run never saw was said of ``--input``, a flag the caller never
gave; ``plot attention`` still says ``--input``."""
import pytest

from attnlab.cli import main
from attnlab.loading import check_run_dir
from attnlab.tasks import get_task

from ..reliability.conftest import task_data, tiny_args

pytestmark = pytest.mark.slow  # trains a run

UNSEEN = "the \u03a9\u03a9 cat"  # Ω: no character of the run's text


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attention_notes")
    assert main(["train", "lm", *tiny_args("lm", task_data(tmp), "--max-steps", "2"),
                 "--out", str(tmp / "run")]) == 0
    return tmp / "run"


def test_a_note_names_the_python_argument(lm_run, tmp_path, capsys):
    _notes_name_text(lm_run, UNSEEN, "note: text ", tmp_path, capsys)


def _notes_name_text(run, text, start, tmp_path, capsys):
    """``attention_maps(text)``'s notes name ``text`` (one starting ``start``), and are
    ``plot attention --input TEXT``'s with ``--input`` said as ``text``."""
    run_dir, cfg = check_run_dir(run)
    task = get_task(cfg.task)
    capsys.readouterr()
    task.runtime().attention_maps(task, run_dir, cfg, text)
    python = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert python and all("--input" not in line for line in python), python
    assert any(line.startswith(start) for line in python), python
    assert main(["plot", "attention", str(run), "--input", text,
                 "--out", str(tmp_path / "a.png")]) == 0
    command = [line for line in capsys.readouterr().err.splitlines()
               if line.startswith("note:")]
    assert [line.replace("--input", "text", 1) for line in command] == python


def test_a_classify_runs_cut_note_names_the_python_argument(tmp_path, capsys):
    # a text longer than --max-len: its note said "--input has 12 tokens" from Python
    run = tmp_path / "run"
    assert main(["train", "classify", *tiny_args("classify", task_data(tmp_path),
                                                 "--max-steps", "2", "--max-len", "4"),
                 "--out", str(run)]) == 0
    _notes_name_text(run, "the film was great " * 3, "note: text has ", tmp_path, capsys)
