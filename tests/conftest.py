"""Suite-wide settings.

Under pytest-xdist each worker gets one intra-op thread (and so do the CLI subprocesses the
tests start): two workers with two threads each on a 2-core machine would oversubscribe it.
"""
import os

if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
