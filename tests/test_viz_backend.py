"""attnlab's figures must not take over matplotlib: in a notebook (or any program that chose
its backend) the user's own plt.show() still draws after attnlab has written a figure, and
attnlab's figures are closed once written, so none is shown twice. Each case runs in its own
interpreter, since a backend is process-wide."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

DRAW = ("import torch\nfrom attnlab.viz import plot_attention\n"
        "plot_attention(torch.rand(1, 3, 3), list('abc'), list('abc'), 'a.png')\n")


def run(code: str, tmp_path, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | env
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


REPORT = "import matplotlib, matplotlib.pyplot as plt\nprint(matplotlib.get_backend(), plt.get_fignums())\n"


@pytest.mark.slow
def test_a_backend_the_user_chose_is_kept(tmp_path):
    code = "import matplotlib\nmatplotlib.use('svg')\nimport matplotlib.pyplot as plt\n" + DRAW + REPORT
    assert run(code, tmp_path) == "svg []"
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_jupyters_inline_backend_is_kept(tmp_path):
    # the kernel says its backend through MPLBACKEND before any pyplot import
    pytest.importorskip("matplotlib_inline")
    inline = "module://matplotlib_inline.backend_inline"
    assert run(DRAW + REPORT, tmp_path, MPLBACKEND=inline) == f"{inline} []"


@pytest.mark.slow
def test_with_no_backend_chosen_attnlab_draws_to_files_only(tmp_path):
    assert run(DRAW + REPORT, tmp_path).lower() == "agg []"
