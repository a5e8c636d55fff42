"""``--init DIR`` of a Hugging Face checkpoint trains at the checkpoint's dropout unless
``--dropout`` is given (#37: a Marian fine-tune ran at translate's default 0.0 where opus-mt's
config.json says 0.1): Marian's ``dropout``, BERT's ``hidden_dropout_prob``, DistilBERT's
``dropout``, GPT-2's ``resid_pdrop``. One note says so; config.yaml records the value; a
``--dropout`` given (flag or ``--config``) wins, silently. Tiny random checkpoints, their
config.json edited to say 0.2 (or 0.1 where the task's default is 0.0)."""
import csv
import json

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
# without sacremoses installed, transformers' MarianTokenizer warns (it normalises nothing)
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

from attnlab.commands.train import configure  # noqa: E402
from attnlab.runs import write_yaml  # noqa: E402
from attnlab.tasks.classify.runtime import model_config_of  # noqa: E402
from tests.interop.test_checkpoint import save_bert, save_gpt2  # noqa: E402
from tests.interop.test_init_classify import _write_data, save_distilbert  # noqa: E402
from tests.interop.test_init_translate import PAIRS, save_marian  # noqa: E402


def _said(dropout: float, key: str, d) -> str:
    return f"note: --dropout {dropout}, from --init {d}'s config.json's {key}; a --dropout given wins"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """task -> (checkpoint directory, data file, config.json's dropout key, its value)."""
    root = tmp_path_factory.mktemp("init_dropout")
    transformers.logging.set_verbosity_error()
    pairs = root / "pairs.csv"
    with open(pairs, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("source", "target"), *PAIRS])
    text = root / "text.txt"
    text.write_text("the cat sat on the mat. a dog ran fast!\n" * 40)
    made = {"translate": (save_marian(root / "marian", [t for p in PAIRS for t in p]), pairs,
                          "dropout", 0.1),
            "classify": (save_bert(root / "bert"), _write_data(root / "tiny.csv"),
                         "hidden_dropout_prob", 0.2),
            "distilbert": (save_distilbert(root / "distilbert"), root / "tiny.csv",
                           "dropout", 0.2),
            "lm": (save_gpt2(root / "gpt2"), text, "resid_pdrop", 0.2)}
    for d, _, key, value in made.values():
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, key: value}))
    return made


def _configure(made, name, tmp_path, **given):
    d, data, _, _ = made[name]
    task = "classify" if name == "distilbert" else name
    fits = {"block_size": 16} if task == "lm" else {}  # within the tiny GPT-2's 64 positions
    return configure(task, {"init": str(d), "data": str(data), "out": str(tmp_path / "run"),
                            **fits, **given})[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["translate", "classify", "distilbert", "lm"])
def test_an_untyped_dropout_is_the_checkpoints_and_said_once(made, name, tmp_path, capsys):
    d, _, key, value = made[name]
    cfg = _configure(made, name, tmp_path)
    assert cfg.dropout == value and cfg.record()["dropout"] == value  # config.yaml's
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "--dropout" in line] == [_said(value, key, d.resolve())]


@pytest.mark.parametrize("name", ["translate", "classify", "lm"])
def test_a_typed_dropout_wins_without_a_note(made, name, tmp_path, capsys):
    cfg = _configure(made, name, tmp_path, dropout=0.05)
    assert cfg.dropout == 0.05
    assert "--dropout" not in capsys.readouterr().err


def test_gpt2s_attention_dropout_is_its_attn_pdrop_and_reaches_the_export(made, tmp_path,
                                                                           capsys):
    """GPT-2 has a dropout of its own on the attention weights (``attn_pdrop``), as the Llama
    family has its ``attention_dropout``: a run from it trains with it unless told otherwise,
    and ``export`` writes it back; it was --dropout's value (``resid_pdrop``)."""
    from attnlab.interop import to_hf
    from attnlab.tasks.lm.runtime import build_model

    d, text = made["lm"][0], made["lm"][1]
    pdrop = tmp_path / "gpt2"
    pdrop.mkdir()
    for f in d.iterdir():
        (pdrop / f.name).write_bytes(f.read_bytes())
    config = json.loads((d / "config.json").read_text())
    (pdrop / "config.json").write_text(json.dumps({**config, "attn_pdrop": 0.3}))
    cfg = configure("lm", {"init": str(pdrop), "data": str(text), "out": str(tmp_path / "run"),
                           "block_size": 16})[0]
    assert (cfg.dropout, cfg.attention_dropout) == (0.2, 0.3)
    assert cfg.record()["attention_dropout"] == 0.3  # config.yaml's
    said = (f"note: --attention-dropout 0.3, from --init {pdrop.resolve()}'s config.json's "
            f"attn_pdrop; a --attention-dropout given wins")
    assert said in capsys.readouterr().err.splitlines()
    exported = to_hf(build_model(cfg)).config  # what export --hf writes of the run
    assert (exported.attn_pdrop, exported.resid_pdrop) == (0.3, 0.2)
    given = configure("lm", {"init": str(pdrop), "data": str(text), "block_size": 16,
                             "out": str(tmp_path / "run2"), "attention_dropout": 0.0})[0]
    assert given.attention_dropout == 0.0
    (pdrop / "config.json").write_text(json.dumps({**config, "attn_pdrop": 0.2}))
    capsys.readouterr()
    same = configure("lm", {"init": str(pdrop), "data": str(text), "block_size": 16,
                            "out": str(tmp_path / "run3"), "dropout": 0.05})[0]
    assert same.attention_dropout == 0.05  # equal to resid_pdrop: --dropout's, as before
    assert "--attention-dropout" not in capsys.readouterr().err


def test_a_dropout_in_a_config_file_wins_too(made, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    write_yaml(config, {"dropout": 0.0})
    assert _configure(made, "translate", tmp_path, config=str(config)).dropout == 0.0
    assert "--dropout" not in capsys.readouterr().err


def test_the_classifier_is_built_at_the_checkpoints_dropout(made, tmp_path):
    cfg = _configure(made, "classify", tmp_path).derive(labels=["neg", "pos"],
                                                         model_vocab_size=90)
    built = model_config_of(cfg)
    assert (built.dropout, built.attention_dropout) == (0.2, 0.2)


@pytest.mark.slow  # trains a run
def test_an_attnlab_run_as_init_keeps_the_tasks_default(made, tmp_path, capsys):
    """A run's own dropout was a fine-tuning choice: not carried over (as before)."""
    from attnlab.cli import main

    src = tmp_path / "src"

    text = made["lm"][1]
    assert main(["train", "lm", "--data", str(text), "--out", str(src), "--max-steps", "1",
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "32", "--block-size", "8", "--warmup", "0",
                 "--threads", "1", "--dropout", "0.3"]) == 0
    capsys.readouterr()
    cfg = configure("lm", {"init": str(src), "data": str(text), "out": str(tmp_path / "run"),
                           "block_size": 8})[0]
    assert cfg.dropout == 0.1 and "--dropout" not in capsys.readouterr().err
