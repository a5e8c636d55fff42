"""``attnlab train translate --init DIR`` makes its data splits once: the check that every pair
fits the checkpoint's positions (``validate``) and the run read the same splits, so the
built-in data's tokeniser sample (5,000 pairs spelled out by num2words: seconds) is not made
twice, nor a --data file read twice. Tiny random Marian (``test_init_translate``'s)."""
import pytest

from .conftest import transformers  # noqa: F401  (skips without the hf extra)

import attnlab.tasks.translate.runtime as runtime  # noqa: E402
from attnlab.cli import main  # noqa: E402
from tests.interop.test_init_translate import STEPS, files  # noqa: E402,F401  (a fixture)


def _count(monkeypatch, name):
    made = []
    real = getattr(runtime, name)

    def spy(cfg):
        made.append(name)
        return real(cfg)

    monkeypatch.setattr(runtime, name, spy)
    return made


@pytest.mark.slow  # trains two runs
@pytest.mark.parametrize("data", ["builtin", "file"])
def test_the_splits_are_made_once_from_the_check_to_the_run(files, tmp_path, monkeypatch,
                                                             capsys, data):
    name = "builtin_splits" if data == "builtin" else "file_splits"
    made = _count(monkeypatch, name)
    where = (["--max-number", "20", "--test-size", "3", "--val-size", "3"] if data == "builtin"
             else ["--data", str(files / "pairs.csv")])
    out = tmp_path / "run"
    assert main(["train", "translate", "--init", str(files / "marian"), *where, "--out",
                 str(out), *STEPS]) == 0, capsys.readouterr().err
    assert made == [name]
    assert (out / "metrics.json").is_file()
