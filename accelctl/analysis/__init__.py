"""One analytics core: steady state and stragglers (``stats``), confidence intervals
(``ci``, through ``scipy.stats``), cost (``cost``) and the comparison of two
configurations with its intervals and verdict (``compare``).

The run summary, the console, the TUI, ``accelctl report`` / ``compare`` and the
TensorBoard export all call these functions; none computes a figure of its own.
"""
