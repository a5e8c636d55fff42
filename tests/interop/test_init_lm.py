"""``attnlab train lm --init DIR``: a language model that starts from a GPT-2 directory (or an
attnlab lm run) and goes on training on --data with the checkpoint's own tokenizer.

Offline: a tiny GPT-2 built from a config with random weights and ``save_pretrained``, beside a
byte-level BPE tokenizer trained in the test (``test_checkpoint.save_gpt2``: its embedding has
20 rows more than the tokenizer has ids, as GPT-2 checkpoints pad it). Logits are compared in
float32 with atol = rtol = 1e-5; frozen weights and token ids exactly.
"""
import json
import math
import sys

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.interop.hf_tokenizer import HFTokenizer  # noqa: E402

from ..training.loop_probe import probe_loop  # noqa: E402
from .test_checkpoint import CORPUS, save_gpt2  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
TEXT = "\n".join(CORPUS)  # 2.3 kB of text
PROBE = "the cat sat on the mat. a dog ran fast!"
# tiny and quick: a window of 16 tokens of the 64 the model reads, 3 steps
TRAIN = ["--block-size", "16", "--batch-size", "4", "--max-steps", "3", "--warmup", "1",
         "--lr", "1e-2", "--val-batches", "2", "--threads", "1"]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return save_gpt2(tmp_path_factory.mktemp("gpt2") / "gpt2")


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _hf_logits(directory, ids):
    hf = transformers.GPT2LMHeadModel.from_pretrained(directory).eval()
    with torch.no_grad():
        return hf(ids).logits  # (1, T, V)


def _logits(model, ids):
    was = model.training
    model.eval()
    with torch.no_grad():
        out = model(ids)  # (1, T, V)
    model.train(was)
    return out


def _probe_ids(directory):
    return torch.tensor([HFTokenizer.from_transformers(
        transformers.AutoTokenizer.from_pretrained(directory)).encode(PROBE)])


class Probe:
    """Records the model as training starts (its logits, what trains) and after the last step."""

    def __init__(self, ids):
        self.ids, self.first, self.last, self.trains = ids, None, None, None

    def on_train_start(self, loop):
        model = loop.module.model
        self.first = _logits(model, self.ids)
        self.trains = sorted(n for n, p in model.named_parameters() if p.requires_grad)

    def on_train_batch_end(self, loop):
        if loop.step == loop.max_steps:
            self.last = _logits(loop.module.model, self.ids)


def _train(monkeypatch, out, *flags, ids=None):
    probe = Probe(ids)
    probe_loop(monkeypatch, probe)
    assert main(["train", "lm", "--out", str(out), *TRAIN, *flags]) == 0
    return probe


@pytest.fixture(scope="module")
def run(gpt2, text, tmp_path_factory):
    """A run from the GPT-2 directory on a text file, and what the probe saw."""
    out = tmp_path_factory.mktemp("runs") / "from-gpt2"
    with pytest.MonkeyPatch.context() as mp:
        probe = _train(mp, out, "--init", str(gpt2), "--data", str(text), ids=_probe_ids(gpt2))
    return out, probe


@pytest.mark.slow
def test_the_run_starts_from_the_checkpoints_logits(run, gpt2):
    out, probe = run
    assert_close(probe.first, _hf_logits(gpt2, probe.ids), **TOL)
    assert not torch.allclose(probe.last, probe.first)  # and it trained
    cfg = attnlab.loading.check_run_dir(out)[1]
    assert cfg.init == str(gpt2.resolve()) and cfg.tokenizer == "hf"
    assert cfg.init_sha256 == read_checkpoint(gpt2, task="lm").sha256
    # the model reads the checkpoint's 64 positions and all of its padded rows
    assert (cfg.max_len, cfg.block_size, cfg.vocab_size) == (64, 16, 320)


@pytest.mark.slow
def test_the_run_saves_and_loads_the_checkpoints_tokenizer(run, gpt2, text):
    out, probe = run
    model, tok = attnlab.load(out)
    theirs = transformers.AutoTokenizer.from_pretrained(gpt2)
    assert isinstance(tok, HFTokenizer) and tok.encode(PROBE) == theirs(PROBE)["input_ids"]
    assert_close(_logits(model, probe.ids), probe.last, **TOL)  # the model trained is saved
    # the text was tokenised with it: RUN/data/train.bin starts with the text's ids
    first = theirs(TEXT[:200])["input_ids"][:20]
    assert (out / "data" / "train.bin").read_bytes()[:40] == torch.tensor(
        first, dtype=torch.int16).numpy().tobytes()


