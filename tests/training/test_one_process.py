"""One training process trains as one, whatever strategy is named (issue #37), and Lightning's
start-up lines stay out of a run's output."""
import pytest
import torch
import yaml

from attnlab.cli import main
from attnlab.training import engine, hardware

from .loop_probe import probe_loop

TINY = ["--max-steps", "4", "--train-size", "64", "--val-size", "16", "--test-size", "16",
        "--model-dim", "16", "--num-heads", "1", "--batch-size", "16", "--val-every", "2",
        "--checkpoint-every", "2", "--threads", "1", "--accelerator", "cpu"]
NOTE = "note: --strategy ddp with one process (--devices 1): training as one process"


@pytest.fixture
def fabrics(monkeypatch):
    """Each Fabric the loop trains with, and torch's threads when training starts."""
    built = []
    make = engine.make_fabric

    class Threads:
        def on_train_start(self, loop):
            built[-1] = (built[-1][0], torch.get_num_threads())

    def recording(cfg, *, callbacks=None):
        built.append((make(cfg), None))
        return built[-1][0]

    monkeypatch.setattr(engine, "make_fabric", recording)
    probe_loop(monkeypatch, Threads())
    threads = torch.get_num_threads()
    yield built
    torch.set_num_threads(threads)


@pytest.mark.slow  # trains two runs
def test_ddp_on_one_process_trains_as_one_and_says_so_also_when_resumed(tmp_path, capfd,
                                                                       fabrics):
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--devices", "1", "--strategy", "ddp",
                 *TINY]) == 0
    err = capfd.readouterr().err
    assert err.count(NOTE) == 1, err
    fabric, threads = fabrics[-1]
    assert type(fabric.strategy).__name__ == "SingleDeviceStrategy"
    assert fabric.world_size == 1 and threads == 1  # --threads 1 held
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["strategy"] == "ddp"  # as asked: a --resume on two devices runs DDP

    # a run that trained on two devices, resumed on one: its strategy comes from config.yaml
    saved["devices"] = 2
    (out / "config.yaml").write_text(yaml.safe_dump(saved))
    assert main(["train", "reverse", "--out", str(out), "--resume", "--devices", "1",
                 "--max-steps", "6"]) == 0
    err = capfd.readouterr().err
    assert err.count(NOTE) == 1, err
    assert type(fabrics[-1][0].strategy).__name__ == "SingleDeviceStrategy"


def test_one_process_ddp_is_decided_from_the_processes_in_all():
    from attnlab.tasks import get_task

    def cfg(**values):
        return get_task("reverse").config(**values)

    assert hardware.single_process_ddp(cfg(strategy="ddp", devices=1, num_nodes=1))
    assert not hardware.single_process_ddp(cfg(strategy="ddp", devices=2, num_nodes=1))
    assert not hardware.single_process_ddp(cfg(strategy="ddp", devices=1, num_nodes=2))
    assert not hardware.single_process_ddp(cfg(strategy="auto", devices=1, num_nodes=1))
    assert not hardware.single_process_ddp(cfg(strategy="fsdp", devices=1, num_nodes=1))


def test_launch_keeps_the_threads_the_run_asked_for(monkeypatch):
    """Fabric's launcher sets torch's threads to one per core over the processes, over
    --threads (it was why --threads 1 ran a second thread under DDP)."""
    from types import SimpleNamespace

    before = torch.get_num_threads()
    built = SimpleNamespace(launch=lambda: torch.set_num_threads(3))
    try:
        torch.set_num_threads(1)
        hardware.launch(built, SimpleNamespace(threads=1, devices=1, num_nodes=1))
        assert torch.get_num_threads() == 1
        hardware.launch(built, SimpleNamespace(threads=None, devices=1, num_nodes=1))  # not asked
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_mixed_precision_runs_print_no_lightning_lines(tmp_path, capfd, caplog, precision):
    """"Using bfloat16 Automatic Mixed Precision (AMP)" came twice a run, from each Fabric
    built (the check before the run directory, and the loop's): Lightning's logger was set
    quiet before Lightning's import set it to INFO again. (Under pytest Lightning's records go
    to pytest's handler, not to stderr: ``caplog`` holds what a user's terminal would show.)
    Lightning's Trainer imported beside it (``TransformerPredictor``'s) points Lightning's
    line at another logger: imported here, so the test does not hang on the order of others."""
    import lightning.pytorch  # noqa: F401

    assert main(["train", "reverse", "--out", str(tmp_path / "run"), "--precision", precision,
                 *TINY]) == 0
    captured = capfd.readouterr()
    shown = [r.getMessage() for r in caplog.records if r.name.startswith("lightning")]
    assert not [m for m in shown if "Automatic Mixed Precision" in m], shown
    assert "Automatic Mixed Precision" not in captured.out + captured.err, captured
    # what attnlab itself says of 16-mixed on a CPU stays: once
    said = captured.err.count("note: --precision 16-mixed is not available")
    assert said == (precision == "16-mixed"), captured.err
