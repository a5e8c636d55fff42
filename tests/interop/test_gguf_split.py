"""One part of a ``.gguf`` model split over several files (llama.cpp's ``gguf-split``, as the
largest models are shared: ``split.no``, ``split.count`` in each part's metadata, and some of
the tensors) is refused in one line naming the file, the part and how to merge them, before a
run directory is written, not read as a model lacking the other parts' tensors.

The parts are written by ``gguf.GGUFWriter`` itself (``split_max_tensors``) from a tiny random
Llama with ``test_gguf``'s byte-level BPE."""
import pytest
import torch

from .conftest import transformers
from .gguf_files import write_llama_gguf
from .test_generate_chat import _tokenizer
from .test_gguf import _refused
from .test_gguf_damaged import _argvs

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    tok = _tokenizer()
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    writer = gguf.GGUFWriter

    def split_in_two(path, arch):  # the writer names the parts model-0000N-of-00002.gguf
        return writer(path, arch, split_max_tensors=len(hf.state_dict()) // 2 + 1)

    gguf.GGUFWriter = split_in_two
    try:
        write_llama_gguf(tmp / "model.gguf", hf, tok, arch="llama")
    finally:
        gguf.GGUFWriter = writer
    return sorted(tmp.glob("model-*-of-*.gguf"))


@pytest.mark.parametrize("command", ["train", "generate"])
@pytest.mark.parametrize("which", [0, 1], ids=["first", "second"])
def test_a_part_of_a_split_model_is_one_line_naming_it_and_nothing_is_written(
        parts, which, command, tmp_path, capsys):
    assert [p.name for p in parts] == ["model-00001-of-00002.gguf", "model-00002-of-00002.gguf"]
    path = parts[which]
    _refused(capsys, _argvs(path, tmp_path)[command], str(path),
             f"is part {which + 1} of a model split over 2 files",
             f"--merge {parts[0]} OUT.gguf",
             out=tmp_path / "run")
