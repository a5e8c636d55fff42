"""`--threads` of the commands that run a trained model: every one takes it, a bad
value is one line naming the flag before the model is loaded, the number given is the number
torch uses, and without it batched work on an idle machine gets two threads and everything
else (one sequence, a busy machine) one."""
from __future__ import annotations

import json

import pytest
import torch

from attnlab.cli import main
from attnlab.commands import threads as threads_module
from attnlab.commands.threads import DECODE_PARAMETERS, default_threads, run_parameters
from attnlab.tasks import TASKS, get_task

from ..reliability.conftest import TINY, write_corpus

COMMANDS = {  # argv after the run directory is put in; each would load the model
    "predict": ["predict", "{run}", "--input", "3 1 4"],
    "evaluate": ["evaluate", "{run}"],
    "translate": ["translate", "{run}", "342"],
    "generate": ["generate", "{run}", "--prompt", "the"],
    "view": ["view", "{run}", "--input", "3 1 4", "--out", "{tmp}/page.html"],
    "plot attention": ["plot", "attention", "{run}", "--input", "3 1 4"],
}


def argv(name, run, tmp, *extra):
    return [a.format(run=run, tmp=tmp) for a in COMMANDS[name]] + list(extra)


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("value", ["0", "-2", "300"])
def test_a_bad_thread_count_is_named_before_anything_is_loaded(name, value, tmp_path, capsys):
    # the run directory does not exist: the flag is checked first, so that is not what is said
    assert main(argv(name, tmp_path / "missing", tmp_path, "--threads", value)) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"attnlab: error: --threads must be an integer from 1 to 256, got {value}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_model_command_lists_threads_in_its_help(name, capsys):
    with pytest.raises(SystemExit):
        main([*COMMANDS[name][:2 if name == "plot attention" else 1], "--help"])
    assert "--threads N" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_the_number_given_is_the_number_torch_uses(reverse_run, threads, capsys):
    before = torch.get_num_threads()
    try:
        assert main(["predict", str(reverse_run), "--input", "3 1 4", "--threads",
                     str(threads)]) == 0
        assert torch.get_num_threads() == threads
        assert len(capsys.readouterr().out.split()) == 3  # a prediction for each symbol
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("load, argv, expected", [
    (0.0, ["evaluate"], 2),                         # a whole test split on an idle machine
    (1.5, ["evaluate"], 1),                         # another job holds a core
    (0.0, ["predict", "--input", "3 1 4"], 1),      # one input
])
def test_without_the_flag_the_work_and_the_load_choose(reverse_run, monkeypatch, load, argv,
                                                       expected, capsys):
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(threads_module.os, "cpu_count", lambda: 2)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        assert main([argv[0], str(reverse_run), *argv[1:]]) == 0
        assert torch.get_num_threads() == expected
    finally:
        torch.set_num_threads(before)


def test_the_default_follows_the_work_the_size_the_cores_and_the_load():
    assert default_threads("forward", cores=2, load=0.0) == 2
    assert default_threads("one", 50_000_000, cores=2, load=0.0) == 1  # token by token
    assert default_threads("decode", 900_000, cores=2, load=0.0) == 1  # too small to share
    assert default_threads("decode", DECODE_PARAMETERS, cores=2, load=0.0) == 2
    assert default_threads("decode", None, cores=2, load=0.0) == 1     # size unknown
    assert default_threads("forward", cores=2, load=1.2) == 1          # a job holds a core
    assert default_threads("forward", cores=8, load=1.2) == 7          # 6.8 cores idle
    assert default_threads("forward", cores=2, load=0.3) == 2
    assert default_threads("forward", cores=1, load=0.0) == 1
    with pytest.raises(ValueError, match="work must be one of"):
        default_threads("batch")


def test_the_size_is_read_from_the_runs_metrics(tmp_path):
    assert run_parameters(tmp_path) is None  # no metrics.json (a run still training)
    (tmp_path / "metrics.json").write_text(json.dumps({"parameters": 12345}))
    assert run_parameters(tmp_path) == 12345
    (tmp_path / "metrics.json").write_text("{not json")
    assert run_parameters(tmp_path) is None


@pytest.mark.slow
@pytest.mark.parametrize("load, expected", [(1.5, 1), (0.0, 4)])
def test_train_without_the_flag_takes_one_thread_on_a_busy_machine(tmp_path, monkeypatch, load,
                                                                   expected):
    # lm has no --threads default of its own (the small tasks default to 1). Another job holds
    # a core: one thread (torch's own count collapses there); an idle machine keeps torch's
    # count (4, set here, stands for it)
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(threads_module.os, "cpu_count", lambda: 2)
    args = TINY["lm"].format(data=write_corpus(tmp_path / "corpus.txt")).split()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        assert main(["train", "lm", "--out", str(tmp_path / "r"), *args, "--model-dim", "16",
                     "--num-heads", "2", "--max-steps", "2", "--warmup", "1"]) == 0
        assert torch.get_num_threads() == expected
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_train_help_states_the_tasks_own_thread_default(task, capsys):
    # the small tasks train on one thread unless told otherwise (config.yaml records threads:
    # 1); their --help once said torch's count, which only lm and jets start from
    with pytest.raises(SystemExit):
        main(["train", task, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    entry = out.split(" --threads N ", 1)[1].split(" --devices N ", 1)[0]
    default = get_task(task).defaults["threads"]
    if default is None:
        assert "torch's" in entry and "default" not in entry, entry
    else:
        assert entry.endswith(f"(default: {default})") and "default: torch" not in entry, entry
        assert "unset" not in entry, entry  # ("unset: torch's count ... (default: 1)")
