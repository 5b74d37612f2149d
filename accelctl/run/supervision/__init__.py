"""A run while it runs: the one run policy (orchestrate), the supervisor and its runner, the
launches' processes and their events (eventpump, sinks), shared workers, schedulers, detach,
resume.  Below the viewers; reads and writes the run folder through ``accelctl.run.store``."""
