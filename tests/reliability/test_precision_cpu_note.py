"""``--precision bf16-mixed`` (or ``bf16-true``, or ``16-mixed``, which runs as bf16-mixed) on
a CPU without bfloat16 instructions trains, but emulated: a 128-wide reversal model trained
five times slower than in float32 on such a CPU (2026-12-01), and nothing said so to a user
who had asked for bfloat16 to train faster."""
import pytest

import attnlab.training.hardware as hardware
from attnlab.cli import main

from .conftest import TINY_MODEL


@pytest.mark.parametrize("precision", ["bf16-mixed", "bf16-true"])
def test_the_note_names_the_precision_only_where_bf16_is_emulated(monkeypatch, precision):
    monkeypatch.setattr(hardware, "cpu_has_bf16", lambda: False)
    note = hardware.emulated_bf16_note(precision)
    assert note.startswith(f"note: --precision {precision}: ") and "slower" in note
    assert "\n" not in note
    assert hardware.emulated_bf16_note("32") is None
    assert hardware.emulated_bf16_note("64") is None
    monkeypatch.setattr(hardware, "cpu_has_bf16", lambda: True)
    assert hardware.emulated_bf16_note(precision) is None


@pytest.mark.parametrize("cpuinfo, has", [
    # Graviton3's /proc/cpuinfo: no flags line, its features on a "Features" line
    ("processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 "
     "sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 "
     "asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm "
     "svebf16 i8mm bf16 dgh rng\nCPU implementer\t: 0x41\n", True),
    # Graviton2 (Neoverse N1): no bf16
    ("processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp "
     "asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\n", False),
    ("processor\t: 0\nflags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512_bf16\n", True),
    ("processor\t: 0\nflags\t\t: fpu vme sse sse2 avx avx2 amx_bf16 amx_tile\n", True),
    ("processor\t: 0\nflags\t\t: fpu vme sse sse2 avx avx2 avx512f\n", False),
])
def test_bf16_instructions_are_found_on_x86_and_arm(cpuinfo, has, monkeypatch):
    """On a Graviton3 the note said "no bfloat16 instructions found": only x86's flags line
    was read."""
    assert hardware.cpu_has_bf16(cpuinfo) is has
    monkeypatch.setattr(hardware, "cpu_has_bf16", lambda: has)
    assert (hardware.emulated_bf16_note("bf16-mixed") is None) is has


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("precision, bf16_cpu, said", [
    ("16-mixed", False, "bf16-mixed"), ("bf16-true", False, "bf16-true"),
    ("bf16-mixed", True, None), ("32", False, None),
])
def test_a_bf16_run_on_a_cpu_without_bf16_says_it_is_emulated(tmp_path, monkeypatch, capsys,
                                                              precision, bf16_cpu, said):
    monkeypatch.setattr(hardware, "cpu_has_bf16", lambda: bf16_cpu)
    assert main(["train", "reverse", "--out", str(tmp_path / "run"), "--max-steps", "2",
                 "--train-size", "32", "--val-size", "8", "--test-size", "8",
                 "--precision", precision, *TINY_MODEL.split()]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "no bfloat16 instructions" in line]
    assert notes == ([] if said is None else [hardware.emulated_bf16_note(said)]), err
