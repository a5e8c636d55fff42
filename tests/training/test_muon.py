"""``--optimizer muon``: which parameters Muon trains, that its step is ``torch.optim.Muon``'s
and the rest AdamW's, that the two are scheduled and checkpointed as one (``--resume`` bit for
bit), that a tiny language model learns with it, and the refusals, each one line before a run
directory exists."""
import copy
import json
import math
import re

import pytest
import torch
import yaml

from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.models import CausalLM, RNNSeq2Seq, SequenceClassifier
from attnlab.models.configs import CausalLMConfig, GraphNetConfig, SequenceClassifierConfig
from attnlab.models.graph_net import GraphNet
from attnlab.training.module import make_optimizer, optimizer_groups
from attnlab.training.muon import MuonWithAdamW, hidden_matrices

from ..training.loop_probe import probe_loop

MUON = {"lr": 1e-2, "warmup": 2, "weight_decay": 0.1, "beta2": 0.99, "optimizer": "muon"}


def _lm(tie: bool = True) -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(CausalLMConfig(vocab_size=11, model_dim=16, num_heads=2, num_layers=2,
                                   dim_feedforward=32, tie_weights=tie))


def _where(model: torch.nn.Module, opt) -> dict[str, str]:
    """Each trainable parameter's name -> the optimiser that steps it (muon or adamw)."""
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), name)  # a tied head is the embedding: listed by its first name
    return {names[id(p)]: "muon" if g["muon"] else "adamw"
            for g in opt.param_groups for p in g["params"]}


def _block_matrices(prefix: str, layers: int) -> set[str]:
    return {f"{prefix}.layers.{i}.{m}.weight" for i in range(layers)
            for m in ("self_attn.qkv_proj", "self_attn.o_proj", "linear_net.0", "linear_net.3")}


# ---- which parameters go where ----------------------------------------------------------

@pytest.mark.parametrize("tie", [True, False])
def test_lm_gives_the_blocks_matrices_to_muon_and_embeddings_head_norms_biases_to_adamw(tie):
    model = _lm(tie)
    opt, _ = make_optimizer(optimizer_groups(model, MUON), MUON, model_dim=16, max_steps=10)
    where = _where(model, opt)
    muon = {n for n, o in where.items() if o == "muon"}
    assert muon == _block_matrices("decoder", 2)
    adamw = set(where) - muon
    assert {"token_embedding.weight", "positional_encoding.embedding.weight",
            "decoder.norm.weight", "decoder.layers.0.self_attn.qkv_proj.bias",
            "decoder.layers.1.norm2.weight"} <= adamw
    assert ("lm_head.weight" in adamw) == (not tie)  # an untied head is AdamW's too
    # every trainable parameter exactly once
    assert len(where) == len({id(p) for p in model.parameters()})


def test_a_classifier_gives_its_head_and_class_token_to_adamw():
    torch.manual_seed(0)
    model = SequenceClassifier(SequenceClassifierConfig(num_classes=3, vocab_size=20, model_dim=16,
                                                        num_heads=2, num_layers=2))
    opt, _ = make_optimizer(optimizer_groups(model, MUON), MUON, model_dim=16, max_steps=10)
    where = _where(model, opt)
    assert {n for n, o in where.items() if o == "muon"} == _block_matrices("encoder", 2)
    # the head's hidden layer is the head's: AdamW, as Muon's authors prescribe
    assert where["output_net.0.weight"] == where["output_net.4.weight"] == "adamw"
    assert where["cls"] == where["embedding.weight"] == "adamw"


def test_weight_decay_is_the_same_on_muon_matrices_and_adamws_and_off_for_vectors():
    model = _lm()
    opt, _ = make_optimizer(optimizer_groups(model, MUON), MUON, model_dim=16, max_steps=10)
    decay = {name: g["weight_decay"] for name, o in _where(model, opt).items()
             for g in opt.param_groups if any(p is dict(model.named_parameters())[name]
                                               for p in g["params"])}
    assert decay["decoder.layers.0.linear_net.0.weight"] == 0.1  # Muon's
    assert decay["token_embedding.weight"] == 0.1
    assert decay["decoder.norm.weight"] == decay["positional_encoding.embedding.weight"] == 0.0


