"""A run killed before its first checkpoint and resumed trains from step 0 as the run it is: a
run from ``--init`` starts again from --init's weights (read again and checked against
config.yaml's init_sha256), never from random ones, and keeps the tokeniser it saved; a run
without --init starts from the same seed. Either way its weights after training are those of
the same run never interrupted, bit for bit. Every task that takes --init: lm (a GPT-2
directory, a GGUF file, an attnlab run, with --freeze and --lora-rank, and an instruction
fine-tune of a chat model), classify, tag and translate (a Hugging Face directory, an attnlab
run). A run killed before its training loop was set up, resumed, killed after a checkpoint
and resumed again, of every task: the first resume records the settings the task resolved, so
the second rebuilds the same run. Tiny models, four steps."""
import csv
import json
import importlib.util
import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from attnlab.cli import main  # noqa: E402
from tests.interop.test_checkpoint import save_bert, save_gpt2  # noqa: E402
from tests.interop.test_init_translate import PAIRS, save_marian  # noqa: E402
from tests.interop.test_instruct_lm import _rows, _write, save_chat_model  # noqa: E402
from tests.reliability.conftest import write_corpus, write_people, write_reviews  # noqa: E402
from tests.training.loop_probe import probe_loop  # noqa: E402

# without sacremoses installed, transformers' MarianTokenizer warns (it normalises nothing)
pytestmark = [pytest.mark.slow,  # trains several runs per case
              pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")]

STEPS = ["--max-steps", "4", "--checkpoint-every", "100", "--warmup", "0", "--threads", "1"]
SMALL = "--model-dim 16 --num-heads 2 --num-layers 2 --dim-feedforward 32".split()
DATA = {"lm": "--block-size 16 --batch-size 4", "classify": "--batch-size 8",
        "tag": "--batch-size 8", "translate": "--batch-size 8"}


class _Killed(Exception):
    """Stands in for a SIGKILL (out of memory, a node lost) before the first checkpoint."""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """name -> path: the data files, tiny Hugging Face directories and tiny attnlab runs."""
    root = tmp_path_factory.mktemp("resume_before_checkpoint")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    pairs = root / "pairs.csv"
    with open(pairs, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("source", "target"), *PAIRS])
    made = {"lm": write_corpus(root / "corpus.txt"), "classify": write_reviews(root / "r.csv"),
            "tag": write_people(root / "people.conll"), "translate": pairs,
            "gpt2": save_gpt2(root / "gpt2"), "bert": save_bert(root / "bert"),
            "marian": save_marian(root / "marian", [t for p in PAIRS for t in p]),
            "chatml": save_chat_model(root / "qwen2"), "rows": _write(root / "rows.jsonl", _rows())}
    if importlib.util.find_spec("gguf"):  # a GGUF file of a tiny GPT-2, as llama.cpp writes it
        from tests.interop.test_gguf import _gpt2, write_gpt2_gguf

        made["gguf"] = write_gpt2_gguf(root / "tiny.gguf", *_gpt2())
    for task in DATA:  # an attnlab run of each task, to be --init of another
        extra = ["--tokenizer", "char"] if task == "lm" else []
        argv = ["train", task, "--out", str(root / f"{task}-run"), "--data", str(made[task]),
                *STEPS, *SMALL, *DATA[task].split(), *extra]
        assert main(argv) == 0
        made[f"{task}-run"] = root / f"{task}-run"
    return made


CASES = {  # name -> (task, --data's and --init's names in ``made``, more flags)
    "lm-run-frozen": ("lm", "lm", "lm-run", ["--freeze", "all-but-last-1"]),
    "lm-gpt2": ("lm", "lm", "gpt2", []),
    "lm-gpt2-lora": ("lm", "lm", "gpt2", ["--lora-rank", "2"]),
    "lm-gguf": ("lm", "lm", "gguf", []),
    "lm-instruct": ("lm", "rows", "chatml", ["--dropout", "0.1", "--block-size", "64"]),
    "lm-scratch": ("lm", "lm", None, ["--tokenizer", "char", *SMALL, "--dropout", "0.1"]),
    "classify-scratch": ("classify", "classify", None, [*SMALL, "--dropout", "0.1"]),
    "tag-scratch": ("tag", "tag", None, [*SMALL, "--dropout", "0.1"]),
    "translate-scratch": ("translate", "translate", None, [*SMALL, "--dropout", "0.1"]),
    "classify-bert": ("classify", "classify", "bert", []),
    "classify-run": ("classify", "classify", "classify-run", []),
    "tag-bert": ("tag", "tag", "bert", []),
    "tag-run": ("tag", "tag", "tag-run", []),
    "translate-marian": ("translate", "translate", "marian", []),
    "translate-run": ("translate", "translate", "translate-run", []),
}


