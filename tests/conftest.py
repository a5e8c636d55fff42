"""Suite-wide settings.

The tests use tiny models: on a 2-core machine a second intra-op thread only adds contention,
and under pytest-xdist two workers with two threads each would oversubscribe it. So every test
process (and every CLI subprocess a test starts) uses one thread.
"""
import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after the environment, so the thread pools see it)

torch.set_num_threads(1)
