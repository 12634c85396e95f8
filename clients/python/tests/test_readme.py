"""The README's Python examples, run exactly as written, against a real corrald."""

import os
import pathlib
import re
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[3]


def readme_example(language):
    text = (REPO / "README.md").read_text()
    m = re.search(rf"<!-- readme-example: {language} -->\n```\w+\n(.*?)```", text, re.S)
    assert m, f"README has no {language} example"
    return m.group(1)


def test_the_readme_python_example_works_as_written(daemon):
    code = readme_example("python")
    assert len(code.strip().splitlines()) <= 5
    env = {**os.environ, "CORRAL_SOCKET": daemon.socket_path, "PYTHONPATH": str(REPO / "clients/python")}
    out = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout == "hello from corral\n"
    assert [s for s in daemon.client.sessions() if s["state"] == "active"] == []


def test_the_readme_terminal_example_works_as_written(daemon):
    code = readme_example("python-terminal")
    env = {**os.environ, "CORRAL_SOCKET": daemon.socket_path, "PYTHONPATH": str(REPO / "clients/python")}
    out = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True,
                         timeout=120, check=True)  # bytes: the terminal's \r\n stay as they are
    assert re.search(rb"[\r\n]42\r\n", out.stdout), out.stdout
    assert out.stdout.endswith(b"exit code 3\n"), out.stdout
    assert [s for s in daemon.client.sessions() if s["state"] == "active"] == []
