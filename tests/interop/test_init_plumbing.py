"""``--init DIR`` before any weights are read: what ``attnlab.interop.source`` accepts and
refuses (one line naming DIR), what ``attnlab train`` fixes from DIR and records, and that
the check imports no torch. The tasks' own --init runs are tested beside them
(test_init_lm.py, test_init_classify.py, test_init_translate.py)."""
import hashlib
import json
import subprocess
import sys

import pytest

from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.interop.source import reread_init_source
from attnlab.runs import write_yaml
from attnlab.tasks import get_task
from attnlab.tokenizers import CharTokenizer


def _hf_dir(path, model_type="gpt2", weights="model.safetensors", tokenizer=("tokenizer.json",)):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    if weights:
        (path / weights).write_bytes(b"not read before the run starts")
    for name in tokenizer:
        (path / name).write_text("{}")
    return path


def _run_dir(path, task="lm", weights=True, **settings):
    path.mkdir()
    write_yaml(path / "config.yaml", {"task": task, "model_dim": 32, "num_layers": 2,
                                      "num_heads": 4, "dropout": 0.1, **settings})
    if weights:
        (path / "model.safetensors").write_bytes(b"weights")
    CharTokenizer.fit(["some text"]).save(path / "tokenizer.json")  # --init reads it first
    return path


def test_a_hugging_face_directory_is_read_with_its_digest(tmp_path):
    d = _hf_dir(tmp_path / "gpt")
    source = get_task("lm").init_source(str(d))
    assert (source.kind, source.model_type, source.path) == ("hf", "gpt2", d.resolve())
    assert source.weights.name == "model.safetensors"
    assert source.sha256 == hashlib.sha256(b"not read before the run starts").hexdigest()
    assert source.config == {"model_type": "gpt2"}


def test_pytorch_bin_weights_and_vocab_merges_tokenizer_are_accepted(tmp_path):
    d = _hf_dir(tmp_path / "gpt", weights="pytorch_model.bin",
                tokenizer=("vocab.json", "merges.txt"))
    assert get_task("lm").init_source(d).weights.name == "pytorch_model.bin"


def test_an_attnlab_run_of_the_same_task_is_a_source(tmp_path):
    d = _run_dir(tmp_path / "run")
    source = get_task("lm").init_source(d)
    assert (source.kind, source.model_type, source.config["model_dim"]) == ("run", "lm", 32)


@pytest.mark.parametrize("make, task, named", [
    (lambda p: p / "gpt2", "lm", ["--init", "is not a directory", "never downloads",
                                  "huggingface-cli download", "--local-dir"]),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "lm", ["is a file"]),
    (lambda p: (p / "empty").mkdir() or p / "empty", "lm", ["no config.json", "config.yaml"]),
    (lambda p: _hf_dir(p / "bert", model_type="bert"), "lm",
     ["model_type 'bert' is not supported for lm", "supported: gpt2"]),
    (lambda p: _hf_dir(p / "gpt", model_type="gpt_neox"), "classify",
     ["'gpt_neox'", "supported: bert, roberta"]),
    (lambda p: _hf_dir(p / "nw", weights=None), "lm",
     ["no weights file", "model.safetensors or pytorch_model.bin"]),
    (lambda p: _hf_dir(p / "nt", tokenizer=()), "lm", ["no tokenizer files", "tokenizer.json"]),
    (lambda p: _hf_dir(p / "mt", model_type="marian", tokenizer=("vocab.json",)), "translate",
     ["no tokenizer file source.spm, target.spm"]),
    (lambda p: _run_dir(p / "cls", task="classify"), "lm",
     ["holds a 'classify' run, not 'lm'"]),
    (lambda p: _run_dir(p / "unfinished", weights=False), "lm",
     ["no model.safetensors", "--resume"]),
])
def test_refusals_name_the_directory(tmp_path, make, task, named):
    path = make(tmp_path)
    with pytest.raises(UsageError) as e:
        get_task(task).init_source(path)
    message = str(e.value)
    assert "\n" not in message and str(path) in message
    for text in named:
        assert text in message, (text, message)


