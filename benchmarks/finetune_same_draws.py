"""``finetune --early-stop``'s two recipes given the same random draws: do their curves coincide?

    .venv/bin/python -m benchmarks.finetune_same_draws [--seeds 0 1] [--dropout 0.1]
        [--sides both|attnlab] [--batches random|grouped] [--out DIR]

``benchmarks/finetune.py --early-stop`` runs attnlab's ``--keep-best --patience`` and
transformers' ``Trainer`` with ``load_best_model_at_end`` and ``EarlyStoppingCallback`` each as
a user runs it: each draws its own new head, dropout masks and batch order. This script
takes those draws away, on the same data, checkpoint (MiniLM) and hyper-parameters, one
seed at a time:

- the head is the Trainer's (``set_seed(seed)`` before the model is built, as there), copied
  into attnlab's model;
- the batches are one list of 200, each epoch a ``torch.randperm`` of the training rows (the
  distribution of the Trainer's ``RandomSampler``), given to both loops as they are
  (``--batches grouped`` gives attnlab its own length-grouped batches instead, for a paired
  comparison of the two orders; the Trainer is then not run);
- torch is seeded with the seed just before training on both sides, and the Trainer's
  evaluation puts torch's random state back as attnlab's validation does (its evaluation
  DataLoader draws a base seed from it, which would shift every later dropout mask).

attnlab is run through its CLI (``attnlab train classify --init ...``), with only its head and
its batches replaced. With the same draws the two loops should give the same validation
accuracy at every validation, the same best step and the same step to stop at; the small
version of this is tests/interop/test_classify_training_matches_hf.py. Each seed prints one
line per side with its curve. Not a test: it takes minutes per seed.
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import torch

from benchmarks import finetune as fb

STEPS, EVERY, PATIENCE = 200, 20, 3
H = fb.HYPER


def random_batches(tok, rows: list[dict], labels: list[str], seed: int) -> list[tuple]:
    """``STEPS`` batches (input_ids, attention_mask, token_type_ids, labels), each epoch a
    ``torch.randperm`` order of ``rows``, padded on the right to the batch's longest."""
    index = {lab: i for i, lab in enumerate(labels)}
    g = torch.Generator().manual_seed(1000 + seed)
    out: list[tuple] = []
    while len(out) < STEPS:
        perm = torch.randperm(len(rows), generator=g).tolist()
        for b in range(0, len(perm), H["batch_size"]):
            items = [rows[i] for i in perm[b:b + H["batch_size"]]]
            enc = tok([r["text"] for r in items], padding=True, truncation=True,
                      max_length=H["max_len"], return_tensors="pt")
            types = enc.get("token_type_ids", torch.zeros_like(enc["input_ids"]))
            y = torch.tensor([index[r["label"]] for r in items])
            out.append((enc["input_ids"], enc["attention_mask"], types, y))
    return out[:STEPS]


def draws(files: dict[str, Path], ckpt: Path, seed: int, dropout: float):
    """(the Trainer's model with its new head, tokenizer, rows by split, labels, batches)."""
    from transformers import AutoModelForSequenceClassification, set_seed

    set_seed(seed)
    rows = {s: list(csv.DictReader(open(p, encoding="utf-8"))) for s, p in files.items()}
    labels = sorted({r["label"] for r in rows["train"]})
    tok, model = fb.pretrained(AutoModelForSequenceClassification, str(ckpt), len(labels),
                               dropout)
    return model, tok, rows, labels, random_batches(tok, rows["train"], labels, seed)


