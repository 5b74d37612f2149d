"""One analytics core: steady state, confidence intervals, cost.

The run summary, the console, the TUI, ``accelctl report`` / ``compare`` and the
TensorBoard export all call these functions; none computes a figure of its own.
"""
