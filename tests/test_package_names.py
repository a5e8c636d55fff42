"""Tab completion (Jupyter, IPython) lists what ``dir()`` gives: ``attnlab`` and
``attnlab.models`` import their names lazily, so without ``__dir__`` it found only the lazy
loader."""
import subprocess
import sys

import attnlab
import attnlab.models


def test_dir_of_attnlab_lists_the_public_names_and_each_resolves():
    names = {n for n in dir(attnlab) if not n.startswith("_")}
    assert {"load", "capture", "nn", "models", "tokenizers", "schedulers", "generation",
            "training", "interop", "viz", "data"} <= names
    for name in names:
        assert getattr(attnlab, name) is not None, name
    assert attnlab.nn.MultiheadAttention.__name__ == "MultiheadAttention"


def test_dir_of_attnlab_models_lists_every_model_and_config():
    assert set(attnlab.models.__all__) <= set(dir(attnlab.models))
    for name in attnlab.models.__all__:
        assert getattr(attnlab.models, name).__name__ == name


def test_listing_the_names_imports_nothing_heavy():
    """``dir`` names the lazy attributes without importing them: torch stays unloaded."""
    code = ("import sys, attnlab; names = dir(attnlab); "
            "assert 'nn' in names and 'capture' in names, names; "
            "assert 'torch' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
