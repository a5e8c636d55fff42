"""``attnlab.load`` (and ``check_run_dir``) called wrongly from Python: a run directory given
as bytes or a number, or a ``quantize`` it has no kind of, is one exception naming the argument
and the value, raised before anything is read (not pathlib's or ``attnlab.nn.quantize``'s message from deep inside,
which named ``kind``, an argument the caller never gave)."""
import pytest

import attnlab
from attnlab.loading import check_run_dir


@pytest.mark.parametrize("run_dir, message", [
    (b"runs/r", "run_dir must be a path (str or pathlib.Path), got bytes: b'runs/r'"),
    (3, "run_dir must be a path (str or pathlib.Path), got int: 3"),
])
def test_a_run_dir_that_is_no_path_is_named(run_dir, message):
    with pytest.raises(TypeError) as e:
        attnlab.load(run_dir)
    assert str(e.value) == message
    # check_run_dir too, which docs/api.md calls first: it gave pathlib's message
    with pytest.raises(TypeError) as e:
        check_run_dir(run_dir)
    assert str(e.value) == message


@pytest.mark.parametrize("quantize", ["int4", True])
def test_a_quantize_kind_that_is_not_one_is_named(tmp_path, quantize):
    with pytest.raises(ValueError) as e:
        attnlab.load(tmp_path / "run", quantize=quantize)  # refused before the run is looked for
    assert str(e.value) == f"quantize must be None or one of ('int8',), got {quantize!r}"