@pytest.mark.slow
def test_generate_predict_evaluate_and_view_work_on_the_run(run, text, tmp_path, capsys):
    out, _ = run
    assert main(["generate", str(out), "--prompt", "the cat", "--max-new-tokens", "40",
                 "--seed", "1", "--temperature", "3"]) == 0  # padded rows are drawn too
    assert capsys.readouterr().out.startswith("the cat")
    assert main(["predict", str(out), "--input", "a dog", "--json"]) == 0
    assert "prediction" in json.loads(capsys.readouterr().out.splitlines()[-1])
    assert main(["evaluate", str(out), "--data", str(text)]) == 0
    assert main(["view", str(out), "--input", "the cat sat", "--out", str(tmp_path / "v.html")]) == 0


@pytest.mark.slow
def test_resume_continues_without_reading_the_directory_again(run, gpt2, tmp_path):
    import shutil

    out, _ = run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    # a resumed run never reads DIR: its weights are its checkpoint's
    (gpt2 / "model.safetensors").rename(gpt2 / "moved.safetensors")
    try:
        assert main(["train", "lm", "--out", str(copy), "--resume", "--max-steps", "5"]) == 0
    finally:
        (gpt2 / "moved.safetensors").rename(gpt2 / "model.safetensors")
    assert json.loads((copy / "metrics.json").read_text())["steps"] == 5


@pytest.mark.slow
def test_export_gives_gpt2_with_the_same_logits_and_tokenizer(run, gpt2, tmp_path):
    out, probe = run
    assert main(["export", str(out), "--hf", str(tmp_path / "hf")]) == 0
    model, tok = attnlab.load(out)
    assert_close(_hf_logits(tmp_path / "hf", probe.ids), _logits(model, probe.ids), **TOL)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    original = transformers.AutoTokenizer.from_pretrained(gpt2)
    for text in (PROBE, "ünïcödé 🙂 <|endoftext|> tabs\tand\nlines"):
        assert theirs(text)["input_ids"] == original(text)["input_ids"] == tok.encode(text)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    eot = original.eos_token_id
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (eot, eot, None)


@pytest.mark.slow
def test_evaluate_data_is_transformers_own_loss_on_the_same_tokens(run, text, tmp_path, capsys):
    """evaluate --data FILE on a run from GPT-2 against GPT2LMHeadModel's loss (its labels,
    -100 for a token not scored) on the file's tokens, in windows of the run's --block-size 16:
    the windows that tile the file, then the last 17 tokens for the targets they leave."""
    out, _ = run
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data", str(text)]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert main(["export", str(out), "--hf", str(tmp_path / "hf")]) == 0
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    ids = torch.tensor(transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")(TEXT)[
        "input_ids"])
    whole = (len(ids) - 1) // 16 * 16  # targets of the windows that tile the file
    assert len(ids) - 1 > whole  # the file ends in a part window
    windows = [(ids[a : a + 17], 16) for a in range(0, whole, 16)]
    windows.append((ids[-17:], len(ids) - 1 - whole))
    total = 0.0
    with torch.no_grad():
        for window, scored in windows:
            labels = window.clone()
            labels[: 17 - scored] = -100  # HF shifts: labels[t] is predicted from 0..t-1
            total += float(hf(window[None], labels=labels[None]).loss) * scored
    loss = total / (len(ids) - 1)
    assert ours["val_loss"] == pytest.approx(loss, rel=2e-5)
    assert ours["val_perplexity"] == pytest.approx(math.exp(loss), rel=2e-5)


@pytest.mark.slow
def test_prepare_with_the_checkpoints_tokenizer(gpt2, text, tmp_path, monkeypatch):
    corpus = tmp_path / "corpus"
    assert main(["prepare", str(text), "--tokenizer", str(gpt2), "--out", str(corpus)]) == 0
    meta = json.loads((corpus / "meta.json").read_text())
    theirs = transformers.AutoTokenizer.from_pretrained(gpt2)
    assert meta["tokenizer"] == "hf" and meta["vocab_size"] == len(theirs)
    split = int(meta["characters"] * (1 - meta["val_fraction"]))  # where val starts
    for name, part in (("train", TEXT[:split]), ("val", TEXT[split:])):
        ids = torch.tensor(theirs(part)["input_ids"], dtype=torch.int16)
        assert (corpus / f"{name}.bin").read_bytes() == ids.numpy().tobytes()
    probe = _train(monkeypatch, tmp_path / "run", "--init", str(gpt2), "--data", str(corpus),
                   ids=_probe_ids(gpt2))
    assert_close(probe.first, _hf_logits(gpt2, probe.ids), **TOL)


