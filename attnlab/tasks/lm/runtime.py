"""The runtime module of ``attnlab train lm``, the part that imports torch (the spec, settings and
checks are ``attnlab.tasks.lm``): the prepared corpus and its token windows, the ``CausalLM``,
training (instruction rows, --data FILE.jsonl: ``instruct.py``), and the uses of a trained run
— ``predict`` (a greedy continuation; on a run trained on chat rows, the reply), ``evaluate``,
``attention_maps``, the prompt of ``attnlab generate`` and ``export --hf``.

The metrics, shared by ``run`` and ``evaluate`` (``lm_metrics``, plain torch): over the N target
tokens of the non-overlapping windows of val.bin (or of every token after the first of
``evaluate --data FILE``),

    val_loss = -(1/N) Σ_t log p(x_{t+1} | x_1..x_t)   (nats),   val_perplexity = exp(val_loss).

Only ``run`` imports Lightning (``attnlab.training``), so predict, evaluate and plot never load it.

With ``--init DIR`` a new run starts from DIR's weights and tokenizer (``pretrained``): a GPT-2
directory read by ``attnlab.interop.checkpoint.read_checkpoint``, or an attnlab lm run; the
corpus is tokenised with that tokenizer, which the run saves as its own. A resumed run never
reads DIR again: its weights are its checkpoint's, its tokenizer its corpus's.

Shapes: B batch, T block size (context length), V vocabulary, L layers, H heads.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from ...data import numbered_batches
from ...data.chat_rows import is_rows_file
from ...data.corpus import TokenWindows, corpus_identity, encode_file, prepare, read_meta
from ...data.tables import check_digest
from ...errors import UsageError
from ...interop.checkpoint import read_checkpoint
from ...interop.saved import load_any_tokenizer
from ...interop.source import reread_init_source
from ...models import CausalLM
from ...models.configs import CausalLMConfig
from ...paths import not_found
from ...run_config import RunSettings
from ...runs import held_temporary_folder, load_weights, pin_data_files
from ...settings import PredictSettings, check_argument, epoch_steps
from ...tokenizers import Tokenizer, note_unknown
from ...viz import lr_curve, plot_lr_schedule
from ..base import (FINITE, Numbered, attends, config_from_run, each_input, input_name, loads,
                    predicts, quantized_run, rng_kept, without_nan_metrics)
from .checks import check_corpus

__all__ = ["model_config_of", "build_model", "lm_metrics", "random_windows", "corpus_dir",
           "pin_corpus", "split_windows", "pretrained", "figures", "run", "load",
           "encode_prompt", "input_reader", "predict_many", "evaluate", "attention_maps", "export_hf",
           "fine_tune"]


def model_config_of(cfg: RunSettings) -> CausalLMConfig:
    """The ``CausalLMConfig`` of a run's configuration: its fields by name, the context length
    ``block_size`` as ``max_len`` unless the run records a ``max_len`` of its own (an --init
    model's positions, which training windows of --block-size may leave partly unused);
    ``vocab_size`` is the prepared corpus' (or the --init model's) once ``run`` set it.
    Settings that break a rule between them (a hand-edited config.yaml) are a ``UsageError``
    naming the file.

    Examples:
        >>> from attnlab.tasks import SHARED_DEFAULTS, get_task
        >>> cfg = get_task("lm").config(**SHARED_DEFAULTS, vocab_size=70, block_size=32)
        >>> model_config_of(cfg).max_len
        32
    """
    try:
        return config_from_run(CausalLMConfig, cfg,
                               max_len=cfg.max_len if cfg.is_set("max_len") else cfg.block_size)
    except ValueError as e:  # the rules between settings (``lm_parts_broken``), on a file's
        raise UsageError(f"{cfg._where or 'the run config'}: {e}") from None


def build_model(cfg: RunSettings) -> CausalLM:
    """The ``CausalLM`` a run's configuration describes (``model_config_of``).

    Examples:
        >>> from attnlab.tasks import SHARED_DEFAULTS, get_task
        >>> build_model(get_task("lm").config(**SHARED_DEFAULTS, vocab_size=70,
        ...                                   block_size=32)).max_len
        32
    """
    return CausalLM(model_config_of(cfg))


@torch.no_grad()
def lm_metrics(model, windows, batch_size: int, max_batches: int | None = None, *,
               to_the_end: bool = False, finite: list[bool] | None = None
               ) -> dict[str, float]:
    """``val_loss`` (mean next-token cross-entropy, nats) and ``val_perplexity`` = exp(val_loss)
    over the first ``max_batches`` batches of ``windows`` (a ``TokenWindows``), every token
    weighted equally (a short last batch counts by its tokens, not as a whole batch).

    With ``to_the_end`` (``evaluate --data FILE``), the tokens after the last whole window
    count too (``_tail``): every token of the file after its first is predicted once.
    ``finite``, when given, gets whether each window's loss (the tail's last) is finite."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    n = len(windows) if max_batches is None else min(len(windows), max_batches * batch_size)
    for start in range(0, n, batch_size):
        inputs, targets = (torch.stack(t) for t in zip(*(windows[i] for i in
                                                          range(start, min(start + batch_size, n)))))
        logits = model(inputs)  # (B, T, V)
        losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
        total += float(losses.sum())
        count += targets.numel()
        if finite is not None:
            finite += losses.view(targets.shape).sum(1).isfinite().tolist()  # (B,)
    if to_the_end and (tail := _tail(windows)) is not None:
        inputs, targets, rest = tail
        logits = model(inputs)[0, -rest:]  # (rest, V): the targets no window has scored
        loss = float(F.cross_entropy(logits, targets[0, -rest:], reduction="sum"))
        total += loss
        count += rest
        if finite is not None:
            finite.append(math.isfinite(loss))
    model.train(was_training)
    return loss_metrics(total / count)


