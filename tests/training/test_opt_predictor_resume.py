"""A ``TransformerPredictor(weight_decay=...)`` checkpoint saved before the matrices alone were
decayed (its AdamW state has one parameter group, every parameter decayed) resumes with
``Trainer.fit(ckpt_path=...)``: it ended in "loaded state dict has a different number of
parameter groups". Resumed, it trains as it did when saved (one group), as ``attnlab train
--resume`` does (docs/compatibility.md), so it ends with the weights of a run never stopped."""
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

pytestmark = pytest.mark.slow  # three Lightning fits

ARGS = dict(lr=1e-2, warmup=2, max_iters=8, weight_decay=0.1)


def _fit(tmp_path, epochs, *, ckpt_path=None, save=None):
    import lightning.pytorch as L

    from attnlab.training import TransformerPredictor

    torch.manual_seed(0)
    model = TransformerPredictor(10, 16, 10, 2, 1, **ARGS)
    x = torch.randint(10, (32, 6), generator=torch.Generator().manual_seed(1))
    loader = DataLoader(TensorDataset(x, x.flip(1)), batch_size=8)  # 4 steps an epoch
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, accelerator="cpu", devices=1)
    trainer.fit(model, loader, ckpt_path=ckpt_path)
    if save:
        trainer.save_checkpoint(save)
    return trainer, {n: p.detach().clone() for n, p in model.named_parameters()}


def test_a_checkpoint_saved_with_one_group_resumes_as_it_trained(tmp_path, monkeypatch):
    import attnlab.training.predictor as predictor

    old = tmp_path / "old.ckpt"
    with monkeypatch.context() as m:  # as TransformerPredictor was: every parameter decayed
        m.setattr(predictor, "optimizer_groups", lambda module, cfg: list(module.parameters()))
        _, uninterrupted = _fit(tmp_path, 2)
        _fit(tmp_path, 1, save=old)
    assert len(torch.load(old, weights_only=False)["optimizer_states"][0]["param_groups"]) == 1

    trainer, resumed = _fit(tmp_path, 2, ckpt_path=old)

    assert trainer.global_step == 8
    assert len(trainer.optimizers[0].param_groups) == 1
    for name, weight in resumed.items():  # the same float32 operations on the same numbers
        torch.testing.assert_close(weight, uninterrupted[name], rtol=0, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")


def test_a_new_checkpoint_resumes_with_the_matrices_alone_decayed(tmp_path):
    new = tmp_path / "new.ckpt"
    _, uninterrupted = _fit(tmp_path, 2)
    _fit(tmp_path, 1, save=new)
    trainer, resumed = _fit(tmp_path, 2, ckpt_path=new)

    assert [g["weight_decay"] for g in trainer.optimizers[0].param_groups] == [0.1, 0.0]
    for name, weight in resumed.items():
        torch.testing.assert_close(weight, uninterrupted[name], rtol=0, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")