@pytest.mark.slow
def test_freeze_keeps_the_first_block_bit_for_bit(gpt2, text, tmp_path, monkeypatch):
    out = tmp_path / "run"
    probe = _train(monkeypatch, out, "--init", str(gpt2), "--data", str(text),
                   "--freeze", "all-but-last-1", ids=_probe_ids(gpt2))
    assert not any(n.startswith(("decoder.layers.0.", "positional_encoding.")) for n in probe.trains)
    before = read_checkpoint(gpt2, task="lm").model.state_dict()
    after = attnlab.load(out)[0].state_dict()
    for name, value in after.items():
        if name.startswith(("decoder.layers.0.", "positional_encoding.")):
            assert torch.equal(value, before[name]), name
    assert not torch.equal(after["decoder.layers.1.linear_net.0.weight"],
                           before["decoder.layers.1.linear_net.0.weight"])


@pytest.mark.slow
def test_lora_trains_only_adapters_and_merges_into_the_same_model(gpt2, text, tmp_path,
                                                                  monkeypatch):
    out = tmp_path / "run"
    probe = _train(monkeypatch, out, "--init", str(gpt2), "--data", str(text), "--lora-rank",
                   "2", "--dropout", "0", ids=_probe_ids(gpt2))
    assert probe.trains and all("lora" in n for n in probe.trains)
    assert_close(probe.first, _hf_logits(gpt2, probe.ids), **TOL)  # B = 0: no update yet
    model = attnlab.load(out)[0]
    assert_close(_logits(model, probe.ids), probe.last, **TOL)  # merged = the adapter model
    assert not torch.allclose(probe.last, probe.first)
    before = read_checkpoint(gpt2, task="lm").model.state_dict()
    for name, value in model.state_dict().items():  # only the attention projections moved
        if "self_attn" not in name:
            assert torch.equal(value, before[name]), name


@pytest.mark.slow
def test_init_from_an_attnlab_lm_run(run, text, tmp_path, monkeypatch):
    first, probe = run
    out = tmp_path / "again"
    second = _train(monkeypatch, out, "--init", str(first), "--data", str(text), ids=probe.ids)
    assert_close(second.first, probe.last, **TOL)  # starts where the first run ended
    assert (out / "tokenizer.json").read_bytes() == (first / "tokenizer.json").read_bytes()
    cfg = attnlab.loading.check_run_dir(out)[1]
    assert (cfg.max_len, cfg.vocab_size, cfg.tokenizer) == (64, 320, "hf")


@pytest.mark.slow
def test_init_from_a_char_run_keeps_its_tokenizer(text, tmp_path, monkeypatch):
    first = tmp_path / "chars"
    small = ["--model-dim", "16", "--num-heads", "2", "--num-layers", "1"]
    _train(monkeypatch, first, "--data", str(text), *small, ids=torch.tensor([[5, 6, 7]]))
    model, tok = attnlab.load(first)
    ids = torch.tensor([tok.encode(PROBE[:16])])  # its 16 positions
    second = _train(monkeypatch, tmp_path / "again", "--init", str(first), "--data", str(text),
                    ids=ids)
    assert_close(second.first, _logits(model, ids), **TOL)
    # the text was encoded with the first run's characters, not with ones fitted again
    assert (tmp_path / "again" / "tokenizer.json").read_bytes() == (first / "tokenizer.json").read_bytes()
    cfg = attnlab.loading.check_run_dir(tmp_path / "again")[1]
    assert (cfg.tokenizer, cfg.max_len, cfg.vocab_size) == ("char", 16, tok.vocab_size)


