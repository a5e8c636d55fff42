"""``--beta1``: AdamW's first-moment decay reaches torch's AdamW in every group (plain AdamW,
Noam's, and the AdamW half of ``--optimizer muon``), and a value outside [0, 1) is refused in
one line naming the flag, before a run directory exists. Resuming with it:
``test_loop_schedule_memory_time.py``; the recipe's 0.8: ``tests/tasks/test_lm_recipe.py``."""
import pytest
import torch
import yaml

from attnlab.cli import main
from attnlab.commands.train import build_config
from attnlab.models import CausalLM
from attnlab.models.configs import CausalLMConfig
from attnlab.training.module import make_optimizer, optimizer_groups


def _lm() -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(CausalLMConfig(vocab_size=11, model_dim=16, num_heads=2, num_layers=2,
                                   dim_feedforward=32))


@pytest.mark.parametrize("schedule, beta2", [("cosine", 0.999), ("noam", 0.98)])
def test_beta1_is_adamws_first_beta_in_every_group(schedule, beta2):
    cfg = build_config("reverse", {"beta1": 0.75, "schedule": schedule, "weight_decay": 0.1})
    model = _lm()
    opt, _ = make_optimizer(optimizer_groups(model, cfg), cfg, model_dim=16, max_steps=10)
    assert len(opt.param_groups) == 2  # decayed matrices, the rest
    assert {g["betas"] for g in opt.param_groups} == {(0.75, beta2)}  # Noam: the paper's beta2


def test_muons_adamw_groups_take_beta1_and_its_own_groups_keep_their_momentum():
    cfg = {"lr": 1e-2, "warmup": 2, "weight_decay": 0.1, "beta1": 0.8, "beta2": 0.99,
           "optimizer": "muon"}
    opt, _ = make_optimizer(optimizer_groups(_lm(), cfg), cfg, model_dim=16, max_steps=10)
    adamw = [g for g in opt.param_groups if not g["muon"]]
    muon = [g for g in opt.param_groups if g["muon"]]
    assert adamw and {g["betas"] for g in adamw} == {(0.8, 0.99)}
    assert muon and {g["momentum"] for g in muon} == {0.95}


@pytest.mark.parametrize("value, why", [("1.0", "in [0, 1), got 1.0"),
                                        ("1.5", "in [0, 1), got 1.5"),
                                        ("-0.1", "in [0, 1), got -0.1"),
                                        ("nan", "a number, got nan")])
def test_a_beta1_outside_0_to_1_is_refused_in_one_line_before_a_run_directory(value, why,
                                                                                tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["train", "reverse", "--out", str(out), "--beta1", value]) == 2
    assert capsys.readouterr().err.strip() == f"attnlab: error: --beta1 must be {why}"
    assert not out.exists()
    # the same rule from --config FILE, naming the file
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"beta1": float(value)}))
    assert main(["train", "reverse", "--out", str(out), "--config", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"c.yaml: beta1 must be {why}") and len(err.splitlines()) == 1
    assert not out.exists()
