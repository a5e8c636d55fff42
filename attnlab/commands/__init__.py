"""Sub-commands of ``attnlab``: one module each, with ``register(subparsers)``."""
