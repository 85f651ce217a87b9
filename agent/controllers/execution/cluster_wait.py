"""The Works that found the member cluster not Ready, told in one log line per episode.

While the Cluster is not Ready every reconcile stops at the same check, so a line per Work
says the same thing tens of thousands of times: one INFO line when the first Work starts
waiting, one with their count when the Cluster turns Ready, each Work at DEBUG only.
"""

from __future__ import annotations

import structlog


class ClusterWait:
    def __init__(self, log: structlog.stdlib.BoundLogger) -> None:
        self._log = log
        self._works: set[str] = set()

    def waits(self, work: str) -> None:
        if not self._works:
            self._log.info("member cluster is not Ready; Works wait until it is")
        self._works.add(work)
        self._log.debug("member cluster is not Ready; Work waits", work=work)

    def ended(self) -> None:
        """The Cluster turned Ready."""
        if self._works:
            self._log.info("Works waited for the Cluster to turn Ready", works=len(self._works))
            self._works.clear()
