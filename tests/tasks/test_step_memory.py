"""A run too big for the machine's memory is refused before it starts, counting one training
step's activations (``attnlab.tasks.memory``), not only the weights: ``train reverse
--num-layers 100000`` or ``train lm --batch-size 1000000000`` started training on a laptop and
were killed by the operating system (exit 137, nothing saved). The memory available is stated
in every test (a laptop's 8 GiB), never this machine's."""
import subprocess
import sys

import pytest

from attnlab.cli import main
from attnlab.commands import preflight
from attnlab.errors import UsageError
from attnlab.tasks import SHARED_DEFAULTS, get_task
from attnlab.tasks.memory import step_activations

LAPTOP = 8 * 2**30


def refusal(task: str, cfg: dict) -> str:
    """The one line ``check_memory`` refuses the settings ``cfg`` of ``task`` with on a
    laptop, or fail if it lets them run."""
    with pytest.raises(UsageError) as e:
        preflight.check_memory(get_task(task).memory_estimate(cfg), available=LAPTOP)
    return str(e.value)


def settings(task: str, **given) -> dict:
    """``task``'s default settings, on the CPU, with ``given`` (the dict the check reads)."""
    return {**SHARED_DEFAULTS, **get_task(task).defaults, "accelerator": "cpu", **given}


@pytest.mark.parametrize("task, given, named", [
    ("reverse", {"num_layers": 100_000}, "--num-layers 100,000"),
    ("lm", {"batch_size": 10**9, "data": "corpus.txt"}, "--batch-size 1,000,000,000"),
    ("lm", {"block_size": 2**20, "model_dim": 1024, "num_heads": 16, "data": "corpus.txt",
            "batch_size": 8}, "--block-size 1,048,576"),  # a wide model with a long context
    # lm's default --attention-dropout 0.1 keeps every block's B x H x T x T weights on a CPU
    # (its settings check makes None --dropout's)
    ("lm", {"block_size": 8192, "data": "corpus.txt", "attention_dropout": 0.1},
     "--block-size 8,192 squared"),
    ("translate", {"batch_size": 10**9}, "--batch-size 1,000,000,000"),
    ("anomaly", {"batch_size": 10**8}, "--batch-size 100,000,000"),
])
def test_a_step_too_big_for_a_laptop_is_refused_naming_the_flag(task, given, named):
    line = refusal(task, settings(task, **given))
    # the largest part comes first, naming the flag to make smaller, and the memory there is
    first = line.split(" + ")[0]
    assert named in first and ("activations of one training step" in first
                               or "attention weights --attention-dropout keeps" in first), line
    assert "8.6 GB available" in line and "lower bound" in line, line


def test_the_activations_follow_precision_and_checkpointing():
    cfg = settings("reverse", batch_size=64, seq_len=512, num_layers=8)
    full = sum(size for _, size in step_activations(cfg, batch=64, length=512,
                                                    length_flag="--seq-len"))
    half = sum(size for _, size in step_activations({**cfg, "precision": "bf16-mixed"},
                                                    batch=64, length=512, length_flag="--seq-len"))
    kept = sum(size for _, size in step_activations({**cfg, "checkpoint_activations": True},
                                                    batch=64, length=512, length_flag="--seq-len"))
    assert half == full / 2
    # 8 blocks' inputs (D each) and one block's 9·D + d_ff values, against 8 blocks' 9·D + d_ff
    D, ff = cfg["model_dim"], cfg["dim_feedforward"]
    assert kept / full == pytest.approx((8 * D + 9 * D + ff) / (8 * (9 * D + ff)))


def test_activations_on_a_gpu_are_not_counted_against_this_machines_memory():
    """--accelerator gpu keeps them in the GPU's memory: a laptop's RAM must not refuse it."""
    cfg = settings("lm", batch_size=10**9, data="corpus.txt", accelerator="gpu")
    preflight.check_memory(get_task("lm").memory_estimate(cfg), available=LAPTOP)


def test_frozen_blocks_keep_no_activations():
    cfg = settings("reverse", num_layers=12, batch_size=64)
    whole = step_activations(cfg, batch=64, length=16, length_flag="--seq-len")[0][1]
    last2 = step_activations({**cfg, "freeze": "all-but-last-2"}, batch=64, length=16,
                             length_flag="--seq-len")[0][1]
    lora = step_activations({**cfg, "freeze": "all-but-last-2", "lora_rank": 4}, batch=64,
                            length=16, length_flag="--seq-len")[0][1]
    assert last2 == whole * 2 / 12 and lora == whole


def test_a_batch_bigger_than_the_training_set_is_counted_as_the_set():
    """reverse's batches hold at most --train-size sequences: --batch-size 10**9 over 1,000
    sequences trains on batches of 1,000 and must not be refused for 10**9."""
    cfg = settings("reverse", batch_size=10**9, train_size=1000)
    preflight.check_memory(get_task("reverse").memory_estimate(cfg), available=LAPTOP)


