"""A BERT-family checkpoint read by name (``attnlab.interop.bert_weights``), without
``transformers``' model code: the same encoder as ``from_hf`` of the model ``transformers``
loads from the same directory, and its refusals.

Tiny models built from configs with random weights and saved with ``save_pretrained`` (the
builders of ``test_checkpoint`` and ``test_init_classify``); nothing downloaded. Weights are
compared exactly (``torch.equal``: both are copies of the same stored tensors); hidden states
in fp32 with atol = rtol = 1e-5.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.testing import assert_close

from attnlab.errors import UsageError
from attnlab.interop import from_hf
from attnlab.interop.checkpoint import read_checkpoint

from .conftest import transformers
from .test_checkpoint import _copy_dir, _edit_config, save_bert, save_roberta
from .test_init_classify import save_distilbert, save_pooled_roberta

TOL = dict(atol=1e-5, rtol=1e-5)


def save_bert_classifier(d):
    """``save_bert``'s directory holding a BertForSequenceClassification (tensors under
    ``bert.``, and a head the encoder leaves out)."""
    save_bert(d)
    config = transformers.BertConfig.from_pretrained(d)
    transformers.BertForSequenceClassification(config).save_pretrained(d)
    return d


SAVERS = {"bert": save_bert, "bert-classifier": save_bert_classifier,
          "roberta-classifier": save_roberta, "roberta": save_pooled_roberta,
          "distilbert": save_distilbert}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert_weights")
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    return {name: save(root / name) for name, save in SAVERS.items()}


def _from_transformers(d):
    """``from_hf`` of the encoder ``transformers`` loads from ``d`` (without a pooler where
    the weights hold none), in eval mode."""
    pooled = any(k.endswith("pooler.dense.weight") for k in load_file(d / "model.safetensors"))
    options = {} if pooled or "distilbert" in d.name else {"add_pooling_layer": False}
    hf = transformers.AutoModel.from_pretrained(d, local_files_only=True, **options).eval()
    return hf, from_hf(hf).eval()


def _same_weights(ours, theirs):
    a, b = ours.state_dict(), theirs.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert ours.config == theirs.config


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SAVERS))
def test_the_encoder_read_by_name_is_the_one_transformers_loads(dirs, name):
    ckpt = read_checkpoint(dirs[name], task="classify")
    hf, converted = _from_transformers(dirs[name])
    _same_weights(ckpt.model, converted)
    assert not ckpt.model.training
    ids = torch.randint(5, ckpt.config.vocab_size, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        real = mask.bool()
        assert_close(ckpt.model(ids, attention_mask=mask)[real],
                     hf(input_ids=ids, attention_mask=mask).last_hidden_state[real], **TOL)


@pytest.mark.slow  # transformers' reading of a pytorch_model.bin imports torch._dynamo (5 s)
def test_gamma_beta_layer_norms_and_a_pytorch_bin_read_as_transformers_reads_them(dirs,
                                                                                  tmp_path):
    """Old TensorFlow ports name a LayerNorm's scale and shift gamma and beta."""
    d = _copy_dir(dirs["bert-classifier"], tmp_path / "gamma", drop=("model.safetensors",))
    state = load_file(dirs["bert-classifier"] / "model.safetensors")
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma")
               .replace("LayerNorm.bias", "LayerNorm.beta"): v for k, v in state.items()}
    assert sum("gamma" in k for k in renamed) == 5  # the embeddings' and 2 per block
    torch.save(renamed, d / "pytorch_model.bin")
    ckpt = read_checkpoint(d, task="classify")
    assert ckpt.weights.name == "pytorch_model.bin"
    _same_weights(ckpt.model, _from_transformers(dirs["bert-classifier"])[1])


def test_a_sharded_checkpoint_reads_as_its_one_file_does(dirs, tmp_path):
    """save_pretrained(max_shard_size=...) writes model.safetensors.index.json and its
    shards: the encoder and its pooler are read from all of them (they were refused as "not a
    readable PyTorch weights file")."""
    from attnlab.tasks.classify.pretrained import has_pooler

    d = _copy_dir(dirs["bert"], tmp_path / "sharded", drop=("model.safetensors",))
    hf = transformers.BertModel.from_pretrained(dirs["bert"], local_files_only=True)
    hf.save_pretrained(d, max_shard_size="20KB")
    assert len(list(d.glob("model-*-of-*.safetensors"))) > 1
    ckpt = read_checkpoint(d, task="classify")
    assert ckpt.weights.name == "model.safetensors.index.json"
    assert has_pooler(ckpt.weights) and ckpt.model.pooler is not None
    _same_weights(ckpt.model, read_checkpoint(dirs["bert"], task="classify").model)


