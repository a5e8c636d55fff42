"""Paths as a user who works from several directories types them: a ``~`` is the home
directory wherever the shell left it (``--out=~/runs/r``, a quoted path, ``data: ~/x.csv`` in
a --config file), an environment variable a shell did not expand is refused in one line, and a
--config file's relative paths are read from the working directory, as flags' are."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from attnlab.cli import build_parser, main
from attnlab.paths import path_kind

from ..test_rules import _commands_writing_under


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A home directory of its own, and a working directory elsewhere (``tmp_path/work``)."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    return home


def _path_arguments(parser, command=()):
    """(command words, parser, action) of every argument of every command that names a path."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _path_arguments(sub, (*command, name))
        elif getattr(action, "path_kind", None) or path_kind(action.metavar):
            yield command, parser, action


def test_every_path_argument_takes_a_tilde_as_the_home_directory(home):
    """Each flag and positional that names a path (train's --out, --config, --data, --init,
    --val, --test; evaluate's RUN and --data; predict's --input-file; export's --hf; prepare's
    files and --out; plot's and view's --out ...) reads ``~/x`` as the shell would have; so
    does one that is a word or a path (``--class-weights balanced|FILE``, prepare's
    ``--tokenizer KIND|DIR``), which said "'~' is not expanded here" or "not a directory"."""
    seen = set()
    for command, parser, action in _path_arguments(build_parser()):
        value = ["~/x"] if action.nargs in ("+", "*") else "~/x"
        namespace = argparse.Namespace(**{action.dest: value})
        parser._check_paths(namespace)
        got = getattr(namespace, action.dest)
        assert got == ([str(home / "x")] if isinstance(value, list) else str(home / "x")), \
            (command, action.option_strings or action.metavar)
        seen.add(action.option_strings[-1] if action.option_strings else action.metavar)
    assert {"--out", "--config", "--data", "--init", "--val", "--test", "--input-file",
            "--hf", "DIR", "FILE", "--class-weights", "--tokenizer"} <= seen


def test_an_out_under_a_tilde_is_under_the_home_directory_never_a_directory_named_tilde(
        home, tmp_path, capsys):
    """``--out=~/blocker/run`` (the shell leaves a ``~`` after ``=``, or a quoted one) was
    refused as a '~' not expanded: it is the home directory's, here refused because
    ``~/blocker`` is a file — the message names the path under the home directory, and nothing
    named ``~`` is made."""
    (home / "blocker").write_text("a file")
    for what, argv in _commands_writing_under(Path("~/blocker"), tmp_path).items():
        assert main(argv) == 2, what
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"attnlab: error: {what.split()[-1]} {home}/blocker/") and \
            err.endswith(f"lies under {home}/blocker, which is a file, not a directory"), \
            (what, err)
    assert list(Path.cwd().iterdir()) == []