def _refused(capsys, out, *args):
    assert main(["train", "lm", "--out", str(out), *TRAIN, *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    return err


@pytest.mark.parametrize("flags, says", [
    (["--model-dim", "64"], ["--model-dim 64", "model_dim 32",
                             "(the shape comes from the checkpoint)"]),
    (["--layer-norm-eps", "1e-3"], ["--layer-norm-eps 0.001", "layer_norm_eps 1e-05",
                                    "(the checkpoint's weights were trained with it)"]),
    (["--num-layers", "3"], ["--num-layers 3", "num_layers 2"]),
    (["--tokenizer", "bpe"], ["--tokenizer bpe", "hf"]),
    (["--vocab-size", "100"], ["--vocab-size 100", "320"]),
    (["--block-size", "65"], ["--block-size 65", "64 positions"]),
    (["--no-bias"], ["--no-bias: ", "bias True", "drop --no-bias"]),  # #37: was "--bias False"
    (["--no-tie-weights"], ["--no-tie-weights: ", "drop --no-tie-weights"]),
    (["--no-norm-first"], ["--no-norm-first: ", "drop --no-norm-first"]),
])
def test_a_flag_the_checkpoint_fixes_is_refused(gpt2, text, tmp_path, capsys, flags, says):
    err = _refused(capsys, tmp_path / "run", "--init", str(gpt2), "--data", str(text), *flags)
    assert all(s in err for s in says), err


def test_a_checkpoint_with_fewer_rows_than_tokenizer_ids_is_refused(text, tmp_path, capsys):
    short = save_gpt2(tmp_path / "short", extra_rows=-5)
    err = _refused(capsys, tmp_path / "run", "--init", str(short), "--data", str(text))
    assert "the tokenizer has 300 ids but the model's embedding only 295 rows" in err


@pytest.mark.parametrize("change, named", [
    ({"n_layer": 3}, "model.safetensors lacks tensors that"),
    # trained one layer of the two without a word (transformers' report of the unused ones
    # silenced)
    ({"n_layer": 1}, "model.safetensors holds tensors that"),
    ({"n_inner": 64}, "transformer.h.0.mlp.c_fc.bias is (128,) there, (64,) by the config")])
def test_a_config_json_its_weights_do_not_match_is_refused_before_the_run_directory(
        gpt2, text, tmp_path, capsys, change, named):
    # it was found once the run read the weights: after `attnlab train lm -> RUN` and the
    # directory made, then removed, below transformers' report of the tensors it lacked
    import shutil

    d = tmp_path / "edited"
    shutil.copytree(gpt2, d)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, **change}))
    err = _refused(capsys, tmp_path / "run", "--init", str(d), "--data", str(text))
    assert f"--init {d}: " in err and named in err and str(d / "config.json") in err, err


@pytest.mark.parametrize("layers, says", [
    (3, "lacks tensors that {config} describes (transformer.h.2.attn.c_attn.bias, "
        "transformer.h.2.attn.c_attn.weight, transformer.h.2.attn.c_proj.bias and 9 more)"),
    # transformers' report listed the unused layer's tensors as UNEXPECTED and the model
    # generated from its first layer; once the report was silenced, without a word
    (1, "holds tensors that {config} does not describe (transformer.h.1.attn.c_attn.weight, "
        "transformer.h.1.attn.c_proj.bias, transformer.h.1.attn.c_proj.weight and 8 more): "
        "is config.json the one saved with these weights?")])
def test_generate_of_a_directory_its_config_does_not_match_says_one_line(gpt2, tmp_path,
                                                                         capfd, layers, says):
    """`attnlab generate DIR` (and train translate --init of a Marian directory, through the
    same load) printed transformers' LOAD REPORT, a table of each missing tensor, above the
    one line that names them."""
    import shutil

    d = tmp_path / "edited"
    shutil.copytree(gpt2, d)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "n_layer": layers}))
    import transformers

    transformers.logging.set_verbosity_warning()  # as a user's (the tests quiet it)
    capfd.readouterr()
    assert main(["generate", str(d), "--prompt", "hi"]) == 2
    err = capfd.readouterr().err
    assert err.splitlines() == [f"attnlab: error: {d / 'model.safetensors'} "
                                + says.format(config=d / "config.json")], err


