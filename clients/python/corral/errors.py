"""The one exception type of the client: corrald's error code, message and HTTP status."""

import json


class CorralError(Exception):
    """An error answered by corrald (``{"error": {"code", "message"}}``) or met reaching it.

    ``status`` is the HTTP status, 0 when the error is the client's own finding: no answer
    arrived (socket missing, connection refused), a bad argument, or ``setup_failed``: corrald
    answered that a process never started (its setup failed: a missing cwd, no such program),
    with the reason as ``message`` and the process record as ``record``.
    """

    def __init__(self, code, message, status, diagnostics=None, record=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.diagnostics = diagnostics
        self.record = record

    @classmethod
    def from_body(cls, status, body):
        """Parses an error body; anything that is not corrald's shape still becomes a CorralError."""
        try:
            err = json.loads(body)["error"]
            return cls(err["code"], err["message"], status, err.get("diagnostics"))
        except (ValueError, KeyError, TypeError):
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
            return cls(f"http_{status}", f"HTTP {status}: {text[:200]}", status)
