"""HTTP over corrald's unix socket, for the Python bench scripts beside this file."""
import http.client
import socket


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)