def test_models_without_transformer_blocks_have_nothing_for_muon_and_are_refused():
    """What the graph and GRU specs claim before a run starts (``adapt_layout``: no blocks)
    holds of the models they build; the optimiser itself refuses such a model too, naming the
    flag."""
    graph = GraphNet(GraphNetConfig(in_dim=5, num_classes=2, model_dim=4, num_heads=2))
    rnn = RNNSeq2Seq(12, 12, model_dim=16, attention="additive")
    for model in (graph, rnn):
        assert hidden_matrices(model) == {}
        with pytest.raises(UsageError, match=r"^--optimizer muon: this \w+ trains no weight"):
            optimizer_groups(model, MUON)
    assert optimizer_groups(graph, {**MUON, "optimizer": "adamw"})  # AdamW takes it


# ---- the step: Muon's own, and AdamW's own ------------------------------------------------

def _loss(model: CausalLM, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, 11, (4, 9), generator=g)
    logits = model(ids[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, 11), ids[:, 1:].reshape(-1))


def test_each_step_is_torch_muons_on_the_matrices_and_adamws_on_the_rest():
    """Copied weights, the same batches, four scheduled steps: the joined optimiser's weights
    equal those of ``torch.optim.Muon`` (match_rms_adamw, momentum 0.95, Nesterov, 5
    Newton–Schulz steps) on the blocks' matrices beside ``torch.optim.AdamW`` on the rest,
    each given the rate the schedule set. Tolerance 0: the same kernels in the same order."""
    ours, ref = _lm(), _lm()
    opt, sched = make_optimizer(optimizer_groups(ours, MUON), MUON, model_dim=16, max_steps=10)
    hidden = list(hidden_matrices(ref).values())
    ref_muon = torch.optim.Muon(hidden, lr=1e-2, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    ids = set(map(id, hidden))
    matrices = [p for n, p in ref.named_parameters() if id(p) not in ids and p.ndim == 2
                and "positional" not in n]
    ids |= set(map(id, matrices))
    vectors = [p for p in ref.parameters() if id(p) not in ids]
    ref_adamw = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                   {"params": vectors, "weight_decay": 0.0}],
                                  lr=1e-2, betas=(0.9, 0.99), fused=True)
    start = copy.deepcopy(ref.state_dict())
    for step in range(4):
        muon_lr = [g["lr"] for g in opt.param_groups if g["muon"]]
        adamw_lr = [g["lr"] for g in opt.param_groups if not g["muon"]]
        assert muon_lr == [1e-2 * sched.get_lr_factor(step)] and set(adamw_lr) == {muon_lr[0]}
        for group in ref_muon.param_groups + ref_adamw.param_groups:
            group["lr"] = muon_lr[0]
        for model in (ours, ref):
            _loss(model, step).backward()
        opt.step()
        ref_muon.step()
        ref_adamw.step()
        opt.zero_grad()
        ref_muon.zero_grad()
        ref_adamw.zero_grad()
        sched.step()
    moved = max((p - start[n]).abs().max() for n, p in ref.named_parameters())
    assert moved > 1e-3  # the weights really trained
    for (name, a), b in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=lambda m: f"{name}: {m}")