def _tail(windows) -> tuple[torch.Tensor, torch.Tensor, int] | None:
    """The file's last window, (inputs (1, T), targets (1, T), r), of which only the last r
    targets are tokens that ``windows`` (which tile the file without overlap) leave unscored
    at its end (fewer than T); None when the windows reach the end. The window ends at the
    file's last token, so those r tokens are predicted from a full window of context, as
    every other token is, rather than from a short one."""
    size = windows.block_size
    assert windows.stride == size, "the tail of windows that do not tile the file"
    rest = windows.num_tokens - 1 - len(windows) * size
    if rest <= 0:
        return None
    window = torch.from_numpy(windows.data[-(size + 1):].astype("int64"))  # (T + 1,)
    return window[None, :-1], window[None, 1:], rest


# the largest loss (nats) whose exp a float holds, about 709.78: past it exp overflows
MAX_EXP_LOSS = math.log(sys.float_info.max)


def loss_metrics(loss: float) -> dict[str, float]:
    """``val_loss`` and ``val_perplexity`` = exp(val_loss) of a mean cross-entropy (nats). Past
    ``MAX_EXP_LOSS`` (a diverged run) the perplexity is no float: infinite, which metrics.json
    and evaluate write null, with a note saying why (it was exp(700), a number as if measured).

    Examples:
        >>> loss_metrics(2.0)["val_perplexity"] == math.exp(2.0)
        True
        >>> loss_metrics(24746.3)["val_perplexity"]
        inf
    """
    if loss > MAX_EXP_LOSS and math.isfinite(loss):
        print(f"note: val_perplexity is null: exp(val_loss), val_loss {loss:.6g} nats, is past "
              f"the largest float (val_loss above {MAX_EXP_LOSS:.2f}): the model diverged",
              file=sys.stderr, flush=True)
        return {"val_loss": loss, "val_perplexity": math.inf}
    return {"val_loss": loss, "val_perplexity": math.exp(loss)}


def random_windows(windows, batch_size: int, steps: int, seed: int):
    """``steps`` training batches of windows drawn anywhere in the corpus (with replacement).

    Batch number n (see ``numbered_batches``) is drawn by a generator seeded from (seed, n): the
    DDP ranks see different windows, and a resumed run continues with the batches it had not seen.
    """
    def batch(n: int):
        g = torch.Generator().manual_seed(seed * 1_000_003 + n)
        xs, ys = zip(*(windows[int(i)] for i in torch.randint(len(windows), (batch_size,),
                                                               generator=g)))
        return torch.stack(xs), torch.stack(ys)  # (B, T), (B, T)

    return numbered_batches(batch, steps)