def test_small_parts_are_left_out_of_the_line():
    with pytest.raises(UsageError, match=r"^these settings need about 3\.0 GB \(2\.0 GB for b "
                                         r"\+ 1\.0 GB for a \+ 1 smaller part\); this machine "
                                         r"has 2\.0 GB available \(the count is a lower bound"):
        preflight.check_memory([("a", 1e9), ("c", 1e6), ("b", 2e9)], available=2 * 10**9)


@pytest.mark.slow
def test_the_refusal_comes_before_the_run_directory(tmp_path, capsys, monkeypatch):
    """A stated 100 MB available: the step's activations (~370 MB) are refused, exit 2, one
    line, and --out is not made."""
    monkeypatch.setattr(preflight, "available_memory", lambda: 100 * 10**6)
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--accelerator", "cpu", "--max-steps",
                 "1", "--batch-size", "4096", "--seq-len", "64", "--train-size", "4096",
                 "--val-size", "16", "--test-size", "16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnlab: error: these settings need"), err
    assert "--batch-size 4,096 x --seq-len 64" in err and "0.1 GB available" in err
    assert not out.exists()


@pytest.mark.slow
def test_the_estimate_is_below_what_a_run_really_holds(tmp_path):
    """Never refuse a run that fits: the estimate of a run whose activations are most of its
    memory stays below what the run itself adds to the process's resident memory: its peak
    (max RSS) less what the interpreter, torch, Lightning and the task's runtime held before
    it started (~0.4 GB, which the estimate does not count either)."""
    args = ["reverse", "--accelerator", "cpu", "--max-steps", "2", "--batch-size", "64",
            "--seq-len", "512", "--model-dim", "64", "--num-layers", "2", "--train-size", "256",
            "--val-size", "32", "--test-size", "32"]
    cfg = settings("reverse", batch_size=64, seq_len=512, model_dim=64, num_layers=2,
                   train_size=256, val_size=32, test_size=32)
    parts = get_task("reverse").memory_estimate(cfg)
    estimate = sum(size for _, size in parts)
    assert max(parts, key=lambda p: p[1])[0].startswith("the activations of one training step")
    code = ("import sys, torch, lightning.fabric; from attnlab.cli import main; "
            "from attnlab.tasks import get_task; get_task('reverse').runtime(); "
            "held = lambda: int(next(line for line in open('/proc/self/status') "
            "if line.startswith('VmHWM')).split()[1]); "
            "before = held(); main(sys.argv[1:]); print(before, held())")
    # VmHWM, the peak of this process's own memory: ru_maxrss survives execve, so a child of a
    # pytest worker would report the worker's own earlier peak (1.07 GB, "before" = "peak")
    run = subprocess.run([sys.executable, "-c", code, "train", *args, "--out",
                          str(tmp_path / "run")], capture_output=True, text=True, check=True)
    before, peak = (int(kb) * 1024 for kb in run.stdout.split()[-2:])  # kilobytes
    assert estimate < peak - before, (estimate, before, peak)


def test_attention_weights_are_counted_only_where_dropout_keeps_them():
    """The fused attention keeps no B x H x T x T weights (a block's memory per token did not
    grow from 128 to 512 tokens); attention dropout on a CPU takes the reference path, which
    keeps them (a 4-block lm of 32 x 512 tokens: 0.9 GB without it, 2.6 GB with it)."""
    cfg = settings("lm", batch_size=32, block_size=512, data="corpus.txt", attention_dropout=0.1)
    kept = [what for what, _ in get_task("lm").memory_estimate(cfg)]
    assert any("--attention-dropout" in what for what in kept)
    cfg["attention_dropout"] = 0.0
    assert not any("attention weights" in what for what, _ in get_task("lm").memory_estimate(cfg))


def test_a_refusal_for_memory_comes_before_any_note_on_the_data(tmp_path, capsys, monkeypatch):
    """classify --max-len 1000000000 over a file whose rows repeat: the one line of the
    refusal, not a warning on the data's repeated rows first (the data was read, and said,
    before the memory was checked)."""
    monkeypatch.setattr(preflight, "available_memory", lambda: LAPTOP)
    data = tmp_path / "reviews.csv"
    rows = [f"review number {i} {'good' if i % 2 else 'bad'},{'pos' if i % 2 else 'neg'}"
            for i in range(60)]
    data.write_text("text,label\n" + "\n".join(rows + rows) + "\n")  # every input twice
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(data), "--max-len", "1000000000",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-len 1,000,000,000" in err, err
    assert not out.exists()