def _newton_schulz5(g: torch.Tensor) -> torch.Tensor:
    """The published orthogonalisation (Jordan et al., 2024), in exact float32 arithmetic:
    five steps of the quintic X <- aX + (b·XXᵀ + c·(XXᵀ)²)X, a, b, c = 3.4445, -4.7750, 2.0315,
    from X the matrix (in its wide orientation) divided by its Frobenius norm."""
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    x = x / x.norm().clamp(min=1e-7)
    for _ in range(5):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def test_muons_step_on_a_matrix_is_the_published_algorithm_written_out():
    """Four steps of --optimizer muon on two block matrices (one tall, one wide) against Muon
    written out: momentum μ = 0.95 as Jordan's reference keeps it (M <- μM + (1 - μ)G),
    Nesterov's update (1 - μ)G + μM, Newton–Schulz, scaled by 0.2·√max(A, B)
    (match_rms_adamw), and decoupled weight decay: W <- W(1 - lr·wd) - lr·0.2·√max(A, B)·NS,
    at the rate the schedule sets both optimisers' groups. Tolerance: each step's change of
    the weights within 12% (Frobenius) of the one by hand, in exact arithmetic: PyTorch runs
    Newton–Schulz in bfloat16, which put these gradients' (nearly rank-deficient) updates 4
    to 9% from exact; without Nesterov's correction they are 38 to 51% away, and Jordan's
    own scaling √max(1, A/B) puts the 48 x 16 matrix's 25% away."""
    model = _lm()
    opt, sched = make_optimizer(optimizer_groups(model, MUON), MUON, model_dim=16, max_steps=10)
    params = dict(model.named_parameters())
    names = ("decoder.layers.0.self_attn.qkv_proj.weight", "decoder.layers.1.linear_net.3.weight")
    momentum = {n: torch.zeros_like(params[n]) for n in names}
    for step in range(4):
        _loss(model, step).backward()
        # the course's cosine, warm-up 2 of 10 steps (step 0: rate 0, the momentum still moves)
        lr = 1e-2 * 0.5 * (1 + math.cos(math.pi * step / 10)) * min(1, step / 2)
        assert [g["lr"] for g in opt.param_groups] == pytest.approx([lr] * 3, rel=1e-12)
        before, by_hand = {n: params[n].detach().clone() for n in names}, {}
        for n in names:
            grad, (A, B) = params[n].grad, params[n].shape
            momentum[n] = 0.95 * momentum[n] + 0.05 * grad
            update = _newton_schulz5(0.05 * grad + 0.95 * momentum[n])
            by_hand[n] = -lr * 0.1 * before[n] - lr * 0.2 * math.sqrt(max(A, B)) * update
        opt.step()
        opt.zero_grad()
        sched.step()
        for n in names:
            moved = params[n].detach() - before[n]
            if step == 0:
                assert torch.equal(moved, torch.zeros_like(moved))
                continue
            assert (moved - by_hand[n]).norm() < 0.12 * by_hand[n].norm(), (step, n)


def test_muons_update_is_the_size_of_adamws_so_the_same_learning_rate_fits():
    """match_rms_adamw scales the orthogonalised update of an A x B matrix by 0.2·√max(A, B):
    its root-mean-square is about 0.2·lr, the size of a typical AdamW update (Liu et al.,
    2025). Newton–Schulz leaves singular values in roughly [0.7, 1.2], hence the range."""
    model = _lm()
    cfg = {**MUON, "weight_decay": 0.0, "warmup": 1}
    opt, _ = make_optimizer(optimizer_groups(model, cfg), cfg, model_dim=16, max_steps=100)
    lr = 1e-2
    for group in opt.param_groups:  # the peak rate (the schedule's step 0 has rate 0)
        group["lr"] = lr
    before = {n: p.detach().clone() for n, p in hidden_matrices(model).items()}
    _loss(model, 0).backward()
    opt.step()
    for name, p in hidden_matrices(model).items():
        rms = (p.detach() - before[name]).pow(2).mean().sqrt() / lr
        assert 0.1 < rms < 0.3, (name, float(rms))