@pytest.mark.parametrize("argv, said", [
    (["train", "classify", "--data=~/reviews.csv", "--text-column", "review"],
     "--data {home}/reviews.csv: no column 'review' (columns: text, label)"),
    (["train", "classify", "--config", "~/cfg.yaml"],
     "--data {home}/reviews.csv: no column 'review' (columns: text, label)"),
    (["train", "reverse", "--config=~/typo.yaml"],
     "--config {home}/typo.yaml: unknown setting(s) max_step; did you mean max_steps?"),
])
def test_an_input_under_a_tilde_is_read_from_the_home_directory(argv, said, home, tmp_path,
                                                                capsys):
    """A quoted ``~/reviews.csv``, or ``data: ~/reviews.csv`` in a --config file (YAML expands
    nothing), said "file not found: ~/reviews.csv" while the file was there: it is read."""
    (home / "reviews.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    (home / "cfg.yaml").write_text("data: ~/reviews.csv\ntext_column: review\n")
    (home / "typo.yaml").write_text("max_step: 3\n")
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == f"attnlab: error: {said.format(home=home)}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, said", [
    (["train", "reverse", "--out", "$HOME/runs/r"],
     "--out $HOME/runs/r: $HOME is not expanded"),
    (["train", "classify", "--data", "${HOME}/reviews.csv"],
     "--data ${HOME}/reviews.csv: ${HOME} is not expanded"),
    (["train", "reverse", "--config", "{tmp}/cfg.yaml"],
     "out in --config {tmp}/cfg.yaml $HOME/runs/r: $HOME is not expanded"),
    (["evaluate", "$HOME/runs/r"], "evaluate: DIR $HOME/runs/r: $HOME is not expanded"),
])
def test_an_environment_variable_nothing_expanded_is_refused_in_one_line(argv, said, home,
                                                                         tmp_path, capsys):
    """``--out '$HOME/runs/r'`` (quoted) or ``out: $HOME/runs/r`` in a --config file made a
    directory named ``$HOME`` in the working directory: refused, naming the variable and the
    path it stands for, before anything is made."""
    (tmp_path / "cfg.yaml").write_text("out: $HOME/runs/r\n")
    argv = [word.replace("{tmp}", str(tmp_path)) for word in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    said = said.replace("{tmp}", str(tmp_path))
    assert err.startswith(f"attnlab: error: {said} (attnlab expands a leading ~ as a shell "
                          f"does, but not an environment variable")
    variable = said.split(": ")[-1].split()[0]
    assert err.endswith(f"; write the path out in full, e.g. {home}/"
                        f"{'runs/r' if 'runs' in said else 'reviews.csv'}; a {variable} that "
                        f"is part of the name itself is taken as typed with HOME unset: "
                        f"env -u HOME attnlab ...\n")
    assert err.count("\n") == 1
    assert list(Path.cwd().iterdir()) == [] and list(home.iterdir()) == []


def test_a_config_files_relative_data_beside_it_is_named_not_read_from_elsewhere(
        home, tmp_path, capsys):
    """``configs/run.yaml`` saying ``data: train.csv`` (the file beside it), given from the
    project's root: "--data: file not found: train.csv", nothing about where it looked. The
    rule (relative to the working directory, as flags) is said, with the file it found."""
    configs = tmp_path / "work" / "configs"
    configs.mkdir()
    (configs / "train.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    (configs / "run.yaml").write_text("data: train.csv\n")
    assert main(["train", "classify", "--config", "configs/run.yaml", "--out", "run"]) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: --config configs/run.yaml: data train.csv: not in the working "
        f"directory {tmp_path / 'work'}, where a --config file's relative paths are read "
        f"from, as flags' are; configs/train.csv is beside the file: write that, or run "
        f"from configs\n")
    assert not Path("run").exists()


def test_a_config_files_relative_data_in_the_working_directory_is_that_one(tmp_path,
                                                                           monkeypatch, capsys):
    """The working directory's file is read, as a flag's would be, when it is there."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "train.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    (tmp_path / "configs" / "train.csv").write_text("review,label\ngood,pos\n")
    (tmp_path / "configs" / "run.yaml").write_text("data: train.csv\ntext_column: review\n")
    assert main(["train", "classify", "--config", "configs/run.yaml", "--out", "run"]) == 2
    assert capsys.readouterr().err == ("attnlab: error: --data train.csv: no column 'review' "
                                       "(columns: text, label)\n")


def _reviews(path: Path) -> None:
    rows = [f"{'good great' if i % 2 else 'bad awful'} thing {i % 7}\t{'pos' if i % 2 else 'neg'}"
            for i in range(80)]
    path.write_text("text\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_a_run_made_from_one_directory_is_evaluated_and_resumed_from_another(home, tmp_path,
                                                                            monkeypatch, capsys):
    """A run trained in ``~/proj ü`` from ``--config configs/run.yaml`` (``data:
    data/train.tsv``, relative to the working directory) into ``runs/ü b``; then, from
    another directory, ``evaluate`` of it by a quoted ``~`` path and through a link, and
    ``--resume --out=~/...``: each reads the data the run recorded (absolute), gives the
    test numbers the run gave, and resumes to the new budget."""
    project = home / "proj ü"
    (project / "data").mkdir(parents=True)
    (project / "configs").mkdir()
    _reviews(project / "data" / "train.tsv")
    (project / "configs" / "run.yaml").write_text(
        "data: data/train.tsv\nmax_steps: 2\nmodel_dim: 16\nnum_heads: 2\nnum_layers: 1\n"
        "dim_feedforward: 16\nbatch_size: 8\nval_every: 2\n", encoding="utf-8")
    monkeypatch.chdir(project)
    assert main(["train", "classify", "--config", "configs/run.yaml", "--out", "runs/ü b"]) == 0
    run = project / "runs" / "ü b"
    trained = json.loads((run / "metrics.json").read_text())
    capsys.readouterr()

    elsewhere = tmp_path / "work"
    monkeypatch.chdir(elsewhere)
    (elsewhere / "latest").symlink_to(run)
    for given in ("~/proj ü/runs/ü b", "latest"):
        assert main(["evaluate", given]) == 0, given
        said = json.loads(capsys.readouterr().out)
        assert said["test_accuracy"] == trained["test_accuracy"], given
    assert main(["train", "classify", "--resume", "--out=~/proj ü/runs/ü b",
                 "--max-steps", "4"]) == 0
    assert json.loads((run / "metrics.json").read_text())["steps"] == 4
    assert sorted(p.name for p in elsewhere.iterdir()) == ["latest"]


@pytest.mark.parametrize("argv, name", [
    (["train", "reverse", "--out=~nosuchuser/runs/r"], "--out"),
    (["evaluate", "~nosuchuser/runs/r"], "evaluate: DIR"),
])
def test_a_tilde_of_a_user_this_machine_lacks_is_refused(argv, name, home, capsys):
    """``~nosuchuser/runs/r``, which no shell expands either, made a directory named
    ``~nosuchuser`` in the working directory."""
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: {name} ~nosuchuser/runs/r: no user 'nosuchuser' has a home directory "
        f"here, so it would name '~nosuchuser' in {Path.cwd()}; write the full path\n")
    assert list(Path.cwd().iterdir()) == []


def test_a_dollar_that_names_no_variable_or_a_file_of_that_name_is_taken_as_typed(home):
    """Only what a shell reads as a variable is refused, and not where a file of that very
    name is there: ``price$5`` and an existing ``$HOME.csv`` are the user's own names."""
    from attnlab.paths import entered

    assert entered("runs/price$5", "--out") == "runs/price$5"
    Path("$HOME.csv").write_text("text,label\n")
    assert entered("$HOME.csv", "--data") == "$HOME.csv"


@pytest.mark.slow
def test_an_lm_run_on_a_relative_corpus_is_exported_and_evaluated_from_another_directory(
        home, tmp_path, monkeypatch, capsys):
    """``prepare`` and ``train lm --data "corpus ü"`` (relative) in ``~/proj``; from another
    directory, ``export RUN --hf=~/hf`` and ``evaluate RUN`` read the run and its recorded
    corpus: the export is in the home directory, the evaluation is the run's own."""
    from ..reliability.conftest import write_corpus

    project = home / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    write_corpus(project / "corpus.txt")
    assert main(["prepare", "corpus.txt", "--out", "corpus ü"]) == 0
    assert main(["train", "lm", "--data", "corpus ü", "--out", "runs/lm x", "--max-steps", "2",
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "16", "--block-size", "16", "--batch-size", "4"]) == 0
    trained = json.loads((project / "runs" / "lm x" / "metrics.json").read_text())
    capsys.readouterr()

    monkeypatch.chdir(tmp_path / "work")
    assert main(["export", "~/proj/runs/lm x", "--hf=~/hf"]) == 0
    assert (home / "hf" / "config.json").is_file()
    assert main(["evaluate", "~/proj/runs/lm x"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["val_loss"] == pytest.approx(trained["val_loss"], rel=1e-5)
    assert list(Path.cwd().iterdir()) == []


@pytest.mark.slow
def test_a_run_from_a_config_files_tilde_data_resumes_with_the_same_file(home, capsys):
    """``train classify --config c.yaml --out r`` with ``data: ~/d.tsv`` trained; resuming
    with the same file said "--data ~/d.tsv not found; the run started on /.../d.tsv": the
    file's ``~`` is the home directory on ``--resume`` too, and a ``${HOME}`` in it is refused
    with the same line as on the run's start."""
    _reviews(home / "d.tsv")
    small = ("max_steps: 2\nmodel_dim: 16\nnum_heads: 2\nnum_layers: 1\ndim_feedforward: 16\n"
             "batch_size: 8\nval_every: 2\n")
    Path("c.yaml").write_text(f"data: ~/d.tsv\n{small}")
    assert main(["train", "classify", "--config", "c.yaml", "--out", "r"]) == 0
    assert main(["train", "classify", "--config", "c.yaml", "--resume", "--out", "r",
                 "--max-steps", "4"]) == 0
    assert json.loads(Path("r/metrics.json").read_text())["steps"] == 4
    capsys.readouterr()

    Path("v.yaml").write_text(f"data: ${{HOME}}/d.tsv\n{small}")
    said = []
    for resume in ([], ["--resume"]):
        assert main(["train", "classify", "--config", "v.yaml", *resume, "--out", "r"]) == 2
        said.append(capsys.readouterr().err)
    assert said[0] == said[1] and said[0].startswith(
        "attnlab: error: --config v.yaml: data ${HOME}/d.tsv: ${HOME} is not expanded"), said
    assert json.loads(Path("r/metrics.json").read_text())["steps"] == 4


@pytest.mark.parametrize("argv, said", [
    (["train", "classify", "--data", "{home}/reviews.tsv", "--class-weights=~/cw.json"],
     "--class-weights: file not found: {home}/cw.json"),
    (["prepare", "{home}/reviews.csv", "--tokenizer=~/runs/c1"],
     "--tokenizer '{home}/runs/c1': not one of char, word, bpe nor a directory"),
])
def test_a_word_or_a_path_takes_a_tilde_as_the_home_directory(argv, said, home, tmp_path,
                                                              capsys):
    """``--class-weights=~/cw.json`` said "'~' is not expanded here (a path handed to a Python
    function)", and ``--tokenizer=~/runs/c1`` that it is no kind nor a directory, naming
    ``~``: each is the home directory's path, as every other path is."""
    (home / "reviews.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    _reviews(home / "reviews.tsv")
    argv = [word.replace("{home}", str(home)) for word in argv]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(f"attnlab: error: {said.format(home=home)}")
    assert not (tmp_path / "out").exists() and list(Path.cwd().iterdir()) == []


def test_a_dollar_name_of_no_variable_set_is_the_users_own_and_a_set_one_says_how_to_keep_it(
        home, monkeypatch):
    """``--out 'runs/price$USD'`` (a name that holds ``$USD``), which attnlab took as typed
    before, was refused with "write the path out in full", which the user had done: taken as
    typed while no USD is set (a shell would have left nothing to quote); with USD set, the
    refusal says how to keep the name."""
    from attnlab.errors import UsageError
    from attnlab.paths import entered

    monkeypatch.delenv("USD", raising=False)
    assert entered("runs/price$USD", "--out") == "runs/price$USD"
    assert entered("runs/price${USD}", "--out") == "runs/price${USD}"
    monkeypatch.setenv("USD", "dollars")
    with pytest.raises(UsageError) as e:
        entered("runs/price$USD", "--out")
    assert str(e.value).endswith("write the path out in full, e.g. runs/pricedollars; a $USD "
                                 "that is part of the name itself is taken as typed with USD "
                                 "unset: env -u USD attnlab ...")


def test_a_variable_with_a_default_nothing_expanded_is_refused_not_made(home, capsys):
    """``--out '${HOME:-/x}/r'`` made a directory named ``${HOME:-`` in the working directory
    (its ``/`` splits the path): a shell expands any ``${...}``, so it is refused in one line,
    as ``$HOME`` is."""
    assert main(["train", "reverse", "--out", "${HOME:-/x}/r"]) == 2
    assert capsys.readouterr().err == (
        "attnlab: error: --out ${HOME:-/x}/r: ${HOME:-/x} is not expanded (attnlab expands a "
        "leading ~ as a shell does, but not an environment variable, which a shell leaves as "
        "it is when quoted); write the path out in full\n")
    assert list(Path.cwd().iterdir()) == [] and list(home.iterdir()) == []
