"""`python -m tracehouse.cli ...`: the same command as `tracehouse ...`."""

import sys

from .command import main

sys.exit(main())
