"""``make_optimizer``: AdamW fused where PyTorch has the kernel, the same updates as the
per-tensor AdamW, and checkpoints of either kind resume."""
import copy

import pytest
import torch

from attnlab.models import JetTagger, SequenceClassifier
from attnlab.models.configs import JetTaggerConfig, SequenceClassifierConfig
from attnlab.training.module import fused_adamw_ok, make_optimizer, optimizer_groups

CFG = {"lr": 1e-2, "warmup": 5, "weight_decay": 0.1}


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.GELU(), torch.nn.Linear(24, 3))


def _train(net: torch.nn.Module, opt, sched, steps: int, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 12, generator=g)
        loss = (net(x) - x[:, :3]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()


def test_cpu_parameters_get_the_fused_kernel_and_others_the_default():
    opt, _ = make_optimizer(_net().parameters(), CFG, model_dim=24, max_steps=100)
    assert opt.param_groups[0]["fused"] is True
    noam, _ = make_optimizer(_net().parameters(), {**CFG, "schedule": "noam"}, model_dim=24,
                             max_steps=100)
    assert noam.param_groups[0]["fused"] is True
    on_meta = [torch.nn.Parameter(torch.empty(3, device="meta"))]
    assert not fused_adamw_ok(on_meta)
    assert not fused_adamw_ok([torch.nn.Parameter(torch.zeros(3)), *on_meta])  # mixed devices
    assert make_optimizer(on_meta, CFG, model_dim=3, max_steps=10)[0].param_groups[0]["fused"] is None


@pytest.mark.slow
def test_fused_trains_the_weights_the_per_tensor_adamw_trains():
    """Copied weights, the same batches, 150 steps of warm-up, cosine decay, clipping and
    weight decay: the fused and the per-tensor updates agree to float32 rounding (1e-5)."""
    fused_net = _net()
    plain_net = copy.deepcopy(fused_net)
    opt, sched = make_optimizer(fused_net.parameters(), CFG, model_dim=24, max_steps=150)
    plain, plain_sched = make_optimizer(plain_net.parameters(), CFG, model_dim=24, max_steps=150)
    for group in plain.param_groups:
        group["fused"] = None  # the default per-tensor update
    _train(fused_net, opt, sched, 150)
    _train(plain_net, plain, plain_sched, 150)
    moved = max((a - b).abs().max() for a, b in zip(fused_net.parameters(), _net().parameters()))
    assert moved > 0.05  # the weights really trained
    for a, b in zip(fused_net.parameters(), plain_net.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_a_per_tensor_checkpoint_resumes_with_the_per_tensor_update():
    """A run checkpointed before AdamW was fused resumes: the saved state (its param group says
    not fused) loads into the new optimiser, and training goes on exactly as the old optimiser
    would have gone on."""
    net = _net()
    old, old_sched = make_optimizer(net.parameters(), CFG, model_dim=24, max_steps=60)
    for group in old.param_groups:
        group["fused"] = None
    _train(net, old, old_sched, 20)
    saved = copy.deepcopy((net.state_dict(), old.state_dict(), old_sched.state_dict()))
    _train(net, old, old_sched, 20, seed=2)  # the uninterrupted run

    resumed = _net()
    resumed.load_state_dict(saved[0])
    opt, sched = make_optimizer(resumed.parameters(), CFG, model_dim=24, max_steps=60)
    assert opt.param_groups[0]["fused"] is True
    opt.load_state_dict(saved[1])
    assert opt.param_groups[0]["fused"] is None  # the checkpoint's choice, kept on resume
    sched.load_state_dict(saved[2])
    _train(resumed, opt, sched, 20, seed=2)
    for a, b in zip(resumed.parameters(), net.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("precision", ["32", "bf16-mixed", "bf16-true", "64"])
def test_attnlabs_loop_takes_the_fused_kernel_under_every_precision(precision, tmp_path,
                                                                  monkeypatch):
    """Lightning's Trainer refused a fused optimiser under a mixed precision; attnlab's loop on
    Fabric clips and steps it under each (16-mixed runs as bf16-mixed on a CPU)."""
    from attnlab.tasks import get_task
    from attnlab.training import fit
    from attnlab.training.module import TaskModule

    from .loop_probe import probe_loop

    class Regression(TaskModule):
        def loss(self, batch):
            x, y = batch
            return torch.nn.functional.mse_loss(self.model(x), y), {}

    class Spy:
        def on_train_batch_end(self, loop):
            fused.append(loop.optimizer.param_groups[0]["fused"])
            losses.append(float(loop.shown.get("train_loss", "nan")))

    fused, losses = [], []
    torch.manual_seed(0)
    x = torch.randn(64, 12)
    loader = [(x[i:i + 16], x[i:i + 16, :3]) for i in range(0, 64, 16)]
    cfg = get_task("reverse").config(**{**CFG, "precision": precision, "checkpoint_every": 100})
    module = Regression(_net(), cfg, 12)
    probe_loop(monkeypatch, Spy())
    fit(module, loader, None, module.cfg, tmp_path, max_steps=12)
    assert fused and all(f is True for f in fused), fused
    assert all(p.dtype == torch.float32 for p in module.parameters())  # float32 after the run


@pytest.mark.slow  # imports Lightning (10 s of CPU where nothing imported it before)
def test_the_courses_lightning_module_is_not_fused_under_a_mixed_precision():
    """The course's TransformerPredictor is trained by Lightning's Trainer, which refuses
    gradient clipping with a fused optimiser under a mixed precision."""
    import lightning.pytorch as L

    from attnlab.training import TransformerPredictor

    def fused_under(precision: str):
        module = TransformerPredictor(10, 16, 10, 1, 1, lr=1e-3, warmup=2, max_iters=10)
        module.trainer = L.Trainer(precision=precision, logger=False, enable_checkpointing=False,
                                   enable_progress_bar=False, enable_model_summary=False)
        return module.configure_optimizers()["optimizer"].param_groups[0]["fused"]

    assert fused_under("32") is True
    assert fused_under("bf16-mixed") is None


def test_parameter_groups_are_accepted_and_fused():
    net = _net()
    groups = [{"params": list(net[0].parameters())},
              {"params": list(net[2].parameters()), "weight_decay": 0.0}]
    opt, _ = make_optimizer(groups, CFG, model_dim=24, max_steps=10)
    assert [g["fused"] for g in opt.param_groups] == [True, True]
    assert opt.param_groups[1]["weight_decay"] == 0.0


def test_without_a_fused_kernel_the_per_tensor_update_is_used(monkeypatch):
    """PyTorch before 2.4 has no fused AdamW for the CPU: it raises, and training goes on."""
    real = torch.optim.AdamW

    def old_adamw(params, *args, fused=None, **kwargs):
        if fused:
            raise RuntimeError("`fused=True` requires all the params to be floating point "
                               "Tensors of supported devices: ['cuda', 'xpu', 'privateuseone']")
        return real(params, *args, **kwargs)

    monkeypatch.setattr(torch.optim, "AdamW", old_adamw)
    net = _net()
    before = [p.detach().clone() for p in net.parameters()]
    opt, sched = make_optimizer(net.parameters(), CFG, model_dim=24, max_steps=10)
    assert isinstance(opt, real) and not opt.param_groups[0]["fused"]
    _train(net, opt, sched, 3)
    assert any(not torch.equal(a, b) for a, b in zip(net.parameters(), before))


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("make", [
    lambda: SequenceClassifier(SequenceClassifierConfig(num_classes=3, vocab_size=20,
                                                        model_dim=16, num_heads=2, num_layers=1,
                                                        pooling="cls")),
    lambda: JetTagger(JetTaggerConfig(model_dim=16, num_heads=2, num_layers=1,
                                      class_token=True, class_layers=1))],
    ids=["classify-cls", "jets-class-token"])
def test_weight_decay_leaves_a_class_token_alone_as_a_bias(make, optimizer):
    """--weight-decay is on matrices only: a class token (one learned vector, (1, 1, D)) is not
    pulled towards 0, as a bias is not; the embedding and the head's matrices are. One step
    with a zero gradient: AdamW's decoupled decay alone moves a weight, by lr x decay."""
    torch.manual_seed(0)
    model = make()
    cfg = {**CFG, "optimizer": optimizer, "warmup": 0}
    opt, _ = make_optimizer(optimizer_groups(model, cfg), cfg, model_dim=16, max_steps=10)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    after = dict(model.named_parameters())
    token = "cls" if "cls" in after else "class_token"
    assert torch.equal(after[token], before[token])
    head = [n for n in after if after[n].ndim == 2 and n.startswith(("output_net", "head"))]
    assert head and all(torch.allclose(after[n], before[n] * (1 - 1e-2 * 0.1), rtol=0, atol=1e-7)
                        for n in head)


@pytest.mark.slow
def test_a_classify_run_saved_with_its_class_token_decayed_resumes(tmp_path, monkeypatch):
    """A checkpoint saved while the class token was in the decayed group (before it was left
    out) resumes with the groups it was saved with (docs/compatibility.md), not refused by
    PyTorch for groups of other sizes."""
    import json

    from attnlab.cli import main
    from attnlab.training import module

    rows = ["text,label"] + [f"{w} is {'good' if i % 2 else 'bad'},{'pos' if i % 2 else 'neg'}"
                             for i, w in enumerate(["this", "that", "it", "one"] * 10)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "run"
    argv = ["train", "classify", "--data", str(tmp_path / "data.csv"), "--out", str(out),
            "--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--batch-size", "8",
            "--threads", "1", "--weight-decay", "0.1", "--warmup", "1"]
    with monkeypatch.context() as m:
        m.setattr(module, "learned_token", lambda p: False)  # the rule before
        assert main([*argv, "--max-steps", "2"]) == 0
    assert main([*argv, "--max-steps", "4", "--resume"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 4
