"""Test-side helpers shared by several test modules (importable because ``tests/`` is on
``sys.path``: ``pythonpath = ["tests"]`` in ``pyproject.toml``)."""
