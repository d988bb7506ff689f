"""``python -m fhs.cli``: the same as the ``fhs`` command."""

import sys

from fhs.cli import main

sys.exit(main())
