"""``python -m accelctl.worker JOB.json``: the process every launch starts."""

import sys

from accelctl.worker.main import main

sys.exit(main())
