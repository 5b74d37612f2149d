"""``python -m accelctl.cli``: the ``accelctl`` program."""

import sys

from accelctl.cli import main

sys.exit(main())