def trainer_curve(model, tok, rows, labels, batches, seed: int, out: Path) -> dict:
    """The Trainer's early-stop run over ``batches``: {step: val accuracy}, best, steps."""
    import transformers
    from transformers import DataCollatorWithPadding, EarlyStoppingCallback, TrainingArguments

    index = {lab: i for i, lab in enumerate(labels)}
    curve: dict[int, float] = {}
    given = [{"input_ids": i, "attention_mask": m, "token_type_ids": t, "labels": y}
             for i, m, t, y in batches]

    class Given(transformers.Trainer):
        def get_train_dataloader(self):
            return given

        def evaluate(self, *args, **kwargs):
            state = torch.get_rng_state()
            scores = super().evaluate(*args, **kwargs)
            torch.set_rng_state(state)
            curve[self.state.global_step] = scores["eval_accuracy"]
            return scores

    enc = tok([r["text"] for r in rows["val"]], truncation=True, max_length=H["max_len"])
    val = [{"input_ids": i, "attention_mask": m, "labels": index[r["label"]]}
           for i, m, r in zip(enc["input_ids"], enc["attention_mask"], rows["val"])]
    args = TrainingArguments(
        output_dir=str(out / "trainer"), max_steps=STEPS, seed=seed,
        per_device_train_batch_size=H["batch_size"], per_device_eval_batch_size=64,
        learning_rate=H["lr"], warmup_steps=H["warmup"], lr_scheduler_type="cosine",
        weight_decay=H["weight_decay"], max_grad_norm=H["grad_clip"],
        eval_strategy="steps", eval_steps=EVERY, save_strategy="steps", save_steps=EVERY,
        save_total_limit=2, load_best_model_at_end=True, metric_for_best_model="accuracy",
        report_to=[], use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
    trainer = Given(model=model, args=args, eval_dataset=val,
                    data_collator=DataCollatorWithPadding(tok),
                    compute_metrics=lambda p: {"accuracy": float(
                        (p.predictions.argmax(-1) == p.label_ids).mean())},
                    callbacks=[EarlyStoppingCallback(early_stopping_patience=PATIENCE)])
    torch.manual_seed(seed)
    trainer.train()
    return {"curve": curve, "best": trainer.state.best_metric,
            "steps": trainer.state.global_step}


def attnlab_curve(files, ckpt: Path, head: dict, batches, seed: int, dropout: float,
                  run: Path) -> dict:
    """attnlab's CLI run with ``head`` and ``batches`` (None: its own length-grouped ones)."""
    import attnlab.training as training
    from attnlab.cli import main
    from attnlab.tasks.classify import runtime

    real_fit, real_module = training.fit, runtime._module

    def module(kind, model, cfg, steps):
        model.classifier.load_state_dict(head)
        return real_module(kind, model, cfg, steps)

    def fit(module, train, *args, **kwargs):
        torch.manual_seed(seed)
        return real_fit(module, train if batches is None else list(batches), *args, **kwargs)

    training.fit, runtime._module = fit, module
    try:
        code = main(fb.attnlab_argv(ckpt, files, run, seed, STEPS, 1, [
            "--val-every", str(EVERY), "--dropout", str(dropout), "--keep-best", "--monitor",
            "val_acc", "--patience", str(PATIENCE)]))
    finally:
        training.fit, runtime._module = real_fit, real_module
    if code:
        raise SystemExit(f"attnlab train exited {code}")
    curve = {int(r["step"]): float(r["val_acc"])
             for r in csv.DictReader(open(run / "logs" / "metrics.csv")) if r.get("val_acc")}
    metrics = json.loads((run / "metrics.json").read_text())
    return {"curve": curve, "best": metrics["best_value"], "steps": metrics["steps"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--dropout", type=float, default=H["dropout"])
    ap.add_argument("--sides", choices=["both", "attnlab"], default="both")
    ap.add_argument("--batches", choices=["random", "grouped"], default="random")
    ap.add_argument("--out", type=Path, default=Path("runs/finetune-same-draws"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=False)
    files = fb.write_small_numbers(args.out, 0)
    ckpt, _ = fb.checkpoint(None)
    for seed in args.seeds:
        model, tok, rows, labels, batches = draws(files, ckpt, seed, args.dropout)
        head = {k: v.detach().clone() for k, v in model.classifier.state_dict().items()}
        if args.sides == "both" and args.batches == "random":
            print(f"seed {seed} Trainer: " + json.dumps(trainer_curve(
                model, tok, rows, labels, batches, seed, args.out / f"seed{seed}")), flush=True)
        given = batches if args.batches == "random" else None
        print(f"seed {seed} attnlab ({args.batches} batches): " + json.dumps(attnlab_curve(
            files, ckpt, head, given, seed, args.dropout,
            args.out / f"seed{seed}" / f"attnlab-{args.batches}")), flush=True)


if __name__ == "__main__":
    main()
