"""Terminals over their WebSocket against a real corrald: a login shell on a PTY typed into as a
person would (issue 14's checks from the client side: 42, stty size, Ctrl-C, scrollback on
reattach, the exit code), over the Unix socket and over TCP with a bearer token."""

import pytest

from conftest import tcp_daemon
from corral import Client, CorralError, Session


def test_echo_reads_42_and_resize_shows_in_stty_size(session):
    with session.terminal(cols=80, rows=24) as t:
        assert t.record["terminal"] is True
        t.write("stty size; echo $((6*7))\r")
        t.read_until(b"24 80\r\n42\r\n")
        t.resize(132, 43)
        t.write("stty size\r")
        t.read_until(b"43 132\r\n")
        with pytest.raises(CorralError, match="rows must be an integer in 1..4096"):
            t.resize(80, 5000)
        t.write("exit\r")
        exit = t.wait(timeout=30)
        assert (exit.exit_code, exit.status, exit.signal) == (0, "exited", None)
        assert t.errors == []


def test_ctrl_c_interrupts_the_foreground_sleep(session):
    with session.terminal() as t:
        # The marker comes from the foreground job itself: bash gives a job the terminal before
        # it runs, so once it shows, ^C reaches the job and not bash (typing ^C right after an
        # `echo` of bash's own could land before the sleep is in the foreground, and miss it).
        t.write("sh -c 'echo sleeping-$((3*3)); exec sleep 300'\r")
        t.read_until(b"sleeping-9\r\n")
        t.write("\x03")
        t.write("echo status-$?\r")
        t.read_until(b"status-130\r\n")  # 128 + SIGINT, said by the shell itself
        t.write("exit 0\r")
        assert t.wait(timeout=30).exit_code == 0


def test_reattach_gets_the_scrollback_and_two_clients_share_a_terminal(session):
    first = session.terminal()
    first.write("echo marker-$((7*6))\r")
    first.read_until(b"marker-42\r\n")
    first.close()
    with pytest.raises(CorralError) as e:
        first.wait(timeout=10)
    assert e.value.code == "detached"
    assert session.process(first.id).record["running"], "closing only detached"

    again = session.attach_terminal(first.id)
    watcher = session.attach_terminal(first.id)
    again.read_until(b"marker-42")   # the scrollback, before anything typed now
    watcher.read_until(b"marker-42")
    again.write("echo after-$((1+1))\r")
    watcher.read_until(b"after-2\r\n")
    watcher.write("exit 7\r")
    assert again.wait(timeout=30).exit_code == 7
    assert watcher.wait(timeout=30).exit_code == 7
    rest = b"".join(again)  # iteration ends with the output
    assert isinstance(rest, bytes)
    again.close()
    watcher.close()


def test_a_command_terminal_and_a_killed_one(session):
    t = session.terminal(command='printf "one\\ntwo\\n"; exit 3')
    text = b"".join(t)
    assert b"one\r\ntwo\r\n" in text, "the pty turns \\n into \\r\\n"
    assert t.wait(timeout=30).exit_code == 3

    sleeper = session.terminal(command="sleep 300")
    session.process(sleeper.id).kill()
    exit = sleeper.wait(timeout=30)
    assert exit.status == "killed" and exit.exit_code >= 128, exit


def test_input_beyond_one_message_arrives_whole(session):
    t = session.terminal(command="stty raw -echo; echo ready; head -c 700000 | wc -c")
    t.read_until(b"ready")
    t.write(b"x" * 700000)  # several messages, each in fragmented frames
    t.read_until(b"700000")
    assert t.wait(timeout=30).exit_code == 0


def test_attaching_to_what_is_no_terminal_answers_the_api_error(session):
    p = session.spawn("sleep 300")
    with pytest.raises(CorralError) as e:
        session.attach_terminal(p.id)
    assert (e.value.code, e.value.status) == ("not_a_terminal", 400)
    with pytest.raises(CorralError) as e:
        session.attach_terminal("p9999")
    assert e.value.status == 404
    p.kill()


def test_a_terminal_over_tcp_with_the_session_token():
    d = tcp_daemon()
    try:
        created = d.client.create_session(policy="default")
        tcp = Client(url=d.url, token=created.token)
        t = tcp.session(created.id).terminal(command="echo over-$((40+2))", cols=40, rows=10)
        assert b"over-42" in b"".join(t)
        assert t.wait(timeout=30).exit_code == 0
        with pytest.raises(CorralError) as e:
            # The upgrade itself needs the token (the session object is built without a request).
            Session(Client(url=d.url), created.id).attach_terminal(t.id)
        assert e.value.status == 401
    finally:
        d.stop()


def test_a_terminal_that_never_started_raises_setup_failed_with_corralds_reason(session):
    with pytest.raises(CorralError) as e:
        session.terminal(command="pwd", cwd="nope")
    assert (e.value.code, e.value.record["status"]) == ("setup_failed", "setup-failed")
    assert "chdir `/workspace/nope`: ENOENT" in e.value.message
    with session.attach_terminal(e.value.record["id"]) as again:  # the exit frame has no reason
        with pytest.raises(CorralError) as e:
            again.wait(timeout=30)
        assert e.value.code == "setup_failed" and "chdir `/workspace/nope`" in e.value.message


def test_a_timed_out_terminal_says_so_beside_its_sigterm(session):
    t = session.terminal(command="sleep 30", timeout_ms=300)
    exit = t.wait(timeout=30)
    assert (exit.status, exit.timed_out, exit.exit_code, exit.signal) == ("timeout", True, 143, "SIGTERM")
    t.close()
