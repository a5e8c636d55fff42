"""A number is read by one rule, on the command line and in a ``--config`` file: the value
``--max-steps TEXT`` gives is the value ``max_steps: TEXT`` gives, and a spelling one refuses,
the other refuses too. Before, ``max_steps: 0x10`` trained 16 steps while ``--max-steps 0x10``
was refused, ``--max-steps " 12"`` was read where the file refused it, and ``--lr ١٢``
(Arabic-Indic digits, which Python's ``float`` reads) trained with lr 12.0."""
import pytest

from attnlab.cli import build_parser
from attnlab.errors import UsageError
from attnlab.runs import read_yaml
from attnlab.settings import TrainSettings, check_record

SPELLINGS = ["16", "0x10", "0o20", "010", "1_000", "+5", "1__0", " 12", "1e3", "abc", "0b10",
             "١٢", "١.٥", "１２"]  # Arabic-Indic and full-width digits, which float reads


def from_flag(name: str, text: str):
    try:
        args = build_parser().parse_args(["train", "reverse", f"--{name.replace('_', '-')}",
                                          text])
    except UsageError:
        return "refused"
    return getattr(args, name)


def from_file(tmp_path, name: str, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(f"{name}: '{text}'\n" if text != text.strip() else f"{name}: {text}\n",
                    encoding="utf-8")
    values = read_yaml(path, hand_written=True)
    try:
        check_record(TrainSettings, values, str(path), of_use=True)
    except UsageError:
        return "refused"
    return values[name]


@pytest.mark.parametrize("text", SPELLINGS)
@pytest.mark.parametrize("name", ["max_steps", "lr"])
def test_a_flag_and_a_config_file_read_a_number_alike(tmp_path, name, text):
    assert from_flag(name, text) == from_file(tmp_path, name, text)


def test_hexadecimal_is_read_on_both():
    assert from_flag("max_steps", "0x10") == 16


@pytest.mark.parametrize("text", ["١٢", "１２", "1.５"])
def test_digits_of_another_script_are_refused_naming_the_flag(text):
    """``--lr ١٢`` trained with lr 12.0, where ``lr: ١٢`` in a --config file is refused."""
    with pytest.raises(UsageError, match=r"--lr"):
        build_parser().parse_args(["train", "reverse", "--lr", text])
