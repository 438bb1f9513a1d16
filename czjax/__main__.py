from czjax.cli import main
import sys
sys.exit(main())
