"""``python -m ctxlife.cli``: the ``ctxlife`` command."""

import sys

from ctxlife.cli import main

sys.exit(main())
