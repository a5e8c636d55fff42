"""``train --init`` with ``--precision bf16-true`` rounds the checkpoint's weights to bfloat16:
from a float16 (or float32) checkpoint that changes them, which the run did without a word. A
note now says it once the precision is settled, naming the checkpoint and its dtype (config.json's
``dtype``, a GGUF file's matrices'); nothing is said where nothing is rounded (a bfloat16
checkpoint, another precision).
"""
import pytest
import torch

from attnlab.cli import main

from .gguf_files import Q, write_llama_gguf
from .test_checkpoint import CORPUS
from .test_gguf import files  # noqa: F401 (a fixture)
from .test_gguf_llama import _tiny
from .test_llama_family import save_family

pytestmark = pytest.mark.slow  # trains a run, writes tiny models


def test_a_float16_init_trained_in_bf16_true_says_it_is_rounded(tmp_path, capsys):
    d = save_family(tmp_path / "init", "llama", dtype=torch.float16)
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                 "--out", str(tmp_path / "run"), "--max-steps", "1", "--batch-size", "4",
                 "--block-size", "8", "--precision", "bf16-true", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    said = f"note: --precision bf16-true rounds --init {d}'s float16 weights to bfloat16"
    assert err.count(said) == 1, err


def test_nothing_is_said_where_nothing_is_rounded(tmp_path):
    from attnlab.interop.source import rounded_init_note

    half = save_family(tmp_path / "half", "llama", dtype=torch.float16)
    brain = save_family(tmp_path / "brain", "llama", dtype=torch.bfloat16)
    assert rounded_init_note(str(brain), "bf16-true") is None
    assert rounded_init_note(str(half), "bf16-mixed") is None
    assert rounded_init_note(None, "bf16-true") is None


def test_a_gguf_files_dtype_is_its_matrices(files, tmp_path):
    from attnlab.interop.source import rounded_init_note

    hf = _tiny("LlamaForCausalLM", files["tok"])
    for kind, said in ((Q.F16, "float16"), (Q.BF16, None), (Q.Q8_0, "dequantised (float32)")):
        path, _ = write_llama_gguf(tmp_path / f"{kind.name}.gguf", hf, files["tok"],
                                   arch="llama", types={"*": kind})
        note = rounded_init_note(str(path), "bf16-true")
        assert (note is None) if said is None else f"'s {said} weights" in note, note


def test_a_gguf_file_under_home_is_read_from_the_expanded_path(files, tmp_path, monkeypatch):
    from attnlab.interop.gguf import gguf_dtype
    from attnlab.interop.source import rounded_init_note

    hf = _tiny("LlamaForCausalLM", files["tok"])
    path, _ = write_llama_gguf(tmp_path / "half.gguf", hf, files["tok"], arch="llama",
                               types={"*": Q.F16})
    monkeypatch.setenv("HOME", str(tmp_path))
    assert gguf_dtype("~/half.gguf") == "float16"
    note = rounded_init_note("~/half.gguf", "bf16-true")
    assert note.startswith("note: --precision bf16-true rounds --init ~/half.gguf's float16 "
                           "weights to bfloat16"), note
