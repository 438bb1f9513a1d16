"""``python -m czjax.cli``, as ``czjax``."""

import sys

from czjax.cli import main

sys.exit(main())
