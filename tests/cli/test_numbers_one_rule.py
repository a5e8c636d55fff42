"""A number reads the same in a ``--config`` file as on the command line, by Python's rule
for underscores (one between two digits) and exponents: ``1__000`` and ``1000_`` were
numbers in YAML and refused as flags; ``1_0e3`` was a number as a flag and text in YAML."""
import pytest

from attnlab.cli import build_parser
from attnlab.commands.train import build_config
from attnlab.errors import UsageError


def _read(task: str, argv: list[str], key: str):
    """(True, the value) of ``key`` the settings end with, or (False, None) if refused."""
    try:
        args = build_parser().parse_args(["train", task, *argv])
        given = {k: v for k, v in vars(args).items()
                 if k not in ("task", "func", "command", "flag_notes")}
        return True, getattr(build_config(task, given), key)
    except UsageError:
        return False, None


@pytest.mark.parametrize("key, text", [
    ("max_steps", "1_000"), ("max_steps", "1__000"), ("max_steps", "1000_"),
    ("max_steps", "0_10"), ("lr", "1_0e-3"), ("lr", "1__0.0"), ("lr", "0.00_1"),
    ("lr", "1e-3"), ("lr", "1_0.0e-4_0"),
])
def test_a_number_in_a_config_file_reads_as_the_same_flag_does(key, text, tmp_path,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(f"{key}: {text}\n")
    flag = _read("reverse", [f"--{key.replace('_', '-')}", text], key)
    assert _read("reverse", ["--config", "c.yaml"], key) == flag, text
    assert flag[0] == (text.count("__") == 0 and not text.endswith("_")), flag
