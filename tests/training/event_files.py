"""A run's training log read back two ways, for comparing them: ``logs/metrics.csv`` with the
csv module, and its TensorBoard event files with TensorBoard's own reader (the one its
legacy loader uses, which honours a resumed file's "session start")."""
import csv
from pathlib import Path

import torch

# The TensorBoard tag of each CSV column (docs/cli.md, "Compare runs in TensorBoard").
TAGS = {"train_loss": "train/loss", "train_acc": "train/acc", "train_seq_acc": "train/seq_acc",
        "lr": "train/lr", "grad_norm": "train/grad_norm",
        "samples_per_second": "train/samples_per_second",
        "tokens_per_second": "train/tokens_per_second",
        "val_loss": "val/loss", "val_acc": "val/acc", "val_seq_acc": "val/seq_acc"}
NOT_IN_EVENTS = ("step", "train_seconds")  # the row's key, and the CSV's own clock


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def as_scalars(rows: list[dict[str, str]]) -> dict[str, list[tuple[int, float]]]:
    """What the event files should hold for ``rows``: each non-empty cell as (step, value) under
    its column's tag, the value rounded to float32 as TensorBoard keeps it."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for column, cell in row.items():
            if column not in NOT_IN_EVENTS and cell != "":
                value = torch.tensor(float(cell), dtype=torch.float32).item()
                scalars.setdefault(TAGS[column], []).append((int(row["step"]), value))
    return scalars


def scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in ``log_dir``, in the order TensorBoard shows them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})  # 0: keep them all
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}
