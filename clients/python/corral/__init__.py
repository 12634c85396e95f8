"""corral: a standard-library client of corrald (sessions, run, exec streams, processes, files,
ports, shells, code contexts), over its Unix socket or loopback TCP."""

from .client import Client, Process, RunResult, Session, event_bytes, shell_exit_code
from .errors import CorralError
from .terminal import Terminal, TerminalExit
from .websocket import FrameDecoder, WebSocketProtocolError

__all__ = ["Client", "CorralError", "FrameDecoder", "Process", "RunResult", "Session", "Terminal",
           "TerminalExit", "WebSocketProtocolError", "event_bytes", "shell_exit_code"]
