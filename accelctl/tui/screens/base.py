"""What every view of the app shares: the top bar (with the app's context) and the footer."""

from __future__ import annotations

from textual.screen import Screen

from accelctl.tui.widgets.chrome import TopBar


class AppScreen(Screen):
    #: which of the top bar's views this screen belongs to
    VIEW = "workloads"

    def top_bar(self) -> TopBar:
        return TopBar(self.VIEW, id="topbar")

    def refresh_context(self) -> None:
        """Attributes down: the app's selection / live run state into the top bar."""
        for bar in self.query(TopBar):
            bar.context = self.app.context_text()

    def on_screen_resume(self) -> None:
        self.refresh_context()
