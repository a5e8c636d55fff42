"""One declaration per setting on each task's path from flag to model (issue 38, item 1), and
a run config a type checker reads (item 2).

A task's path is ``TrainSettings`` (what the loop needs), the task's own settings, its model's
config and what its run derives: each name is declared by exactly one of them, a task's own
default is an override of that declaration, and the command line's flags are made from those
declarations and nothing else."""
import dataclasses
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from attnlab.run_config import RunSettings, SharedDerived, owners
from attnlab.settings import TrainSettings, defaults, exposed, setting
from attnlab.tasks import available_tasks

ROOT = Path(__file__).resolve().parents[1]
TASKS = sorted(available_tasks())


def _layout(name):
    return available_tasks()[name].run_config.layout


@pytest.mark.parametrize("name", TASKS)
def test_every_name_on_a_tasks_path_is_declared_once(name):
    layout = _layout(name)
    found = owners(layout.parts(), layout.key)  # raises on a name declared twice
    assert set(found) >= {"model_dim", "lr", "out"}
    assert found["model_dim"] == "model" and found["lr"] == "train"


def test_a_name_declared_twice_is_refused_naming_both_parts():
    @dataclass
    class Shape:
        model_dim: int = setting(64, low=1)

    with pytest.raises(ValueError, match=r"model_dim is declared by both settings and model"):
        owners({"settings": Shape, "model": Shape})


def test_the_training_settings_declare_no_model_setting():
    """--model-dim, --dropout, ... are the model's: the loop's settings hold none of them."""
    loop = {f.name for f in dataclasses.fields(TrainSettings)}
    for name in TASKS:
        model = _layout(name).model
        assert not loop & {f.name for f in dataclasses.fields(model)}, name


@pytest.mark.parametrize("name", TASKS)
def test_a_tasks_default_is_one_override_of_one_declaration(name):
    """Each override names a setting on the task's path and changes its declared default (an
    override equal to the declaration would be a second statement of one default)."""
    task = available_tasks()[name]
    layout = _layout(name)
    declared = {}
    for part_name, part in layout.parts().items():
        for f in dataclasses.fields(part):
            key = layout.key(f.name) if part_name == "model" else f.name
            declared[key] = f.default
    for key, value in task.overrides.items():
        assert key in declared, f"{name} overrides {key}, which nothing on its path declares"
        assert value != declared[key] or type(value) is not type(declared[key]), (
            f"{name}'s override of {key} repeats its declared default {value!r}")


@pytest.mark.parametrize("name", TASKS)
def test_the_flags_are_the_declarations(name):
    """``attnlab train TASK``'s flags: the loop's, the task's own, the model fields it sets,
    each from its one declaration; and ``--out``, ``--config``."""
    from attnlab.cli import build_parser

    task = available_tasks()[name]
    parser = build_parser()._subparsers._group_actions[0].choices["train"]
    flags = {a.dest for a in parser._subparsers._group_actions[0].choices[name]._actions
             if a.option_strings and a.dest != "help"}
    model_fields = {f.name for f in dataclasses.fields(task.model_config)}
    assert set(task.model_settings()) <= model_fields
    expected = {*exposed(TrainSettings), *exposed(task.settings), *task.model_settings(),
                "out", "config"}
    assert flags == expected


def test_a_setting_a_graph_run_does_not_have_is_no_flag_of_it(capsys):
    """--norm-first and --dim-feedforward were flags of every task; graph's model has neither
    (they were read and not used)."""
    from attnlab.cli import main

    for flag in ("--norm-first", "--dim-feedforward"):
        assert main(["train", "graph", flag, *(["8"] if flag == "--dim-feedforward" else [])]) == 2
        assert f"unrecognized arguments: {flag}" in capsys.readouterr().err


def test_the_derived_values_and_what_they_resolve_are_declared_once():
    assert SharedDerived.resolves == ("precision",)
    for name in TASKS:
        layout = _layout(name)
        for resolved in getattr(layout.derived, "resolves", ()):
            assert layout.owner[resolved] in ("settings", "model"), (name, resolved)


def test_the_defaults_of_a_task_come_from_its_declarations():
    lm = available_tasks()["lm"]
    assert lm.defaults["model_dim"] == 128  # lm's override of CausalLMConfig's 256
    assert lm.defaults["num_layers"] == defaults(lm.model_config)["num_layers"]
    assert lm.defaults["lr"] == defaults(TrainSettings)["lr"]


@pytest.mark.slow
def test_a_type_checker_sees_the_model_fields_through_the_run_config(tmp_path):
    """mypy reads an lm run's ``cfg.model.model_dim`` as an int, and refuses a misspelt field
    of any part. It follows the imports of attnlab only: the run config's types are attnlab's,
    and following torch, numpy, ... (over 1,500 modules) made this test 30 s of a CI run."""
    snippet = tmp_path / "snippet.py"
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nfollow_imports = skip\nignore_missing_imports = True\n\n"
                      "[mypy-attnlab.*]\nfollow_imports = silent\n")
    snippet.write_text(
        "from attnlab.tasks.lm.spec import LMRunConfig\n\n\n"
        "def width(cfg: LMRunConfig) -> int:\n"
        "    reveal_type(cfg.model.model_dim)\n"
        "    reveal_type(cfg.settings.block_size)\n"
        "    reveal_type(cfg.train.lr)\n"
        "    return cfg.model.model_dimm\n")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", f"--config-file={config}", "--no-error-summary",
         f"--cache-dir={tmp_path / 'cache'}", str(snippet)],
        capture_output=True, text=True, cwd=ROOT, env={"MYPYPATH": str(ROOT), "PATH": ""},
        timeout=300)
    lines = out.stdout.replace("builtins.", "").splitlines()  # as mypy versions spell them
    assert [line.split(": ", 1)[1] for line in lines] == [
        'note: Revealed type is "int"', 'note: Revealed type is "int"',
        'note: Revealed type is "float"',
        'error: "CausalLMConfig" has no attribute "model_dimm"; maybe "model_dim"?  '
        '[attr-defined]'], out.stdout + out.stderr


def test_a_run_config_is_frozen_through_its_parts_and_by_name():
    cfg = available_tasks()["lm"].config(model_dim=32)
    assert isinstance(cfg, RunSettings)
    for assign in (lambda: setattr(cfg, "model_dim", 64), lambda: setattr(cfg.train, "lr", 1.0),
                   lambda: setattr(cfg, "train", None)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            assign()
