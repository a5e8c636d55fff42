"""attnlab.settings: a setting declared once gives its flag, default, help and check."""
import argparse
from dataclasses import dataclass

import pytest

from attnlab.errors import UsageError
from attnlab.settings import TrainSettings, add_flags, check, defaults, setting


@dataclass
class Toy:
    width: int = setting(8, help="model width", low=1)
    rate: float = setting(0.5, help="a rate", low=0, below=1)
    mode: str = setting("a", help="a choice", choices=("a", "b"))
    fancy: bool = setting(False, help="a switch")
    limit: int = setting(None, help="optional", low=1, optional=True)


def test_one_field_gives_a_flag_with_its_type_help_and_no_default():
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    add_flags(parser, Toy)
    args = vars(parser.parse_args(["--width", "3", "--no-fancy", "--mode", "b"]))
    assert args == {"width": 3, "fancy": False, "mode": "b"}  # what was not given is absent
    assert "model width" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "c"])
    assert defaults(Toy) == {"width": 8, "rate": 0.5, "mode": "a", "fancy": False, "limit": None}


@pytest.mark.parametrize("name,value,message", [
    ("width", 0, "--width must be a positive integer, got 0"),
    ("width", 2.5, "--width must be an integer, got 2.5"),
    ("rate", 1.0, "--rate must be in [0, 1), got 1.0"),
    ("rate", float("nan"), "--rate must be a number, got nan"),
    ("mode", "c", "--mode must be one of a, b, got 'c'"),
    ("fancy", "yes", "--fancy must be true or false, got 'yes'"),
    ("limit", 0, "--limit must be a positive integer, got 0"),
])
def test_a_bad_value_is_refused_naming_the_flag_and_the_value(name, value, message):
    with pytest.raises(UsageError) as e:
        check(Toy, {**defaults(Toy), name: value})
    assert str(e.value) == message


def test_choices_are_normalised_to_text_and_optional_settings_may_be_unset():
    cfg = {**defaults(TrainSettings), "precision": 32}  # YAML reads `precision: 32` as a number
    check(TrainSettings, cfg)
    assert cfg["precision"] == "32" and cfg["threads"] is None


@dataclass
class Named:
    path: str = setting(None, optional=True, metavar="DIR", blank_why="give DIR")


@pytest.mark.parametrize("value", ["", "   "])
def test_a_blank_text_declared_to_name_something_is_refused_by_flag_file_and_library(value):
    """#37: `--init ""` once trained random weights (Path("") is the current directory). The
    one declaration (``blank_why``) is read by the command line, a --config file's reader and
    the library, each naming what the user wrote."""
    from attnlab.settings import check_argument, check_record

    with pytest.raises(UsageError, match="^--path is empty; give DIR$"):
        check(Named, {"path": value})
    with pytest.raises(UsageError, match="^--config c.yaml: path is empty; give DIR$"):
        check_record(Named, {"path": value}, "--config c.yaml", of_use=True)
    with pytest.raises(ValueError, match="^path is empty; give DIR$"):
        check_argument(Named, "path", value)
    # a run already made with such a value (config.yaml, --resume) still loads
    check_record(Named, {"path": value}, "runs/r/config.yaml")
    check(Named, {"path": value, "resume": True})


def test_a_boolean_flag_is_named_as_it_is_typed():
    """#37: `--no-bias` was reported as `--bias False`."""
    from attnlab.settings import as_typed

    assert [as_typed("bias", False), as_typed("tie_weights", True),
            as_typed("block_size", 64)] == ["--no-bias", "--tie-weights", "--block-size 64"]