def test_noam_scales_muons_rate_by_muon_lr_over_lr():
    """Under Noam --lr is the schedule's factor: Muon's rate is AdamW's times --muon-lr / --lr
    at every step, and without --muon-lr the same as AdamW's."""
    for muon_lr, ratio in ((None, 1.0), (0.5, 0.25)):
        cfg = {**MUON, "lr": 2.0, "schedule": "noam", "muon_lr": muon_lr}
        opt, sched = make_optimizer(optimizer_groups(_lm(), cfg), cfg, model_dim=16, max_steps=50)
        for _ in range(5):
            adamw, muon = opt.param_groups[0]["lr"], opt.param_groups[-1]["lr"]
            assert opt.param_groups[-1]["muon"] and adamw > 0
            assert muon == pytest.approx(adamw * ratio, rel=1e-12)
            opt.step()
            sched.step()


def test_the_state_dict_holds_both_states_and_loads_into_a_new_optimiser():
    model = _lm()
    opt, _ = make_optimizer(optimizer_groups(model, MUON), MUON, model_dim=16, max_steps=10)
    for group in opt.param_groups:
        group["lr"] = 1e-2
    _loss(model, 0).backward()
    opt.step()
    saved = copy.deepcopy(opt.state_dict())
    kinds = {frozenset(s) for s in saved["state"].values()}
    assert kinds == {frozenset({"momentum_buffer"}), frozenset({"step", "exp_avg", "exp_avg_sq"})}
    again, _ = make_optimizer(optimizer_groups(model, MUON), MUON, model_dim=16, max_steps=10)
    again.load_state_dict(saved)
    assert isinstance(again, MuonWithAdamW)
    # the parts step the loaded groups and state, not the ones they were built with
    assert again.muon.state is again.state and again.adamw.state is again.state
    assert all(any(g is h for h in again.param_groups)
               for g in again.muon.param_groups + again.adamw.param_groups)
    buffer = again.state[next(iter(hidden_matrices(model).values()))]["momentum_buffer"]
    assert buffer.abs().sum() > 0


# ---- through the command line -------------------------------------------------------------

TINY_LM = ["--num-layers", "1", "--batch-size", "8", "--block-size", "16", "--val-batches", "2",
           "--model-dim", "16", "--num-heads", "2", "--dim-feedforward", "32", "--warmup", "5",
           "--threads", "1", "--lr", "1e-2", "--dropout", "0.1", "--optimizer", "muon"]


def _corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("the quick brown fox jumps over the lazy dog; attention is all you need.\n" * 60)
    return path


class _Crash(Exception):
    pass


