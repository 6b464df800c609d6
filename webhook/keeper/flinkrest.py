"""The JobManager's REST endpoint beside a session cluster's keeper (localhost, in its own pod): which
jobs run, and cancelling one. Every call under a deadline; a failure is a value (None, False), never an
exception: the guard looks again at its next turn."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from webhook.common.flink import is_job_id


@dataclass(frozen=True)
class FlinkRest:
    """``base``: ``http://HOST:PORT`` of the JobManager's REST endpoint; ``timeout``: each call's deadline."""

    base: str = "http://127.0.0.1:8081"
    timeout: float = 1.0

    def _connection(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.base)
        return http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port or 8081, timeout=self.timeout
        )

    def overview(self) -> Any:
        """``GET /jobs/overview``'s answer as JSON; None when it does not answer 200 with JSON in time."""
        connection = self._connection()
        try:
            connection.request("GET", "/jobs/overview", headers={"Accept": "application/json"})
            answer = connection.getresponse()
            body = answer.read()
            if answer.status != 200:
                return None
            return json.loads(body)
        except (OSError, http.client.HTTPException, ValueError):
            return None
        finally:
            connection.close()

    def cancel(self, job_id: str) -> bool:
        """``PATCH /jobs/<jobId>?mode=cancel``: a cancel without a savepoint (docs/keeper.md says why).
        True when Flink took it (202), or the job is not there any more (404)."""
        if not is_job_id(job_id):
            return False
        connection = self._connection()
        try:
            connection.request("PATCH", f"/jobs/{job_id}?mode=cancel")
            answer = connection.getresponse()
            answer.read()
            return answer.status in (200, 202, 404)
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()
