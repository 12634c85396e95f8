"""The one exception type of the client: corrald's error code, message and HTTP status."""

import json


class CorralError(Exception):
    """An error answered by corrald (``{"error": {"code", "message"}}``) or met reaching it.

    ``status`` is the HTTP status, 0 when no answer arrived (socket missing, connection refused).
    """

    def __init__(self, code, message, status, diagnostics=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.diagnostics = diagnostics

    @classmethod
    def from_body(cls, status, body):
        """Parses an error body; anything that is not corrald's shape still becomes a CorralError."""
        try:
            err = json.loads(body)["error"]
            return cls(err["code"], err["message"], status, err.get("diagnostics"))
        except (ValueError, KeyError, TypeError):
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
            return cls(f"http_{status}", f"HTTP {status}: {text[:200]}", status)