# ---- the corpus -----------------------------------------------------------------------------
def corpus_dir(cfg: RunSettings, run_dir: Path, tokenizer: Tokenizer | None = None) -> Path:
    """The prepared corpus: --data itself, or RUN_DIR/data prepared from a text file (with
    ``tokenizer``, --init's, when given; else one of --tokenizer's kind fitted on the text)."""
    data = Path(cfg.data)
    if data.is_dir():
        return data
    out = Path(run_dir) / "data"
    if not (out / "meta.json").is_file():
        print(f"preparing {data} -> {out} ({cfg.tokenizer} tokenizer)", flush=True)
        # force: RUN_DIR/data is the run's own; it replaces what a killed prepare left there
        if tokenizer is not None:
            prepare([data], out, tokenizer=tokenizer, force=True)
        else:
            prepare([data], out, tokenizer=cfg.tokenizer, vocab_size=cfg.vocab_size,
                    force=True)
    return out


def pin_corpus(cfg, run_dir: Path, data_dir: Path):
    """Record, when the run starts, what it trains on; on ``--resume``, refuse a change.

    A prepared corpus is identified by the SHA-256 of its meta.json and tokenizer.json
    (``corpus_sha256`` in config.yaml): meta.json holds the digests ``prepare`` computed of
    the token files while writing them, so two small files stand for a corpus of any size
    and ``evaluate`` stays fast (``attnlab.data.corpus``). A text file given as --data is
    also recorded in ``data_sha256``, as classify records its file, and must be the text
    RUN_DIR/data was prepared from. Returns the run config, with ``corpus_sha256`` for a
    new run (``engine.fit`` writes config.yaml before the first step, so that a run killed
    before it finishes has the digests too).
    """
    if cfg.resume and cfg.corpus_sha256:
        check_corpus(cfg.corpus_sha256, data_dir, "resume")
    else:
        cfg = cfg.derive(corpus_sha256=corpus_identity(data_dir))
    prepared_from = read_meta(data_dir).get("files_sha256") or [None]
    if Path(cfg.data).is_file() and prepared_from[0]:  # prepare read the text recorded
        check_digest(cfg.data, prepared_from[0], cfg.data_sha256["data"], what="--data")
    return cfg


def trained_corpus(cfg: RunSettings, run_dir: Path) -> Path:
    """The prepared corpus a run trained on: RUN_DIR/data, wherever the run directory is now
    (copied or moved), when the run prepared it from a text file (``data_sha256`` records the
    file) and it is there; else config.yaml's ``data_dir``: the corpus given as --data, or
    that of a run copied without its data/ (``corpus_sha256`` vouches for it either way)."""
    own = Path(run_dir) / "data"
    if cfg.data_sha256 and "data" in cfg.data_sha256 and own.is_dir():
        return own
    return Path(cfg.data_dir)


def split_windows(cfg: RunSettings, split: str, *, stride: int | None = None) -> TokenWindows:
    """The windows of --block-size + 1 tokens of the run's ``split`` ("train" or "val"), every
    ``stride`` tokens (default: --block-size, windows that do not overlap)."""
    path = Path(cfg.data_dir) / f"{split}.bin"
    if not path.is_file():
        raise UsageError(f"{path} not found: the prepared corpus of this run moved or was "
                         f"deleted (data_dir in config.yaml)")
    return TokenWindows(path, cfg.block_size, dtype=cfg.dtype, stride=stride)