def _flip_a_tensor_byte(path):
    """A byte in the middle of the largest tensor of the zip-format ``torch.save`` file
    ``path`` flipped: a file that still loads, one weight changed."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        info = max(z.infolist(), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    at = info.header_offset  # the local header: 30 bytes, then the name and the extra field
    start = at + 30 + int.from_bytes(data[at + 26:at + 28], "little") + int.from_bytes(
        data[at + 28:at + 30], "little")
    data[start + info.file_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return info.filename


def test_a_pytorch_bin_damaged_after_it_was_written_is_refused(dirs, tmp_path):
    """torch.load does not compare the zip's CRC-32s: the flipped byte would load as a wrong
    weight of the encoder (transformers reads it so too)."""
    d = _copy_dir(dirs["bert"], tmp_path / "flipped", drop=("model.safetensors",))
    torch.save(load_file(dirs["bert"] / "model.safetensors"), d / "pytorch_model.bin")
    damaged = _flip_a_tensor_byte(d / "pytorch_model.bin")
    assert torch.load(d / "pytorch_model.bin", weights_only=True)  # loads, as it was
    _refused(d, "pytorch_model.bin is not a readable PyTorch weights file",
             f"its storage record {damaged} fails its CRC-32",
             "the file was damaged after it was written")


@pytest.mark.parametrize("zipped", [True, False])
def test_the_readability_check_reads_a_zip_bins_bytes_once(dirs, tmp_path, monkeypatch,
                                                            zipped):
    """The CRC-32 pass reads every byte of a zip-format .bin; the readability load then maps
    it rather than read it a second time (a 500 MB file: 2.6 s more). A legacy pickle, which
    has no CRCs and cannot be mapped, is still read whole and its weights kept."""
    d = _copy_dir(dirs["bert"], tmp_path / "bin", drop=("model.safetensors",))
    torch.save(load_file(dirs["bert"] / "model.safetensors"), d / "pytorch_model.bin",
               _use_new_zipfile_serialization=zipped)
    loads, load = [], torch.load

    def spy(path, *args, **kwargs):
        loads.append((Path(path).name, kwargs.get("mmap")))
        return load(path, *args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    ckpt = read_checkpoint(d, task="classify")
    # the first load of the file is the readability check's
    assert loads[0][0] == "pytorch_model.bin" and bool(loads[0][1]) == zipped, loads
    _same_weights(ckpt.model, read_checkpoint(dirs["bert"], task="classify").model)


def _refused(d, *needles):
    with pytest.raises(UsageError) as info:
        read_checkpoint(d, task="classify")
    message = str(info.value)
    assert "\n" not in message and str(d) in message, message
    for needle in needles:
        assert needle in message, message


def test_weights_that_do_not_match_the_config_are_named(dirs, tmp_path):
    d = _copy_dir(dirs["bert"], tmp_path / "wider")
    _edit_config(d, intermediate_size=64)
    _refused(d, "does not match", "config.json",
             "encoder.layer.0.intermediate.dense.weight is (48, 32) there, (64, 32) by the "
             "config", "(and 5 more)")  # the FFN weight, bias and output: 3 a block
    d = _copy_dir(dirs["bert"], tmp_path / "deeper")
    _edit_config(d, num_hidden_layers=3)
    _refused(d, "lacks tensors", "encoder.layer.2.")
    d = _copy_dir(dirs["bert"], tmp_path / "cut", drop=("model.safetensors",))
    state = load_file(dirs["bert"] / "model.safetensors")
    save_file({k: v for k, v in state.items() if "embeddings.LayerNorm" not in k},
              d / "model.safetensors")
    _refused(d, "lacks tensors", "embeddings.LayerNorm.bias, embeddings.LayerNorm.weight")


@pytest.mark.parametrize("name, layers, needle", [
    ("bert", "num_hidden_layers", "encoder.layer.1."),
    ("roberta-classifier", "num_hidden_layers", "encoder.layer.1."),
    ("distilbert", "n_layers", "transformer.layer.1."),
])
def test_a_config_of_fewer_layers_than_the_weights_is_refused(dirs, tmp_path, name, layers,
                                                              needle):
    """Read as the first layer of two, the encoder would train in silence on a truncated
    model; transformers itself only warns of the unused tensors."""
    d = _copy_dir(dirs[name], tmp_path / "shallower")
    _edit_config(d, **{layers: 1})
    _refused(d, "holds tensors that", "config.json does not describe", needle,
             "is config.json the one saved with these weights?")


@pytest.mark.parametrize("change, needle", [
    ({"is_decoder": True}, "is_decoder=True (a causal decoder) is not supported"),
    ({"position_embedding_type": "relative_key"}, "position_embedding_type 'relative_key'"),
    ({"hidden_act": "mish"}, "activation 'mish' has no attnlab equivalent"),
    ({"embedding_size": 16}, "embedding_size (16) != hidden_size (32)"),
])
def test_a_model_the_encoder_cannot_be_is_refused(dirs, tmp_path, change, needle):
    d = _copy_dir(dirs["bert"], tmp_path / "other")
    _edit_config(d, **change)
    _refused(d, needle)


@pytest.mark.slow
def test_reading_a_bert_checkpoint_imports_none_of_transformers_model_code(dirs):
    """What a user waits for at the start of ``train classify --init``: the encoder comes
    without transformers' modelling modules (and the torch compiler they import)."""
    code = (
        "import sys\n"
        "from attnlab.interop.checkpoint import read_checkpoint\n"
        f"ckpt = read_checkpoint({str(dirs['bert'])!r}, task='classify')\n"
        "assert ckpt.model.pooler is not None\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('transformers.modeling_utils',"
        " 'transformers.models.bert.modeling', 'torch._dynamo')))\n"
        "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_config_json_of_the_directory_is_what_is_read(dirs, tmp_path):
    """The encoder's settings come from config.json (dropout included), not from defaults."""
    d = _copy_dir(dirs["bert"], tmp_path / "dropout")
    _edit_config(d, hidden_dropout_prob=0.25, attention_probs_dropout_prob=0.05)
    config = read_checkpoint(d, task="classify").config
    assert (config.dropout, config.attention_dropout) == (0.25, 0.05)
    assert json.loads((d / "config.json").read_text())["hidden_size"] == config.model_dim
