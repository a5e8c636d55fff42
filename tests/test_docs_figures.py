"""The figures of the docs drawn by scripts in docs/figures/: each says what attnlab builds, and
the committed PNG is what its script draws now (else a reader sees a block the code no longer
builds)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "figures" / "llama_block.py"


def _script():
    spec = importlib.util.spec_from_file_location("llama_block", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_llama_figure_labels_the_parts_each_arch_builds():
    figure = _script()
    gpt2, llama = (figure.block_labels(figure.build(s)) for s in figure.COLUMNS.values())
    assert (gpt2["norm"], gpt2["final_norm"], gpt2["gated"], gpt2["rope"]) == \
        ("LayerNorm", "LayerNorm", False, False)
    assert gpt2["heads"] == gpt2["kv_heads"] == 8 and gpt2["bias"]
    assert gpt2["added_positions"] == "LearnedPositionalEncoding"
    assert (llama["norm"], llama["final_norm"], llama["gated"], llama["rope"]) == \
        ("RMSNorm", "RMSNorm", True, True)
    assert (llama["heads"], llama["kv_heads"], llama["activation"]) == (8, 2, "SiLU")
    assert llama["added_positions"] == "NoneType" and not llama["bias"]
    assert gpt2["pre_norm"] and llama["pre_norm"]


def test_the_llama_figures_columns_are_what_their_titles_flags_build():
    from attnlab.models.configs import ARCH_PARTS

    figure = _script()
    titles = list(figure.COLUMNS)
    for title, settings in figure.COLUMNS.items():
        arch = "gpt2" if "gpt2" in title else "llama"
        assert {k: settings[k] for k in ARCH_PARTS[arch]} == ARCH_PARTS[arch], title
    assert f"--num-kv-heads {figure.KV_HEADS}" in titles[1]


@pytest.mark.slow  # draws the figure (matplotlib)
def test_the_committed_llama_figure_is_what_its_script_draws(tmp_path):
    from matplotlib.image import imread

    drawn = _script().draw(tmp_path / "llama_block.png")
    now, committed = imread(drawn), imread(ROOT / "docs" / "images" / "llama_block.png")
    assert now.shape == committed.shape and (now == committed).all(), \
        "docs/images/llama_block.png is stale: python docs/figures/llama_block.py"
