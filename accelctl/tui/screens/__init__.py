"""Screens of the TUI: workloads, plan, run, runs, compare, help, dialogs."""