@pytest.mark.slow
def test_a_muon_lm_learns_and_resumes_bit_for_bit(tmp_path, monkeypatch, capsys):
    """A run killed after step 25 resumes from its step-20 checkpoint and ends with the very
    weights of a run that never stopped (dropout on: the same masks are drawn too); and the
    model learned: its validation loss is far below a uniform guess's."""
    from safetensors.torch import load_file

    data = _corpus(tmp_path)
    args = ["--data", str(data), "--max-steps", "40", "--checkpoint-every", "10", *TINY_LM]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(["train", "lm", "--out", str(whole), *args]) == 0

    class CrashAt:
        def on_train_batch_end(self, loop):
            if loop.step == 25:
                raise _Crash

    with monkeypatch.context() as m:
        probe_loop(m, CrashAt())
        with pytest.raises(_Crash):
            main(["train", "lm", "--out", str(cut), *args])
    state = torch.load(cut / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == 20
    assert [g["muon"] for g in state["optimizer"]["param_groups"]] == [False, False, True]
    assert main(["train", "lm", "--out", str(cut), *args, "--resume"]) == 0
    a, b = load_file(whole / "model.safetensors"), load_file(cut / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    metrics = json.loads((whole / "metrics.json").read_text())
    vocab = yaml.safe_load((whole / "config.yaml").read_text())["vocab_size"]
    assert metrics["val_loss"] < math.log(vocab) - 0.5, metrics


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("attnlab: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("task, flags, why", [
    ("graph", [], r"the graph model has no Transformer blocks"),
    ("translate", ["--arch", "rnn"], r"the translate model \(--arch rnn\) has no Transformer blocks"),
    ("lm", ["--data", "{corpus}", "--lora-rank", "2"],
     r"--lora-rank 2 trains low-rank updates beside the blocks, not the blocks"),
    ("lm", ["--data", "{corpus}", "--freeze", "all-but-last-0"],
     r"--freeze all-but-last-0 trains none of the blocks"),
    ("classify", ["--data", "{reviews}", "--freeze", "encoder"],
     r"--freeze encoder trains the head alone, none of the blocks"),
])
def test_muon_without_block_matrices_to_train_is_refused_before_the_run(task, flags, why,
                                                                         tmp_path, capsys):
    files = {"corpus": _corpus(tmp_path), "reviews": tmp_path / "reviews.csv"}
    files["reviews"].write_text("text,label\n" + "good film,pos\nbad film,neg\n" * 20)
    out = tmp_path / "run"
    argv = ["train", task, "--out", str(out), "--optimizer", "muon",
            *[f.format(**files) for f in flags]]
    assert main(argv) == 2
    line = _one_line(capsys)
    assert re.fullmatch(rf"attnlab: error: --optimizer muon: {why}, whose attention and "
                        rf"feed-forward weight matrices are what Muon trains; use --optimizer "
                        rf"adamw", line), line
    assert not out.exists()


@pytest.mark.parametrize("flags, message", [
    (["--muon-lr", "0.02"],
     "--muon-lr 0.02 is the learning rate of --optimizer muon; the run trains with "
     "--optimizer adamw"),
    (["--optimizer", "muon", "--strategy", "fsdp"],
     "--optimizer muon orthogonalises each weight matrix whole, and --strategy fsdp splits "
     "them across devices; use --strategy ddp"),
    # FSDP hands the optimiser each weight flattened (use_orig_params): the rule of the
    # matrices, by shape, decayed none of them, without a word
    (["--weight-decay", "0.1", "--strategy", "fsdp"],
     "--weight-decay 0.1 decays the weight matrices, told by their shape, and --strategy fsdp "
     "hands the optimiser every weight flattened; use --strategy ddp, or --weight-decay 0"),
])
def test_muon_lr_without_muon_and_muon_under_fsdp_are_refused(flags, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), *flags]) == 2
    assert _one_line(capsys) == f"attnlab: error: {message}"
    assert not out.exists()


def test_a_run_without_the_optimizer_settings_reads_adamw(tmp_path):
    """Every run made before --optimizer trained with AdamW alone."""
    from attnlab.tasks import get_task

    cfg = get_task("reverse").read_config({"task": "reverse", "lr": 1e-3}, tmp_path)
    assert (cfg.optimizer, cfg.muon_lr) == ("adamw", None)


def test_freeze_encoder_of_a_translator_leaves_its_decoder_to_muon(tmp_path):
    """A translator's --freeze encoder still trains its decoder's blocks: accepted."""
    from attnlab.commands.train import build_config

    cfg = build_config("translate", {"optimizer": "muon", "freeze": "encoder",
                                     "out": str(tmp_path / "r")})
    assert (cfg.optimizer, cfg.freeze) == ("muon", "encoder")


def test_resuming_a_run_made_before_optimizer_with_muon_is_refused(tmp_path):
    """A run whose config.yaml predates --optimizer trained with AdamW: --resume with
    --optimizer muon would continue another run (and fail on the checkpoint), so it is refused
    naming the value the run has."""
    from attnlab.commands.train import build_config
    from attnlab.runs import read_yaml, write_yaml

    from ..test_run_config import FIXTURES

    values = read_yaml(FIXTURES / "lm.yaml")
    assert "optimizer" not in values
    write_yaml(tmp_path / "config.yaml", values)
    with pytest.raises(UsageError, match=r"--resume: --optimizer muon \(the run has adamw\)"):
        build_config("lm", {"resume": True, "out": str(tmp_path), "optimizer": "muon"})
