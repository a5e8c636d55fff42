"""A Hugging Face directory holding model.safetensors and a pytorch_model.bin: transformers
reads the safetensors alone, so where the two hold different weights ``--init`` refuses the
directory in one line naming both files and the tensor, before a run directory exists; the
same weights twice (a hub download's two formats) are read as before. Tiny random models
(``test_checkpoint``'s builders); nothing downloaded."""
import pytest
import torch
from safetensors.torch import load_file

from .conftest import transformers  # noqa: F401  (skips without the hf extra)

from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from tests.interop.test_checkpoint import save_bert, save_gpt2  # noqa: E402
from tests.interop.test_init_classify import _write_data  # noqa: E402


def _with_twin(d, change=None):
    """``d``'s model.safetensors saved again as pytorch_model.bin, ``change``d first."""
    tensors = load_file(d / "model.safetensors")
    if change:
        tensors[change] = tensors[change] + 0.01
    torch.save(tensors, d / "pytorch_model.bin")
    return d


def test_the_same_weights_twice_are_read(tmp_path):
    d = _with_twin(save_bert(tmp_path / "bert"))
    assert read_checkpoint(d, task="classify").weights.name == "model.safetensors"


def test_different_weights_twice_are_refused_naming_both_files_and_the_tensor(tmp_path):
    from attnlab.errors import UsageError

    d = _with_twin(save_bert(tmp_path / "bert"), "encoder.layer.1.output.dense.weight")
    with pytest.raises(UsageError) as e:
        read_checkpoint(d, task="classify")
    assert str(e.value) == (
        f"{d} holds model.safetensors and pytorch_model.bin of different weights "
        f"(encoder.layer.1.output.dense.weight differs); transformers reads "
        f"model.safetensors, and so does attnlab: move the file that is not the model you "
        f"mean out of the directory")


@pytest.mark.slow  # runs the command twice
@pytest.mark.parametrize("task, save, tensor", [
    ("classify", save_bert, "embeddings.word_embeddings.weight"),
    ("lm", save_gpt2, "transformer.h.0.mlp.c_fc.weight"),
])
def test_train_init_refuses_them_before_the_run_directory(tmp_path, capsys, task, save, tensor):
    d = _with_twin(save(tmp_path / "model"), tensor)
    data = (_write_data(tmp_path / "data.csv") if task == "classify" else
            tmp_path / "data.txt")
    data.write_text("the cat sat on the mat.\n" * 50) if task == "lm" else None
    out = tmp_path / "run"
    argv = ["train", task, "--init", str(d), "--data", str(data), "--out", str(out),
            "--max-steps", "1", "--threads", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"({tensor} differs)" in err[0], err
    assert "model.safetensors and pytorch_model.bin of different weights" in err[0]
    assert not out.exists()


def _without_prefix(d, prefix, change=None):
    """``d``'s model.safetensors saved again as pytorch_model.bin with ``prefix`` taken off
    its names (a GPT2Model's file beside a GPT2LMHeadModel's), ``change``d first."""
    tensors = load_file(d / "model.safetensors")
    if change:
        tensors[change] = tensors[change] + 0.01
    torch.save({n.removeprefix(prefix): t for n, t in tensors.items()}, d / "pytorch_model.bin")
    return d


def test_the_same_weights_under_the_base_models_names_are_read(tmp_path):
    d = _without_prefix(save_gpt2(tmp_path / "gpt2"), "transformer.")
    assert read_checkpoint(d, task="lm").weights.name == "model.safetensors"


def test_other_weights_under_the_base_models_names_are_refused(tmp_path):
    from attnlab.errors import UsageError

    d = _without_prefix(save_gpt2(tmp_path / "gpt2"), "transformer.",
                        "transformer.h.0.mlp.c_fc.weight")
    with pytest.raises(UsageError, match=r"different weights \(transformer.h.0.mlp.c_fc.weight "
                                         r"differs\)"):
        read_checkpoint(d, task="lm")


def test_a_twin_with_no_tensor_in_common_is_not_refused(tmp_path):
    d = save_gpt2(tmp_path / "gpt2")
    torch.save({"unrelated.weight": torch.zeros(2)}, d / "pytorch_model.bin")
    assert read_checkpoint(d, task="lm").weights.name == "model.safetensors"