def test_a_weights_file_changed_after_the_check_is_named(tmp_path):
    d = _hf_dir(tmp_path / "gpt")
    recorded = get_task("lm").init_source(d).sha256
    assert reread_init_source(d, recorded, task="lm").sha256 == recorded
    (d / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(UsageError, match="model.safetensors changed since the run was configured"):
        reread_init_source(d, recorded, task="lm")


def test_the_check_imports_no_torch(tmp_path):
    d = _hf_dir(tmp_path / "gpt")
    code = ("import sys; from attnlab.tasks import get_task; "
            f"get_task('lm').init_source({str(d)!r}); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _fails(argv, capsys, *named):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab: error:"), err
    for text in named:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def test_train_refuses_a_hub_name_before_the_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    _fails(["train", "lm", "--init", "gpt2", "--out", str(out)], capsys,
           "--init gpt2 is not a directory", "never downloads")
    assert not out.exists()


def test_train_refuses_a_shape_flag_that_disagrees_with_the_run_it_starts_from(tmp_path, capsys):
    src = _run_dir(tmp_path / "src")
    out = tmp_path / "run"
    (tmp_path / "text.txt").write_text("some text to train on\n" * 200)
    _fails(["train", "lm", "--init", str(src), "--model-dim", "64", "--out", str(out),
            "--data", str(tmp_path / "text.txt")], capsys,
           "--model-dim 64", "model_dim 32", "drop --model-dim")
    assert not out.exists()


def test_train_takes_the_shape_from_the_run_and_records_dir_and_digest(tmp_path):
    from attnlab.commands.train import configure

    src = _run_dir(tmp_path / "src", num_layers=3)
    (tmp_path / "text.txt").write_text("some text to train on\n" * 200)
    cfg, _ = configure("lm", {"init": str(src), "num_layers": 3, "dropout": 0.2,
                              "out": str(tmp_path / "run"), "data": str(tmp_path / "text.txt")})
    # the shape from the source run (a value given that agrees is fine), the dropout as given
    assert (cfg.model_dim, cfg.num_layers, cfg.num_heads, cfg.dropout) == (32, 3, 4, 0.2)
    assert cfg.init == str(src.resolve())
    assert cfg.init_sha256 == hashlib.sha256(b"weights").hexdigest()
    assert {"init", "init_sha256"} <= set(cfg.record())  # what config.yaml holds


def test_a_run_without_its_tokenizer_is_refused_before_the_run_directory(tmp_path, capsys):
    src = _run_dir(tmp_path / "src")
    (src / "tokenizer.json").unlink()
    (tmp_path / "text.txt").write_text("some text to train on\n" * 200)
    out = tmp_path / "run"
    _fails(["train", "lm", "--init", str(src), "--data", str(tmp_path / "text.txt"),
            "--out", str(out)], capsys, f"tokenizer file not found: {src.resolve()}")
    assert not out.exists()


def test_init_with_resume_is_refused(tmp_path, capsys):
    src = _run_dir(tmp_path / "src")
    out = tmp_path / "run"
    out.mkdir()
    write_yaml(out / "config.yaml", {"task": "lm", "model_dim": 32, "num_layers": 2,
                                     "num_heads": 4, "max_steps": 10})
    _fails(["train", "lm", "--resume", "--out", str(out), "--init", str(src)], capsys,
           "--init", "--resume")


def test_tasks_without_pretrained_models_have_no_init_flag(capsys):
    assert main(["train", "graph", "--init", "x"]) == 2
    assert "--init" in capsys.readouterr().err


def _reviews(tmp_path):
    data = tmp_path / "reviews.csv"
    data.write_text("text,label\n" + "".join(f"good film {i},pos\nbad film {i},neg\n"
                                             for i in range(20)))
    return data


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "lm", "translate"])
@pytest.mark.parametrize("adapt", [[], ["--lora-rank", "2"], ["--freeze", "all-but-last-1"]])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_init_is_refused_before_the_run_directory(tmp_path, capsys, task, adapt,
                                                           value):
    """#37: `--init ""` (a `$(...)` lookup that printed nothing) once trained random weights
    and recorded `init: ''`."""
    out = tmp_path / "run"
    _fails(["train", task, "--init", value, "--data", str(_reviews(tmp_path)), "--out",
            str(out), "--max-steps", "2", *adapt], capsys, "--init is empty", "random weights")
    assert not out.exists()