def test_instruction_rows_are_counted_at_a_row_not_at_block_size():
    """lm's instruction rows are padded to the longest row of their batch, not to
    --block-size: --block-size 32768 x --batch-size 512 over short rows holds well under a
    gigabyte and must not be refused for the ~41 GB of 512 full windows."""
    cfg = settings("lm", data="chat.jsonl", init="qwen2", block_size=32768, batch_size=512,
                   model_dim=32, num_layers=2, num_heads=4, dim_feedforward=64, vocab_size=160)
    parts = get_task("lm").memory_estimate(cfg)
    preflight.check_memory(parts, available=10**9)
    assert any("--batch-size 512 x tokens a row, at least 1 x" in what for what, _ in parts)


@pytest.mark.slow
def test_an_instruction_run_that_fits_is_not_refused(tmp_path, capsys, monkeypatch):
    """The command as a user gives it: a tiny Qwen2 that reads 65,536 positions, 200 short
    rows, --block-size 32768 --batch-size 512; 2 GB stated available (the run peaks under 1 GB)."""
    pytest.importorskip("transformers")
    from ..interop.test_instruct_lm import _rows, _tokenizer, _write
    from ..interop.test_llama_family import _tiny

    model, tok = tmp_path / "qwen2", _tokenizer("chatml")
    _tiny("qwen2", vocab_size=len(tok), max_position_embeddings=65536).save_pretrained(model)
    tok.save_pretrained(model)
    data = _write(tmp_path / "chat.jsonl", _rows(200))
    monkeypatch.setattr(preflight, "available_memory", lambda: 2 * 10**9)
    out = tmp_path / "run"
    rc = main(["train", "lm", "--init", str(model), "--data", str(data), "--block-size", "32768",
               "--batch-size", "512", "--max-steps", "2", "--accelerator", "cpu", "--threads",
               "1", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err.splitlines()[-1:]  # was refused for ~34 GB
    assert (out / "model.safetensors").is_file()


def test_a_prepared_corpus_is_counted_with_its_own_vocabulary(tmp_path):
    """--vocab-size is unused with a prepared corpus: the estimate reads the corpus's meta.json
    (a vocabulary of 50 million rows x --model-dim 64 is ~51 GB of weights alone), where it
    counted the default --vocab-size and let the run start."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "meta.json").write_text('{"vocab_size": 50000000, "dtype": "uint32"}')
    line = refusal("lm", settings("lm", data=str(corpus), model_dim=64, num_heads=4))
    assert "(~3,200," in line, line  # the weights of 50,000,000 x 64 table rows
    assert f"the vocabulary of --data {corpus} 50,000,000" in line, line


def weights_part(cfg: dict) -> tuple[float, int]:
    """(bytes, parameters) of lm's weights part for ``cfg``."""
    [(what, size)] = [p for p in get_task("lm").memory_estimate(cfg)
                      if p[0].startswith("the model's weights")]
    return size, int(what.split("~")[1].split(" ")[0].replace(",", ""))


@pytest.mark.parametrize("given, per_parameter", [
    ({}, 16),                          # float32 weight, gradient and AdamW's two moments
    ({"precision": "bf16-mixed"}, 16),  # float32 weights under the mixed precisions
    ({"precision": "bf16-true"}, 8),   # the model and its optimiser's state in bfloat16
    ({"lora_rank": 8}, 4),             # every weight frozen: held once
])
def test_the_weights_are_counted_as_the_run_holds_them(given, per_parameter):
    """The refusal says it counts only what is sure to be allocated: frozen weights hold no
    gradient or optimiser state, and bf16-true holds 2 bytes a value (all were counted at
    16 bytes a parameter, refusing a --lora-rank fine-tune four times too early)."""
    size, params = weights_part(settings("lm", data="corpus.txt", **given))
    assert size == per_parameter * params


def test_frozen_blocks_weights_hold_no_gradients():
    cfg = settings("lm", data="corpus.txt", num_layers=4)
    whole, params = weights_part(cfg)
    last1, _ = weights_part({**cfg, "freeze": "all-but-last-1"})
    assert 4 * params < last1 < whole


def test_weights_on_a_gpu_are_not_counted_against_this_machines_memory():
    """--accelerator gpu: a model of 819 million parameters lives in the GPU's memory, not
    this machine's 8 GiB."""
    cfg = settings("reverse", num_layers=100_000, accelerator="gpu")
    preflight.check_memory(get_task("reverse").memory_estimate(cfg), available=LAPTOP)


def test_translate_names_the_flags_of_both_stacks():
    """Its part read "x layers 4", naming no flag to lower."""
    line = refusal("translate", settings("translate", batch_size=10**9, num_encoder_layers=3))
    assert "x 5 blocks (encoder --num-encoder-layers 3 + decoder --num-layers 2) x" in line, line

