"""Widgets of the TUI: plots, stat panels, the log tail, the top bar."""
