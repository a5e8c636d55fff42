"""docs/images/attention_explorer_translate.png is made by a script, as the docs' other pictures
are: docs/figures/attention_explorer_translate.py, which `make docs-images` runs."""
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from attnlab.cli import main
from attnlab.explorer import read_data

from ..reliability.conftest import task_data, tiny_args

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "figures" / "attention_explorer_translate.py"

pytestmark = pytest.mark.slow  # trains a run and opens a browser


def _script():
    """The script's names (run as a file, not as __main__: nothing is trained)."""
    return SimpleNamespace(**runpy.run_path(str(SCRIPT)))


def test_make_docs_images_renews_the_translate_picture():
    """The picture had no script: a change to the page left it showing an older page, and
    nothing renewed it. `make docs-images` now runs its script into the docs' own file."""
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = make.split("\ndocs-images:", 1)[1].split("\n\n", 1)[0]
    assert "docs/figures/attention_explorer_translate.py" in recipe
    assert _script().OUT == ROOT / "docs" / "images" / "attention_explorer_translate.png"


def test_make_docs_images_reuses_a_trained_translator():
    """`make docs-images` trained a 600-step translator on every call and threw it away; with
    TRANSLATE_RUN it shows that run instead (`make -n` prints the recipe, runs nothing)."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make")

    def recipe(*var):
        done = subprocess.run(["make", "-n", "docs-images", *var], cwd=ROOT, check=True,
                              stdout=subprocess.PIPE, text=True)
        return next(line for line in done.stdout.splitlines() if "translate.py" in line)

    assert recipe("TRANSLATE_RUN=runs/my de").endswith('translate.py --run "runs/my de"')
    assert "--run" not in recipe()


def test_the_picture_is_the_cross_attention_with_the_row_pinned(tmp_path, capsys):
    """What the docs say of the picture: a 1280 x 800 page on its cross-attention, layer 1
    head 1, one target token's row pinned; its readout is that row of the model's weights."""
    from PIL import Image

    run = tmp_path / "de"
    assert main(["train", "translate", *tiny_args("translate", task_data(tmp_path),
                                                  "--max-steps", "2"), "--out", str(run)]) == 0
    page = tmp_path / "page.html"
    assert main(["view", str(run), "--input", "342", "--out", str(page)]) == 0
    data = read_data(page.read_text(encoding="utf-8"))
    cross = next(layer for layer in data["layers"] if layer["group"] == "cross")
    row = 0  # a 2-step model may end its translation after one token
    out = tmp_path / "shot.png"
    read = _script().shoot(page, cross["query_tokens"][row], out)
    image = np.asarray(Image.open(out).convert("RGB"))
    assert image.shape[:2] == (800, 1280) and len(np.unique(image.reshape(-1, 3), axis=0)) > 50
    expected = sorted(zip(cross["key_tokens"], cross["weights"][0][row]), key=lambda kw: -kw[1])
    assert read == [(k, f"{w:.4f}") for k, w in expected]
    docs = np.asarray(Image.open(_script().OUT).convert("RGB"))
    assert docs.shape == image.shape  # the committed picture: a page of the same size


def test_the_script_runs_this_checkouts_attnlab(monkeypatch, tmp_path):
    """Its `python -m attnlab` ran whichever attnlab the Python had installed (another
    checkout's page in this checkout's picture); its PYTHONPATH now starts with this one."""
    import os
    import subprocess

    seen = {}

    def run(cmd, **kw):
        seen.update(kw)
        return SimpleNamespace(stdout="")

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setattr(subprocess, "run", run)
    _script().attnlab("--version", cwd=tmp_path)
    assert seen["env"]["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]


def test_a_row_not_in_the_translation_is_one_line_and_no_picture(tmp_path, capsys):
    """`--row` of a token the translation lacks was a traceback; it is one line naming --row,
    exit 2, and no picture is written."""
    run = tmp_path / "de"
    assert main(["train", "translate", *tiny_args("translate", task_data(tmp_path),
                                                  "--max-steps", "2"), "--out", str(run)]) == 0
    capsys.readouterr()
    out = tmp_path / "shot.png"
    with pytest.raises(SystemExit) as exit_:
        _script().main(["--run", str(run), "--input", "342", "--row", "nowhere",
                        "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--row 'nowhere'" in err, err
    assert not out.exists()
