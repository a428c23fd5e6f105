"""``python -m pipeline.cli``: the ``flowstate`` command."""

import sys

from pipeline.cli.main import main

sys.exit(main())