# ---- training -------------------------------------------------------------------------------
def run(task, cfg: RunSettings, run_dir: Path,
        checked: Any = None) -> dict[str, float]:
    """Prepare (or check) the corpus, train, measure ``val_loss``/``val_perplexity`` and write
    the run directory (``Runtime.run``)."""
    if cfg.instruction:  # --data FILE.jsonl: instruction rows, which validate read
        return fine_tune(task, cfg, run_dir, checked)
    from ...training import finish, fit  # Lightning: imported by training only
    from ...training.lm import LMModule

    start = pretrained(cfg, run_dir)
    cfg, tokenizer, train_tokens = _corpus_of_run(cfg, run_dir, start and start[1])
    tokenizer = _with_init_stops(tokenizer, cfg, run_dir, start and start[1])
    train, val = split_windows(cfg, "train", stride=1), split_windows(cfg, "val")
    B = cfg.batch_size
    if cfg.epochs:  # an epoch: every token seen once, in non-overlapping windows
        max_steps = epoch_steps(cfg, max(1, train_tokens // (cfg.block_size * B)), cfg.epochs)
    else:
        max_steps = cfg.max_steps
    model = build_model(cfg)
    if start:  # strict: config.yaml's settings rebuild exactly the model --init read
        model.load_state_dict(start[0])
    val_every = cfg.val_every
    result = fit(LMModule(model, cfg, max_steps), random_windows(train, B, max_steps, cfg.seed),
                 DataLoader(val, batch_size=B), cfg, run_dir, max_steps=max_steps,
                 val_check_interval=val_every or None,
                 limit_val_batches=cfg.val_batches, tokenizer=tokenizer)
    metrics = {}
    if result.is_global_zero:
        metrics = _last_validation(cfg, result) or lm_metrics(model, val, B, cfg.val_batches)
        figures(cfg, run_dir, result.steps, max_steps)
    return finish(cfg, run_dir, model, metrics, result, tokenizer=tokenizer)


def fine_tune(task, cfg: RunSettings, run_dir: Path, rows) -> dict[str, float]:
    """``run`` on instruction rows (``rows``, which validate read, and for a new run encoded:
    ``instruct.EncodedRows``): the loss on the
    assistant's tokens only, batches padded per batch, ``val_loss`` over every held-out
    assistant token (``instruct``)."""
    from ...training import finish, fit  # Lightning: imported by training only
    from ...training.lm import LMModule
    from .instruct import assistant_loss, batched, example_batches, pad_id, prepare

    start = pretrained(cfg, run_dir)
    # resumed (before its first checkpoint too): the tokenizer it saved, never --init's again
    cfg, tokenizer, train, val = prepare(cfg, run_dir, rows,
                                         None if cfg.resume else start and start[1])
    B = cfg.batch_size
    max_steps = epoch_steps(cfg, math.ceil(len(train) / B), cfg.epochs) if cfg.epochs \
        else cfg.max_steps
    model = build_model(cfg)
    if start:
        model.load_state_dict(start[0])
    val_batches = batched(val, B, tokenizer)
    # every held-out row at each validation (not --val-batches, which caps val.bin's windows):
    # the loop's val_loss is then metrics.json's and evaluate's, per assistant token of them all
    result = fit(LMModule(model, cfg, max_steps),
                 example_batches(train, B, max_steps, cfg.seed, pad_id(tokenizer)), val_batches,
                 cfg, run_dir, max_steps=max_steps,
                 val_check_interval=cfg.val_every or None,
                 tokenizer=tokenizer)
    metrics = {}
    if result.is_global_zero:  # the saved weights, in float32 (as evaluate loads them)
        metrics = _without_nan(lambda finite: loss_metrics(assistant_loss(
            model, val_batches, finite)), f"--data {cfg.data}, held out", run_dir,
            unit="conversation")
        figures(cfg, run_dir, result.steps, max_steps)
    return finish(cfg, run_dir, model, metrics, result, tokenizer=tokenizer)


def _last_validation(cfg: RunSettings, result) -> dict[str, float] | None:
    """The loop's validation of the last step as the run's metrics, when it is the measurement
    ``lm_metrics`` would repeat: the same windows (the first ``val_batches`` batches of val),
    every token weighted equally, in float32. Under any other precision the model that
    ``evaluate`` and ``predict`` load (float32) is measured again."""
    loss = result.validation.get("val_loss")
    if loss is None or cfg.precision != "32":
        return None
    return loss_metrics(loss)


def pretrained(cfg: RunSettings,
               run_dir: Path) -> tuple[dict[str, torch.Tensor], Tokenizer] | None:
    """(state dict, tokenizer) of --init DIR for a run that starts (a new one, or one resumed
    before its first checkpoint): a GPT-2 directory's converted weights and own tokenizer, or
    an attnlab lm run's; None without --init or when the run resumes from its checkpoint
    (which holds the weights). ``UsageError`` if DIR's weights are not those whose SHA-256
    ``attnlab train`` recorded (``init_sha256``)."""
    from ...training.checkpoint import resumes_from_checkpoint  # Lightning: when training

    if not cfg.init or resumes_from_checkpoint(cfg, run_dir):
        return None
    source = reread_init_source(cfg.init, cfg.init_sha256, task="lm")  # unchanged since train
    if source.kind == "hf":
        start = read_checkpoint(source.path, task="lm")
        return start.model.state_dict(), start.tokenizer
    model = build_model(cfg)  # the run's model: its settings are this run's (init_settings)
    load_weights(model, source.weights)
    return model.state_dict(), load_any_tokenizer(source.path / "tokenizer.json")


def _with_init_stops(tokenizer, cfg, run_dir: Path, init_tokenizer: Tokenizer | None):
    """The corpus's ``tokenizer`` with --init's end-of-generation ids (``checkpoint_eos_ids``:
    a GGUF file's eot and eom, an instruct directory's several eos) where its tokenizer.json
    has none: a corpus prepared before attnlab kept a GGUF file's eot id holds the same tokens
    (``check_init_corpus``) but not where generation ends, and a run trained on it would write
    on past the end of a turn. The ids come from ``init_tokenizer`` (a new run, or one resumed
    before its first checkpoint) or the run's own tokenizer.json (resumed from its checkpoint,
    which ``fit`` wrote with them)."""
    from ...training.checkpoint import saved_tokenizer_file

    if not cfg.init or getattr(tokenizer, "checkpoint_eos_ids", None) != []:
        return tokenizer
    if init_tokenizer is None and (saved := saved_tokenizer_file(cfg, run_dir)):
        init_tokenizer = load_any_tokenizer(saved)
    tokenizer.checkpoint_eos_ids = list(getattr(init_tokenizer, "checkpoint_eos_ids", []))
    return tokenizer


def _corpus_of_run(cfg, run_dir: Path, tokenizer: Tokenizer | None = None):
    """Pin --data, prepare it if it is a text file (with --init's ``tokenizer`` when given),
    pin the corpus, and derive what config.yaml needs from it (``data_dir``, ``vocab_size``,
    ``dtype``). An --init run keeps its model's vocabulary size (the embedding's rows, which
    may be more than its tokenizer's ids). Returns the run config, the tokenizer and
    train.bin's token count."""
    if Path(cfg.data).is_file():  # before preparing: a resumed run refuses a changed file
        cfg = cfg.derive(**pin_data_files({"data": cfg.data}, cfg.data_sha256,
                                          resuming=cfg.resume))
    else:  # a prepared corpus, recorded absolute as a file is: resumed from anywhere
        cfg = cfg.derive(data=str(Path(cfg.data).resolve()))
    data_dir = corpus_dir(cfg, run_dir, tokenizer)
    cfg = pin_corpus(cfg, run_dir, data_dir)
    meta = read_meta(data_dir)
    vocab_size = cfg.vocab_size if cfg.init else meta["vocab_size"]
    if meta["vocab_size"] > vocab_size:
        raise UsageError(f"--data {cfg.data}: its tokenizer has {meta['vocab_size']:,} ids, "
                         f"more than the --init model's {vocab_size:,} embedding rows")
    cfg = cfg.derive(data_dir=str(data_dir.resolve()), vocab_size=vocab_size,
                     dtype=meta["dtype"])
    return cfg, load_any_tokenizer(data_dir / "tokenizer.json"), meta["train_tokens"]


def figures(cfg: RunSettings, run_dir: Path, steps: int, max_steps: int) -> None:
    """lr_schedule.png: the learning rate over the run (the step it stopped at marked)."""
    curve = lr_curve(cfg.schedule, warmup=cfg.warmup, max_iters=max_steps,
                     d_model=cfg.model_dim, lr=cfg.lr, min_lr=cfg.min_lr, cooldown=cfg.cooldown)
    plot_lr_schedule({cfg.schedule: curve}, Path(run_dir) / "lr_schedule.png",
                     mark_step=steps if steps < max_steps else None)


# ---- using a trained run (no Lightning) -----------------------------------------------------
@loads
def load(task, run_dir: Path, cfg: RunSettings, *, quantize: str | None = None):
    """The trained ``CausalLM`` (eval mode) and its tokenizer (``attnlab.load``); with
    ``quantize="int8"``, its linear layers on int8 weights (``attnlab.nn.quantize``)."""
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    tokenizer = load_any_tokenizer(Path(run_dir) / "tokenizer.json")
    return quantized_run(model.eval(), quantize, run_dir), tokenizer


def encode_prompt(task, tokenizer, text: str, *, what: str = "--prompt") -> list[int]:
    """The token ids of the prompt ``text`` (``continuation.prompt_ids``: with the bos a
    checkpoint's tokenizer puts first); ``UsageError`` naming ``what`` if it encodes to none."""
    from .continuation import prompt_ids

    return prompt_ids(tokenizer, text, what)


def export_hf(task, run_dir: Path, cfg: RunSettings) -> tuple[Any, dict[str, Any], str]:
    """``attnlab export --hf``: the run as a ``GPT2LMHeadModel``, or for a Llama-family block
    (RMSNorm, SwiGLU, RoPE) the ``*ForCausalLM`` of the family holding its parts
    (``attnlab.interop.to_hf``), and its tokenizer, in OUT itself, with a note on what the
    exported model does otherwise than ``attnlab generate``: a GPT-2's learned table cannot
    continue past its positions (``n_positions``: transformers' ``generate`` fails there, where
    attnlab slides the window); RoPE continues, past the context the model was trained on.
    Its ``generation_config.json`` samples as ``attnlab generate RUN`` does (``write_sampling``)."""
    from ...interop import to_hf
    from ...interop.generation_config import write_sampling
    from ...interop.llama_config import qkv_bias_beside_window
    from ...interop.tokenizer import special_ids, to_hf_tokenizer

    model, tokenizer = load(task, run_dir, cfg)
    # q/k/v biases alone are Qwen2's only with Qwen2's own tokenizer (an --init run's):
    # transformers reads any qwen2 directory's tokenizer as Qwen2Tokenizer, which gives a
    # run's own char, word or BPE tokenizer other ids; Llama's reads the one written
    own = tokenizer.kind == "hf"
    if not own and qkv_bias_beside_window(model.config):  # named by the run's flags
        raise ValueError("q/k/v biases (--qkv-bias) with a sliding window (--sliding-window) "
                         "fit no Hugging Face family that reads this run's tokenizer: Llama "
                         "has no window, Mistral no biases")
    hf_model = to_hf(model, **special_ids(tokenizer), qkv_bias_as="qwen2" if own else "llama")
    stops = _export_stops(tokenizer, Path(run_dir))
    if stops:
        hf_model.generation_config.eos_token_id = stops if len(stops) > 1 else stops[0]
    write_sampling(hf_model.generation_config)  # as attnlab generate RUN samples, not greedily
    n = getattr(hf_model.config, "n_positions", None)
    name = "n_positions" if n else "max_position_embeddings"
    n = n or hf_model.config.max_position_embeddings
    source = (f"the run's --block-size" if cfg.block_size == n else
              f"--init's; the run trained on windows of --block-size {cfg.block_size}")
    if name == "n_positions":
        note = (f"note: the exported model reads at most {n} positions (n_positions, "
                f"{source}): transformers' generate fails once prompt + "
                f"max_new_tokens pass {n} tokens; keep them within {n}, or continue longer "
                f"texts with attnlab generate, which slides the window")
    else:
        note = (f"note: the exported {type(hf_model).__name__} was trained on at most {n} "
                f"positions ({name}, {source}); transformers' generate reads on past them "
                f"where attnlab generate slides the window, so longer texts continue "
                f"differently")
    # a GPT-2 reads no more than its positions: truncation=True cuts there, as GPT-2's does
    limit = n if name == "n_positions" else None
    return hf_model, {"": to_hf_tokenizer(tokenizer, model_max_length=limit)}, note


def _export_stops(tokenizer, run_dir: Path) -> list[int] | None:
    """The ids an exported run's ``generate`` stops at, where they are not the tokenizer's eos
    alone (None): a chat's end of turn too (``ChatSession``), and each eos id of the checkpoint
    a run from ``--init`` was made from (``text_stops``)."""
    if getattr(tokenizer, "chat_template", None):
        from .instruct import ChatSession

        return ChatSession(tokenizer, run_dir).stops
    if getattr(tokenizer, "checkpoint_eos_ids", None):
        from .continuation import text_stops

        return text_stops(tokenizer)
    return None


def input_reader(task, run_dir: Path, cfg: RunSettings):
    """One input's prompt ids, as ``predict_many`` reads it (``encode_prompt``) with the run's
    tokenizer alone; None for a chat run, whose messages ``chat_predictions`` reads."""
    if cfg.instruction == "chat":
        return None
    return _prompt_reader(task, load_any_tokenizer(Path(run_dir) / "tokenizer.json"))


def _prompt_reader(task, tokenizer):
    return lambda text: encode_prompt(task, tokenizer, text, what="--input")


@predicts
@torch.no_grad()
def predict_many(task, run_dir: Path, cfg: RunSettings, texts: list[str], labels: list[str], *,
                 max_new_tokens: int | None = None) -> list[dict[str, Any]]:
    """Each text's greedy continuation of ``max_new_tokens`` tokens (default: the run's
    ``predict_tokens``), on one line: what ``attnlab generate --greedy`` continues it by
    (``continue_prompt``: the whole prompt read, the window sliding past the block size; a
    prompt longer than the model reads is cut to its end, said on stderr)."""
    from .continuation import continue_prompt, prediction_of

    # by --max-new-tokens' rule ("5", 0 or 10**9 refused), named as the argument: predict
    # checked its flag already; a NumPy integer is a number
    max_new_tokens = check_argument(PredictSettings, "max_new_tokens", max_new_tokens,
                                    error=UsageError)
    model, tokenizer = load(task, run_dir, cfg)
    n = cfg.predict_tokens if max_new_tokens is None else max_new_tokens
    if cfg.instruction == "chat":  # trained on conversations: each text is a user's message
        from .instruct import chat_predictions

        return chat_predictions(model, tokenizer, Path(run_dir), texts, labels, n)
    prompts = each_input(texts, labels, _prompt_reader(task, tokenizer))
    note_unknown(tokenizer, texts, labels)
    finite: list[bool] = []  # a run trained to NaN: no answer (``predicts``), one warning
    return [{**prediction_of(continue_prompt(model, tokenizer, ids, n, label=label,
                                             finite=finite)), FINITE: finite[-1]}
            for ids, label in zip(prompts, labels)]


@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task, run_dir: Path, cfg: RunSettings, data: str | None, *,
             quantize: str | None = None) -> dict[str, float]:
    """val_loss/val_perplexity on the run's val split, or on a text file (--data FILE); of the
    int8 model with ``quantize="int8"``."""
    model, tokenizer = load(task, run_dir, cfg, quantize=quantize)
    if cfg.instruction and (data is None or is_rows_file(data)):
        from .instruct import evaluate_loss

        where = f"--data {cfg.data}, held out" if data is None else f"--data {data}"
        return _without_nan(lambda finite: loss_metrics(evaluate_loss(
            cfg, model, tokenizer, data, finite)), where, run_dir, unit="conversation")
    if data is not None:
        return _file_metrics(model, tokenizer, Path(data), cfg, run_dir)
    cfg = cfg.derive(data_dir=str(trained_corpus(cfg, run_dir)))
    if cfg.corpus_sha256:  # the corpus is the one trained on (pin_corpus)
        check_corpus(cfg.corpus_sha256, Path(cfg.data_dir), "evaluate")
        read_meta(cfg.data_dir)  # and val.bin has the size its meta.json states
    return _split_metrics(model, cfg, run_dir)


def _split_metrics(model, cfg: RunSettings, run_dir: Path) -> dict[str, float]:
    """val_loss/val_perplexity over the windows of the validation split that training
    measured (its first --val-batches batches of --batch-size: metrics.json's number, at a
    bounded cost on a corpus of any size); a note says so when the split holds more, and that
    evaluate --data scores a whole file."""
    val = split_windows(cfg, "val")
    measured = cfg.val_batches * cfg.batch_size
    if len(val) > measured:
        print(f"note: val_loss over the first {measured:,} of the validation split's "
              f"{len(val):,} windows (--val-batches {cfg.val_batches} of --batch-size "
              f"{cfg.batch_size}), as training measured it; evaluate --data FILE scores all of "
              f"a file", file=sys.stderr, flush=True)
    return _without_nan(lambda finite: lm_metrics(model, val, cfg.batch_size, cfg.val_batches,
                                                  finite=finite),
                        "the validation split", run_dir)


def _without_nan(measure, what: str, run_dir: Path | None, unit: str = "window"
                 ) -> dict[str, float]:
    """``measure(finite)``'s metrics, null where the loss of a ``unit`` (a window, an
    instruction run's conversation) is not finite (a run trained to NaN), with one warning
    naming how many and the first (``without_nan_metrics``, the rule every task's evaluate
    keeps); of a model of no run (``run_dir`` None), as measured."""
    if run_dir is None:
        return measure(None)
    finite: list[bool] = []
    metrics = measure(finite)
    names = Numbered(lambda i: f"{unit} {i + 1} of {what}", len(finite))
    return without_nan_metrics(metrics, finite, names, run_dir)


def _file_metrics(model, tokenizer, path: Path, cfg: RunSettings, run_dir: Path | None = None
                  ) -> dict[str, float]:
    """val_loss/val_perplexity over every token of a text file after its first: its
    non-overlapping windows and the tokens they leave at its end (``lm_metrics``' to_the_end),
    encoded chunk by chunk into a temporary token file and read through a memory map (any size
    of file)."""
    if path.is_dir():
        raise UsageError(f"--data {path}: is a directory; give a text file to score")
    if not path.is_file():
        raise not_found("--data", path)
    with held_temporary_folder("attnlab-eval-", "an attnlab evaluate --data") as tmp:
        tokens = tmp / "tokens.bin"
        n = encode_file([path], tokenizer, tokens, dtype=cfg.dtype)
        if n < 2:
            raise UsageError(f"--data {path} holds fewer than 2 tokens")
        windows = TokenWindows(tokens, min(cfg.block_size, n - 1), dtype=cfg.dtype)
        return _without_nan(lambda finite: lm_metrics(model, windows, cfg.batch_size,
                                                      to_the_end=True, finite=finite),
                            f"--data {path}", run_dir)


@attends
def attention_maps(task, run_dir: Path, cfg: RunSettings, text: str):
    """``attnlab plot attention`` (and ``view``) on an lm run: the causal maps over the tokens
    of ``text``, labelled by the text of each token; a text longer than the model reads
    (--block-size) is refused, as the other tasks refuse theirs, not cut without a word."""
    model, tokenizer = load(task, run_dir, cfg)
    ids = encode_prompt(task, tokenizer, text, what="--input")
    note_unknown(tokenizer, [text], [input_name()])  # as predict and generate say it
    if len(ids) > model.max_len:
        raise UsageError(f"--input has {len(ids)} tokens; this model reads at most "
                         f"--block-size {model.max_len}")
    maps = [m[0] for m in model.get_attention_maps(torch.tensor([ids]))]  # L × (H, T, T)
    labels = [label or "·" for label in tokenizer.labels(ids)]  # (byte-level: no "�")
    return maps, labels, labels