def _argv(made, name, out):
    task, data, init, extra = CASES[name]
    return ["train", task, "--out", str(out), "--data", str(made[data]), *STEPS,
            *DATA[task].split(), *(["--init", str(made[init])] if init else []), *extra]


class _KillAt2:
    """A loop probe: the run dies after its second step (and its checkpoint, if it makes one)."""

    def on_train_batch_end(self, loop):
        if loop.step == 2:
            raise _Killed("killed after step 2")


def _killed_at_step_2(argv, out, monkeypatch):
    """``attnlab train`` (``argv``) dying after its second step, before any checkpoint;
    as a kill -9, it leaves its run directory as it was (config.yaml, tokenizer.json)."""
    with monkeypatch.context() as m:
        probe_loop(m, _KillAt2())
        m.setattr("attnlab.commands.preflight.discard_unstarted", lambda *a, **k: False)
        with pytest.raises(_Killed):
            main(argv)
    assert not (out / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_run_resumed_before_its_first_checkpoint_equals_one_never_interrupted(
        made, name, tmp_path, monkeypatch, capsys):
    if CASES[name][2] == "gguf":
        pytest.importorskip("gguf")
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    assert main(_argv(made, name, whole)) == 0
    _killed_at_step_2(_argv(made, name, resumed), resumed, monkeypatch)
    capsys.readouterr()
    task = CASES[name][0]
    assert main(["train", task, "--out", str(resumed), "--resume"]) == 0
    assert "--resume: no checkpoint yet in" in capsys.readouterr().err
    for weights in ("model.safetensors", "adapter_model.safetensors"):
        if not (whole / weights).is_file():
            continue
        a, b = load_file(whole / weights), load_file(resumed / weights)
        assert a.keys() == b.keys()
        differ = sorted(k for k in a if not torch.equal(a[k], b[k]))
        assert not differ, f"{len(differ)} of {len(a)} tensors differ: {differ[:3]}"
    assert (resumed / "tokenizer.json").read_bytes() == (whole / "tokenizer.json").read_bytes()


def _swap_e_and_t(tokenizer_json):
    """--init's tokenizer.json, changed after the run started: "e" and "t" trade their ids."""
    found = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    vocab = found["model"]["vocab"]
    vocab["e"], vocab["t"] = vocab["t"], vocab["e"]
    tokenizer_json.write_text(json.dumps(found), encoding="utf-8")


@pytest.mark.parametrize("name", ["classify-bert", "tag-bert", "lm-instruct"])
def test_such_a_resume_keeps_the_tokenizer_it_saved_not_inits_files(made, name, tmp_path,
                                                                     monkeypatch, capsys):
    """init_sha256 pins --init's weights, not its tokenizer files: a resume reads the
    tokeniser the run saved, so a tokenizer.json of DIR edited since changes nothing."""
    whole, resumed, init = tmp_path / "whole", tmp_path / "resumed", CASES[name][2]
    assert main(_argv(made, name, whole)) == 0
    copy = shutil.copytree(made[init], tmp_path / init)
    _killed_at_step_2(_argv({**made, init: copy}, name, resumed), resumed, monkeypatch)
    _swap_e_and_t(copy / "tokenizer.json")
    assert main(["train", CASES[name][0], "--out", str(resumed), "--resume"]) == 0
    a, b = load_file(whole / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    assert (resumed / "tokenizer.json").read_bytes() == (whole / "tokenizer.json").read_bytes()


def test_a_changed_init_is_refused_on_such_a_resume(made, tmp_path, monkeypatch, capsys):
    """--init's weights changed since the run was configured: the resume refuses in one line,
    as a new run's start does, rather than training from other weights."""
    base, out = tmp_path / "base", tmp_path / "ft"
    shutil.copytree(made["lm-run"], base)
    _killed_at_step_2(["train", "lm", "--out", str(out), "--data", str(made["lm"]), *STEPS,
                       *DATA["lm"].split(), "--init", str(base)], out, monkeypatch)
    weights = load_file(base / "model.safetensors")
    save_file({k: v + 1 for k, v in weights.items()}, base / "model.safetensors")
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "changed since the run was configured" in err[-1] and str(base) in err[-1], err
    assert not (out / "model.safetensors").exists()


def _killed_in_setup(argv):
    """``attnlab train`` (``argv``) dying as its training loop is built (a kill -9, an OOM):
    after the run directory and the task's start, before the engine resolves its settings."""
    import attnlab.training.engine as engine

    def killed(*args, **kwargs):
        raise _Killed("killed before setup")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(engine.Loop, "__init__", killed)
        m.setattr("attnlab.commands.preflight.discard_unstarted", lambda *a, **k: False)
        with pytest.raises(_Killed):
            main(argv)


def _settings(run_dir):
    """config.yaml of ``run_dir``, less whether it was resumed and its nulls, ``run_dir``
    written RUN in its paths (``out``, lm's ``data_dir``)."""
    found = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    return {k: v.replace(str(run_dir), "RUN") if isinstance(v, str) else v
            for k, v in found.items() if k != "resume" and v is not None}


@pytest.mark.parametrize("name", ["lm-scratch", "lm-gpt2", "classify-scratch", "classify-run",
                                  "tag-scratch", "tag-bert", "translate-scratch",
                                  "translate-marian", "translate-run"])
def test_a_run_killed_in_setup_then_after_a_checkpoint_resumes_twice(made, name, tmp_path,
                                                                     monkeypatch, capsys):
    """The first resume, which finds no checkpoint, records the settings the task resolved
    (translate's vocabulary sizes, classify's labels) in config.yaml, so that a second
    resume, from the checkpoint the first one wrote, rebuilds the same run."""
    _resumed_twice(_argv(made, name, tmp_path / "whole"), tmp_path, monkeypatch, capsys)


def _tasks_without_init(tmp_path):
    """name -> argv (less --out) of the tasks that take no --init: tiny runs, four steps."""
    from attnlab.tasks.jets.data import write_jets
    from tests.jets.test_task import synthetic_jets
    from tests.tasks.test_classify_sets import SET_ARGS, write_sets

    write_jets(tmp_path / "jets.h5", *synthetic_jets(40))
    small = ["--model-dim", "16", "--num-heads", "2", "--dim-feedforward", "32"]
    return {"reverse": ["reverse", "--train-size", "64", "--val-size", "16", "--test-size",
                        "16", "--num-layers", "2", *small],
            "jets": ["jets", "--data", str(tmp_path / "jets.h5"), "--batch-size", "16",
                     "--max-constituents", "30", "--pair-bias", *small],
            "sets": ["classify", "--data", str(write_sets(tmp_path / "clouds.csv")), *SET_ARGS,
                     "--batch-size", "16", "--num-layers", "1", *small],
            "anomaly": ["anomaly", "--train-sets", "256", "--val-sets", "32", "--test-sets", "64",
                        "--set-size", "5", "--batch-size", "16", *small],
            "graph": ["graph"],
            "translate-builtin": ["translate", "--max-number", "1000", "--test-size", "40",
                                  "--val-size", "16", "--num-layers", "1", "--batch-size", "16",
                                  *small]}


@pytest.mark.parametrize("name", ["reverse", "jets", "sets", "anomaly", "graph",
                                  "translate-builtin"])
def test_so_does_a_run_of_a_task_without_init(name, tmp_path, monkeypatch, capsys):
    task, *rest = _tasks_without_init(tmp_path)[name]
    argv = ["train", task, "--out", str(tmp_path / "whole"), *rest, *STEPS, "--dropout", "0.1"]
    _resumed_twice(argv, tmp_path, monkeypatch, capsys)


def _resumed_twice(argv, tmp_path, monkeypatch, capsys):
    """``argv`` (``--out tmp_path/whole``) trained whole, and again in tmp_path/resumed killed
    in setup, resumed and killed after step 2's checkpoint, resumed again: the second run
    records the first resume's settings as the first does, and ends with its weights."""
    whole, resumed, task = tmp_path / "whole", tmp_path / "resumed", argv[1]
    argv = [a if a != "100" else "1" for a in argv]  # --checkpoint-every 1
    assert main(argv) == 0
    _killed_in_setup([a if a != str(whole) else str(resumed) for a in argv])
    with monkeypatch.context() as m:
        probe_loop(m, _KillAt2())
        with pytest.raises(_Killed):
            main(["train", task, "--out", str(resumed), "--resume"])
    assert (resumed / "checkpoints" / "last.ckpt").is_file()
    # the settings the first resume resolved, as the run never interrupted records them (a
    # resumed classify run writes its absent target_mean &c. as null: the same settings)
    assert _settings(resumed) == _settings(whole)
    capsys.readouterr()
    assert main(["train", task, "--out", str(resumed), "--resume"]) == 0, capsys.readouterr().err
    a, b = load_file(whole / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert a.keys() == b.keys()
    differ = sorted(k for k in a if not torch.equal(a[k], b[k]))
    assert not differ, f"{len(differ)} of {len(a)} tensors differ: {differ[:3]}"