def test_an_old_gpt2_checkpoints_attention_buffers_are_not_called_undescribed(gpt2, tmp_path):
    """GPT-2 files saved by an older transformers hold attn.bias and attn.masked_bias, which
    transformers reads past (attn.bias in _keys_to_ignore_on_load_unexpected; masked_bias,
    a constant, no longer listed): neither the header check nor the load refuses them."""
    import shutil

    from safetensors.torch import load_file, save_file

    from attnlab.interop.direct_read import transformers_files_disagree

    d = tmp_path / "old"
    shutil.copytree(gpt2, d)
    tensors = load_file(d / "model.safetensors")
    for i in range(2):
        tensors[f"transformer.h.{i}.attn.bias"] = torch.ones(1, 1, 64, 64)
        tensors[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(tensors, d / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((d / "config.json").read_text())
    assert transformers_files_disagree(config, d / "model.safetensors") == ([], [], [])
    assert read_checkpoint(d, task="lm").model.config.num_layers == 2


@pytest.mark.slow
def test_a_refusal_loads_neither_torch_nor_transformers(gpt2, text, tmp_path):
    import subprocess
    import sys

    code = ("import sys; from attnlab.cli import main; "
            f"rc = main(['train', 'lm', '--init', {str(gpt2)!r}, '--data', {str(text)!r}, "
            f"'--num-heads', '2', '--out', {str(tmp_path / 'run')!r}]); "
            "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert "--num-heads 2" in done.stderr and "num_heads 4" in done.stderr


def test_a_corpus_prepared_with_another_tokenizer_is_refused(gpt2, text, tmp_path, capsys):
    chars = tmp_path / "chars"
    assert main(["prepare", str(text), "--out", str(chars)]) == 0
    err = _refused(capsys, tmp_path / "run", "--init", str(gpt2), "--data", str(chars))
    assert "the char tokenizer" in err and f"--tokenizer {gpt2}" in err
    other = save_gpt2(tmp_path / "other", extra_rows=0)
    tok = json.loads((other / "tokenizer.json").read_text())
    tok["model"]["vocab"] = {t: i for i, t in enumerate(reversed(list(tok["model"]["vocab"])))}
    (other / "tokenizer.json").write_text(json.dumps(tok))
    (other / "vocab.json").unlink(missing_ok=True)
    assert main(["prepare", str(text), "--tokenizer", str(other), "--out",
                 str(tmp_path / "other-corpus")]) == 0
    err = _refused(capsys, tmp_path / "run", "--init", str(gpt2), "--data",
                   str(tmp_path / "other-corpus"))
    assert "another tokenizer" in err and "is id" in err


@pytest.mark.slow
def test_a_run_and_a_corpus_of_one_tokenizer_match_whether_or_not_they_keep_its_eos_ids(
        gpt2, text, tmp_path):
    """A corpus prepared with --tokenizer DIR now keeps DIR's eos ids (what ends generation)
    in its tokenizer.json; an --init RUN made before, without them, reads the same ids, and
    was refused as "another tokenizer"."""
    import yaml

    from attnlab.tasks.lm.checks import check_init_corpus

    corpus = tmp_path / "corpus"
    assert main(["prepare", str(text), "--tokenizer", str(gpt2), "--out", str(corpus)]) == 0
    tok = json.loads((corpus / "tokenizer.json").read_text())
    assert tok["checkpoint_eos_ids"]  # (GPT-2's generation_config.json names its eos)
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"task": "lm"}))
    del tok["checkpoint_eos_ids"]
    (run / "tokenizer.json").write_text(json.dumps(tok))
    check_init_corpus(run, corpus)  # no refusal
    tok["specials"] = {**tok["specials"], "eos": "<|other|>"}
    (run / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(attnlab.errors.UsageError, match="another tokenizer"):
        check_init_corpus(run, corpus)


def test_a_directory_that_is_no_corpus_is_refused_with_init(gpt2, tmp_path, capsys):
    # a datasets directory (what save_to_disk writes) and an empty folder: without --init each
    # is refused in one line; --init read a tokenizer.json neither has and failed uncaught
    table = tmp_path / "films" / "train"
    table.mkdir(parents=True)
    (table / "state.json").write_text("{}")
    err = _refused(capsys, tmp_path / "run", "--init", str(gpt2), "--data", str(table))
    assert f"--data {table}: train lm reads a text file or a prepared corpus" in err
    # the corpus must be made with --init's tokenizer, else the next run is refused again
    assert f"attnlab prepare {table} --text-column NAME --tokenizer {gpt2} --out CORPUS" in err
    parquet = tmp_path / "films.parquet"
    parquet.write_bytes(b"PAR1")
    err = _refused(capsys, tmp_path / "run", "--init", str(gpt2), "--data", str(parquet))
    assert f"--tokenizer {gpt2} --out CORPUS" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    err = _refused(capsys, tmp_path / "run", "--init", str(gpt2), "--data", str(empty))
    assert f"--data {empty} is not a prepared corpus (no meta.json)" in err


def test_init_of_another_tasks_run_is_refused(text, tmp_path, capsys):
    classify = tmp_path / "classify-run"
    classify.mkdir()
    (classify / "config.yaml").write_text("task: classify\nmodel_dim: 32\n")
    (classify / "model.safetensors").write_bytes(b"")
    (classify / "tokenizer.json").write_text("{}")
    err = _refused(capsys, tmp_path / "run", "--init", str(classify), "--data", str(text))
    assert "classify" in err


def test_tokenizer_hf_without_init_is_refused(text, tmp_path, capsys):
    err = _refused(capsys, tmp_path / "run", "--tokenizer", "hf", "--data", str(text))
    assert "--init" in err


def test_prepare_refuses_a_tokenizer_that_is_no_kind_nor_directory(text, tmp_path, capsys):
    assert main(["prepare", str(text), "--tokenizer", "gpt2", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "--tokenizer 'gpt2'" in err and "never downloads" in err
    assert not (tmp_path / "c").exists()


def _without_block_size(flags):
    i = flags.index("--block-size")
    return [*flags[:i], *flags[i + 2:]]


@pytest.mark.slow
def test_the_default_block_size_is_fitted_to_the_checkpoint(gpt2, text, tmp_path, capsys):
    """#37: the default --block-size 128 on a checkpoint of 64 positions was refused as
    "--block-size 128: ...", a flag the user never typed. Untyped, it becomes 64, said in
    one line and recorded."""
    out = tmp_path / "run"
    assert main(["train", "lm", "--out", str(out), *_without_block_size(TRAIN), "--init",
                 str(gpt2), "--data", str(text)]) == 0
    err = capsys.readouterr().err
    fitted = [line for line in err.splitlines() if "--block-size" in line]
    assert fitted == [f"attnlab: --block-size 64 (the default 128 would not fit): --init "
                      f"{gpt2}'s model reads at most 64 positions (n_positions)"], err
    assert attnlab.load(out)[0].max_len == 64
    assert "block_size: 64" in (out / "config.yaml").read_text().splitlines()


@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_block_size_given_above_the_checkpoints_positions_is_refused(gpt2, text, tmp_path,
                                                                      capsys, how):
    """A value the user gave (a flag, a --config key) is theirs: refused, named as given."""
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text("block_size: 128\n")
    given = ["--block-size", "128"] if how == "flag" else ["--config", str(config)]
    assert main(["train", "lm", "--out", str(out), *_without_block_size(TRAIN), "--init",
                 str(gpt2), "--data", str(text), *given]) == 2
    err = capsys.readouterr().err
    named = ("--block-size 128: " if how == "flag" else f"--config {config}: block_size 128: ")
    assert err == (f"attnlab: error: {named}--init {gpt2}'s model reads at most 64 positions "
                   f"(n_positions); give {'--block-size' if how == 'flag' else 'block_size'} 64 "
                   f"or less\n")
    assert not out.exists()


def test_without_transformers_a_gpt2_init_names_the_extra_to_install(gpt2, text, tmp_path,
                                                                      capsys, monkeypatch):
    """GPT-2's model is read by transformers (the optional `hf` extra): without it, one line
    names the flag and what to install, exit 2, and no run directory, in place of a
    traceback."""
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    err = _refused(capsys, tmp_path / "run", "--init", str(gpt2), "--data", str(text))
    assert f"--init {gpt2}: reading a gpt2 checkpoint needs the transformers package" in err
    assert "pip install 'attnlab[hf]'" in err


def test_a_module_the_installed_transformers_lacks_is_not_called_a_missing_package(
        gpt2, text, tmp_path, capsys, monkeypatch):
    """transformers installed but without a module a command imports (4.40, which the `hf`
    extra allows, has no modeling_gguf_pytorch_utils): one line names the module and says to
    upgrade, not to install a package that is there."""
    monkeypatch.setitem(sys.modules, "transformers.utils", None)  # its import now fails
    assert main(["train", "lm", "--out", str(tmp_path / "run"), *TRAIN, "--init", str(gpt2),
                 "--data", str(text)]) == 2
    err = capsys.readouterr().err  # after the run's own lines: it had started, and is removed
    assert err.splitlines()[-1] == ("attnlab: error: this needs transformers.utils, which the "
                                    "installed transformers lacks: pip install --upgrade "
                                    "'attnlab[hf]'")
    assert not (tmp_path / "run").exists()
