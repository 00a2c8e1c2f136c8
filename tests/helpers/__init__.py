"""What several test modules share: data writers, scenes with known truth, training set-ups.

Test modules import from here (``tests/`` is on ``sys.path``: ``pythonpath = ["tests"]`` in
``pyproject.toml``), never from one another.
"""