@pytest.mark.parametrize("task", ["classify", "lm", "translate"])
def test_an_empty_init_in_a_config_file_is_refused_naming_the_file(tmp_path, capsys, task):
    out, config = tmp_path / "run", tmp_path / "c.yaml"
    config.write_text('init: ""\nlora_rank: 2\n')
    _fails(["train", task, "--config", str(config), "--data", str(_reviews(tmp_path)),
            "--out", str(out), "--max-steps", "2"], capsys, f"--config {config}: init is empty")
    assert not out.exists()


@pytest.mark.parametrize("value, named", [
    ("5", "--init 5"),  # YAML's number: read as the text it was typed as, a path
    ("[a, b]", "init must be text, got ['a', 'b']"),
    ("yes", "init must be text, got true (YAML reads an unquoted yes, no, on or off as true")])
def test_an_init_in_a_config_file_that_is_not_text_is_refused_in_one_line(tmp_path, capsys,
                                                                          value, named):
    """`init: 5` in a --config file ended in a TypeError's traceback (exit 1)."""
    out, config = tmp_path / "run", tmp_path / "c.yaml"
    config.write_text(f"init: {value}\n")
    _fails(["train", "classify", "--config", str(config), "--data", str(_reviews(tmp_path)),
            "--out", str(out), "--max-steps", "2"], capsys, named)
    assert not out.exists()


def test_the_library_refuses_an_empty_init_too(tmp_path, monkeypatch):
    _run_dir(tmp_path / "cwd")  # an lm run where Path("") points
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(UsageError, match="^--init is empty"):
        get_task("lm").init_source("")


def test_prepare_names_tokenizer_for_a_run_of_another_task(tmp_path, capsys):
    """#37: `prepare --tokenizer RUN` of a classify run said "--init takes a run of the same
    task", a flag the user never typed."""
    classify = _run_dir(tmp_path / "cls", task="classify")
    (tmp_path / "t.txt").write_text("some text\n" * 50)
    out = tmp_path / "corpus"
    line = _fails(["prepare", str(tmp_path / "t.txt"), "--tokenizer", str(classify), "--out",
                   str(out)], capsys, f"--tokenizer {classify} holds a 'classify' run",
                  "--tokenizer takes only lm runs")
    assert "--init" not in line and not out.exists()
    _fails(["prepare", str(tmp_path / "t.txt"), "--tokenizer", "", "--out", str(out)],
           capsys, "--tokenizer is empty")


@pytest.mark.parametrize("how", ["--init", "--tokenizer"])
def test_a_run_whose_config_yaml_is_empty_is_named_as_empty(tmp_path, capsys, how):
    """#37: an empty config.yaml once gave "holds a None run"."""
    src = _run_dir(tmp_path / "src")
    (src / "config.yaml").write_text("")
    (tmp_path / "t.txt").write_text("some text\n" * 50)
    argv = (["train", "lm", "--init", str(src), "--data", str(tmp_path / "t.txt")]
            if how == "--init" else ["prepare", str(tmp_path / "t.txt"), "--tokenizer", str(src)])
    _fails([*argv, "--out", str(tmp_path / "out")], capsys,
           f"{how}: {src / 'config.yaml'} is empty")
