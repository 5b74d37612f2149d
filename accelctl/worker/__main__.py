"""``python -m accelctl.worker JOB.json``: the process every launch starts."""

from accelctl.worker.main import exit_now, main

exit_now(main())
