"""Every model takes its typed config (``CausalLM(config)``, as litgpt's ``GPT(config)``); the
keyword form builds that config once and follows the same path; a config checks its fields
against their declarations when it is built, and the model refuses through that check."""
import inspect

import pytest
import torch

from attnlab.models import (BertClassifier, CausalLM, ElementPredictor, JetTagger,
                            Seq2SeqTransformer, SequenceClassifier)
from attnlab.models.bert import BertEncoder
from attnlab.models.configs import (BertClassifierConfig, BertEncoderConfig, CausalLMConfig,
                                    ElementPredictorConfig, GraphNetConfig, JetTaggerConfig,
                                    ModelConfig, Seq2SeqConfig, SequenceClassifierConfig)
from attnlab.models.graph_net import GraphNet

# (model, its config class, positional arguments of the keyword form, keyword arguments)
CASES = [
    (CausalLM, CausalLMConfig, (30,), dict(model_dim=16, num_heads=2, num_layers=2, max_len=12,
                                           positional="rope", attention_dropout=0.1)),
    (CausalLM, CausalLMConfig, (30,), dict(model_dim=16, num_heads=2, num_layers=1,
                                           max_len=12, norm_first=False, bias=False,
                                           tie_weights=False, positional="alibi")),
    (SequenceClassifier, SequenceClassifierConfig, (3,), dict(vocab_size=40, model_dim=16,
                                                              num_heads=2, pooling="mean")),
    (SequenceClassifier, SequenceClassifierConfig, (), dict(input_dim=5, model_dim=16,
                                                            num_heads=2, head="element")),
    (Seq2SeqTransformer, Seq2SeqConfig, (20, 25), dict(model_dim=16, num_heads=2,
                                                       num_decoder_layers=1)),
    (ElementPredictor, ElementPredictorConfig, (10, 16, 10, 2, 1, 0.1, 0.2), {}),
    (BertEncoder, BertEncoderConfig, (50,), dict(model_dim=16, num_heads=2, num_layers=1,
                                                 dim_feedforward=32, pooler=True)),
    (BertClassifier, BertClassifierConfig, (3,), dict(vocab_size=50, model_dim=16, num_heads=2,
                                                      num_layers=1, dim_feedforward=32)),
    (JetTagger, JetTaggerConfig, (), dict(model_dim=16, num_heads=2, class_token=True)),
    (GraphNet, GraphNetConfig, (5, 3), dict(model_dim=4, num_heads=2)),
]
IDS = [f"{model.__name__}-{i}" for i, (model, *_) in enumerate(CASES)]


def _positional_names(model) -> tuple[str, ...]:
    """The fields the keyword form takes by position (what the old signatures took)."""
    return {CausalLM: ("vocab_size",), SequenceClassifier: ("num_classes",),
            Seq2SeqTransformer: ("src_vocab_size", "tgt_vocab_size"),
            ElementPredictor: ("input_dim", "model_dim", "num_classes", "num_heads",
                               "num_layers", "dropout", "input_dropout"),
            BertEncoder: ("vocab_size",), BertClassifier: ("num_classes",),
            JetTagger: ("num_classes",), GraphNet: ("in_dim", "num_classes")}[model]


def _config(config_class, model, args, kwargs):
    return config_class(**dict(zip(_positional_names(model), args)), **kwargs)


@pytest.mark.parametrize("model, config_class, args, kwargs", CASES, ids=IDS)
def test_the_config_form_and_the_keyword_form_build_the_same_model(model, config_class, args,
                                                                   kwargs):
    config = _config(config_class, model, args, kwargs)
    torch.manual_seed(0)
    from_config = model(config)
    torch.manual_seed(0)
    from_keywords = model(*args, **kwargs)
    assert from_config.config is config  # the object handed in, not a copy rebuilt from it
    assert from_keywords.config == config and type(from_keywords.config) is config_class
    a, b = from_config.state_dict(), from_keywords.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    torch.manual_seed(0)
    alias = model.from_config(config).state_dict()  # the older spelling of model(config)
    assert all(torch.equal(a[k], alias[k]) for k in a)


@pytest.mark.parametrize("model, config_class, args, kwargs", CASES, ids=IDS)
def test_a_model_is_built_without_a_round_trip_through_plain_keys(model, config_class, args,
                                                                  kwargs, monkeypatch):
    """Neither form turns the config into keys and back (``as_dict`` -> keyword arguments ->
    ``from_dict(locals())``), and the keyword form builds its config exactly once."""
    config = _config(config_class, model, args, kwargs)

    def refused(*_, **__):
        raise AssertionError("a model was built through as_dict/from_dict")

    built = []
    checked = ModelConfig.__post_init__
    monkeypatch.setattr(ModelConfig, "as_dict", refused)
    monkeypatch.setattr(ModelConfig, "from_dict", classmethod(refused))
    monkeypatch.setattr(ModelConfig, "__post_init__",
                        lambda self: (built.append(type(self)), checked(self))[1])
    model(config)
    assert config_class not in built  # (BertClassifier builds its encoder's BertEncoderConfig)
    model(*args, **kwargs)
    assert built.count(config_class) == 1


@pytest.mark.parametrize("model", sorted({c[0] for c in CASES}, key=lambda m: m.__name__))
def test_no_constructor_rebuilds_its_config_from_its_locals(model):
    assert "locals()" not in inspect.getsource(model.__init__)


@pytest.mark.parametrize("model, config_class, args, kwargs", CASES, ids=IDS)
@pytest.mark.parametrize("field, bad, message", [
    ("model_dim", 0, "model_dim must be a positive integer, got 0"),
    ("num_layers", True, "num_layers must be a positive integer, got True"),
    ("dropout", 1.0, "dropout must be in [0, 1), got 1.0"),
])
def test_a_bad_value_is_refused_by_the_config_naming_the_field(model, config_class, args,
                                                               kwargs, field, bad, message):
    """The config refuses it when built (so a config that exists is in range), through the
    field's ``setting`` declaration; the keyword form gives the same one-line message."""
    values = {**dict(zip(_positional_names(model), args)), **kwargs, field: bad}
    with pytest.raises(ValueError) as from_config:
        config_class(**values)
    assert str(from_config.value) == message
    with pytest.raises(ValueError) as from_keywords:
        model(**values)
    assert str(from_keywords.value) == message


@pytest.mark.parametrize("model, config_class, args, kwargs", CASES[:1], ids=IDS[:1])
def test_the_keyword_form_refuses_what_is_not_a_field(model, config_class, args, kwargs):
    with pytest.raises(TypeError, match=r"CausalLM\(\) got an unexpected keyword argument "
                                        r"'block_size'"):
        model(*args, block_size=16, **kwargs)
    with pytest.raises(TypeError, match="multiple values for argument 'vocab_size'"):
        model(*args, vocab_size=30, **kwargs)
    with pytest.raises(TypeError, match="a CausalLMConfig alone"):
        model(_config(config_class, model, args, kwargs), model_dim=32)
    with pytest.raises(TypeError, match="a CausalLMConfig alone"):
        model(SequenceClassifierConfig(num_classes=2, vocab_size=5))


def test_a_model_refuses_a_config_missing_what_it_needs():
    """A config's data-derived fields may be unset (a task fills them from its data); the
    model cannot be built without them."""
    with pytest.raises(ValueError, match="^vocab_size must be set to build a CausalLM, got None$"):
        CausalLM(CausalLMConfig(model_dim=16))
    with pytest.raises(ValueError, match="^tgt_vocab_size must be set"):
        Seq2SeqTransformer(Seq2SeqConfig(src_vocab_size=5))
