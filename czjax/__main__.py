import sys

from czjax.cli import main

sys.exit(main())
