"""Which parameters --weight-decay decays and which optimiser trains each, as a practitioner
checks them: a pretrained BERT's decayed set is exactly the one transformers' ``Trainer``
decays (its position and token-type tables included, as docs/schedules.md says), a GPT's
position table is not; and with --freeze, LoRA or Muon no frozen parameter is in a group
and none is in two."""
import pytest
import torch

from attnlab.models import CausalLM
from attnlab.models.bert import BertEncoder
from attnlab.models.configs import CausalLMConfig
from attnlab.nn.lora import add_lora
from attnlab.training.module import decay_groups, make_optimizer, optimizer_groups


def _names(model, params) -> set[str]:
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)] for p in params}


def test_a_berts_decayed_parameters_are_the_ones_transformers_trainer_decays():
    transformers = pytest.importorskip("transformers")
    bert = BertEncoder(50, model_dim=16, num_heads=2, num_layers=2, dim_feedforward=32)
    decayed, kept = decay_groups(bert, 0.01)
    trainer = set(transformers.Trainer.get_decay_parameter_names(None, bert))
    assert _names(bert, decayed["params"]) == trainer
    assert {"position_embeddings.weight", "token_type_embeddings.weight"} <= trainer
    assert _names(bert, kept["params"]) == {n for n, _ in bert.named_parameters()} - trainer


def test_a_gpts_learned_position_table_is_not_decayed_and_its_tied_head_once():
    model = CausalLM(CausalLMConfig(vocab_size=40, model_dim=16, num_heads=2, num_layers=1))
    decayed, kept = decay_groups(model, 0.1)
    assert "token_embedding.weight" in _names(model, decayed["params"])  # the head's too
    assert "positional_encoding.embedding.weight" in _names(model, kept["params"])


def _lora(model):
    for p in model.parameters():
        p.requires_grad_(False)
    add_lora(model, 2, 4.0)


def _freeze_first_block(model):
    for p in model.decoder.layers[0].parameters():
        p.requires_grad_(False)


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("change", [None, _freeze_first_block, _lora], ids=["all", "freeze", "lora"])
def test_every_trainable_parameter_is_in_exactly_one_group_and_no_frozen_one(optimizer, change):
    torch.manual_seed(0)
    model = CausalLM(CausalLMConfig(vocab_size=40, model_dim=16, num_heads=2, num_layers=2,
                                    norm="rms", qk_norm=True, tie_weights=False))
    if change is not None:
        change(model)
    if optimizer == "muon" and change is _lora:  # nothing for Muon: refused before a run
        return
    settings = {"lr": 1e-3, "warmup": 0, "weight_decay": 0.1, "optimizer": optimizer}
    opt, _ = make_optimizer(optimizer_groups(model, settings), settings, model_dim=16,
                            max_steps=2)
    listed = [id(p) for group in opt.param_groups for p in group["params"]]
    assert len(listed) == len(set(listed))
    assert set(listed) == {id(p) for p in model.parameters() if p.requires_grad}
    names = {id(p): n for n, p in model.named_parameters()}
    for group in opt.param_groups:  # vectors (norms, qk-norms, biases) never decayed
        if any(p.ndim < 2 for p in group["params"]):
            assert group["weight_decay"] == 0.0, [names[id(p)] for p in group["params"]]
    muon = [names[id(p)] for g in opt.param_groups if g.get("muon") for p in g["params"]]
    assert all(".self_attn." in n or ".linear_net." in n for n in muon)
    assert "lm_head.weight" not in muon and "token_embedding.weight" not in muon
