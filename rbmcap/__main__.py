"""``python -m rbmcap ...``: the same as the ``rbmcap`` command."""

import sys

from rbmcap.cli.main import main

sys.exit(main())
