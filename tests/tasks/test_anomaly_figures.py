"""What a learner sees of an anomaly run: the figures drawn from its test sets, and the sets
it reads from --input."""
import struct

import pytest
import torch

from attnlab.errors import UsageError
from attnlab.tasks import get_task
from attnlab.tasks.anomaly import runtime


def _png_height(path) -> int:
    return struct.unpack(">II", path.read_bytes()[16:24])[1]


@pytest.mark.slow  # matplotlib and a figure: seconds
def test_sets_png_draws_only_the_test_sets_the_run_has(tmp_path):
    # with --test-sets 1 the figure drew three rows: two were sets no test had scored
    heights = {}
    for n in (1, 3):
        cfg = get_task("anomaly").config(test_sets=n, model_dim=16, num_heads=2, num_layers=1,
                                         dim_feedforward=16)
        torch.manual_seed(0)
        runtime.plot_sets(runtime.build_model(cfg), cfg, tmp_path / f"sets{n}.png")
        heights[n] = _png_height(tmp_path / f"sets{n}.png")
    assert heights[1] < heights[3] / 2


@pytest.mark.parametrize("token", ["1_0", "+10", "1_7_9_6", "1" * 5000],
                         ids=["1_0", "+10", "1_7_9_6", "5000 digits"])  # the last: a traceback
def test_an_image_index_int_would_read_leniently_is_refused(token):
    # int() reads '1_0' and '+10' as image 10: the set scored was not the one typed
    cfg = get_task("anomaly").config()
    with pytest.raises(UsageError, match=r"^--input must be image indices \(0\.\.1796\)"):
        runtime._parse_input(f"45 133 {token}", cfg)


def test_plain_indices_are_still_read():
    indices, x = runtime._parse_input(" 45 133\t10 ", get_task("anomaly").config())
    assert indices == [45, 133, 10] and tuple(x.shape) == (1, 3, 64)


def test_a_set_typed_on_two_lines_is_refused_not_joined():
    # --input "$(cat sets.txt)": the two sets were read as one of 6 images and one was named
    # odd; a line break at either end (a pasted line) still reads the one set
    cfg = get_task("anomaly").config()
    with pytest.raises(UsageError, match=r"^--input holds 2 lines; it is one set, on one line"):
        runtime._parse_input("45 133 153\n319 477 484", cfg)
    assert runtime._parse_input("45 133 153\n", cfg)[0] == [45, 133, 153]
