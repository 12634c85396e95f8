"""The Python client against a real corrald."""

import socket
import threading

import pytest

from corral import Client, CorralError


def test_health_and_policies(daemon):
    health = daemon.client.health()
    assert health["status"] == "ok"
    assert health["portRange"]["first"] == daemon.port_first
    assert any(p["name"] == "default" for p in daemon.client.policies()["presets"])
    assert daemon.client.validate_policy("name: mine\nextends: none\n")["valid"] is True
    assert daemon.client.validate_policy("name: mine\nnope: 1\n")["valid"] is False


def test_errors_carry_the_api_code_message_and_status(daemon, session):
    with pytest.raises(CorralError) as e:
        daemon.client.session("missing")
    assert (e.value.code, e.value.status) == ("no_such_session", 404)
    assert "missing" in e.value.message
    with pytest.raises(CorralError) as e:
        daemon.client.create_session(policy_yaml="name: x\nlimits: { memory: lots }\n")
    assert (e.value.code, e.value.status) == ("invalid_policy", 422)
    assert e.value.diagnostics
    with pytest.raises(CorralError) as e:
        session.read("../../etc/shadow")
    assert e.value.status == 403
    with pytest.raises(CorralError) as e:
        Client(socket_path=daemon.dir + "/absent.sock").health()
    assert (e.value.code, e.value.status) == ("unreachable", 0)


def test_run_returns_exit_code_and_output(session):
    r = session.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.status, r.stdout, r.stderr) == (3, "exited", "out\n", "err\n")
    r = session.run(["printf", "%s", "argv"], env={"A": "1"})
    assert r.stdout == "argv"
    r = session.run("printf '\\377\\000'")
    assert r.stdout_bytes == b"\xff\x00"
    assert session.run("echo $PWD", cwd="/tmp").stdout == "/tmp\n"


def test_exec_streams_events_as_an_iterator(session):
    events = list(session.exec("echo a; echo b >&2; exit 5"))
    assert events[0]["type"] == "start"
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events if e["type"] in ("exit", "error")] == ["exit"]
    assert events[-1]["exitCode"] == 5
    assert "".join(e.get("data", "") for e in events if e["type"] == "stdout") == "a\n"


def test_processes_spawn_wait_logs_stream_stdin_kill(session):
    p = session.spawn("read line; echo \"got $line\"", stdin_open=True)
    p.write_stdin(b"ping\n", eof=True)
    assert p.wait(timeout_ms=30000)["finished"] is True
    assert p.exit_code == 0
    assert p.output() == b"got ping\n"
    assert "".join(e.get("data", "") for e in p.stream(offset=4) if e["type"] == "stdout") == "ping\n"
    sleeper = session.spawn(["sleep", "300"])
    assert any(x["id"] == sleeper.id and x["running"] for x in session.processes())
    record = sleeper.kill()
    assert record["running"] is False and record["status"] == "killed"
    assert sleeper.exit_code in (137, 143)
    assert session.process(sleeper.id).record["running"] is False


def test_files(session):
    session.write("py/deep/a.txt", "one\ntwo\nthree\n")
    assert session.read("py/deep/a.txt") == b"one\ntwo\nthree\n"
    assert session.read_text("py/deep/a.txt", start_line=2, end_line=9) == "two\nthree\n"
    session.write("py/chunks.bin", iter([b"ab", b"\x00", b"cd"]))
    assert session.read("py/chunks.bin") == b"ab\x00cd"
    session.mkdir("py/x/y", recursive=True)
    assert sorted(e["name"] for e in session.list("py")) == ["chunks.bin", "deep", "x"]
    assert session.stat("py/chunks.bin")["size"] == 5
    session.move("py/chunks.bin", "py/x/moved.bin")
    assert session.exists("py/x/moved.bin") and not session.exists("py/chunks.bin")
    session.delete("py/x", recursive=True)
    assert not session.exists("py/x")
    with pytest.raises(CorralError) as e:
        session.read("py/none")
    assert e.value.code == "not_found"


def test_env_tokens_and_end(daemon):
    s = daemon.client.create_session(id="py-tokens")
    env = s.patch_env(set={"KEEP": "k", "DROP": "d"})
    assert env["KEEP"] == "k"
    assert "DROP" not in s.patch_env(set={"DROP": None})
    assert s.run('echo "$KEEP ${DROP-unset}"').stdout == "k unset\n"
    restricted = s.restricted()
    assert restricted.run("echo hi").stdout == "hi\n"
    with pytest.raises(CorralError) as e:
        restricted.end()
    assert e.value.status == 403
    report = s.end()
    assert report["id"] == "py-tokens"


def test_set_network_policy_changes_the_egress_record(session):
    answer = session.set_network_policy("custom", allowed_hosts=["registry.npmjs.org"],
                                        denied_cidrs=["10.0.0.0/8"])
    assert answer["egress"]["mode"] == "custom"
    assert answer["egress"]["deniedCIDRs"] == ["10.0.0.0/8"]
    assert session.info()["egress"]["allowedHosts"] == ["registry.npmjs.org"]
    with pytest.raises(CorralError) as e:
        session.set_network_policy("custom", allowed_hosts=["foo.*.com"])
    assert e.value.status == 400 and "allowedHosts[0]" in str(e.value)
    session.set_network_policy("deny-all")


def test_ports_lease_wait_endpoint_release(session):
    lease = session.lease_port()
    port = lease["port"]
    assert port in [p["port"] for p in session.ports()]
    server = session.spawn(f"exec python3 -m http.server {port} --bind 127.0.0.1")
    session.wait_port(port, timeout_ms=30000)
    url = session.port_endpoint(port)
    host, _, rest = url.removeprefix("http://").partition(":")
    with socket.create_connection((host, int(rest.split("/")[0])), timeout=30) as c:
        c.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert c.recv(12).startswith(b"HTTP/1.0 200")
    server.kill()
    session.release_port(port)
    assert session.ports() == []


def test_shell_contexts_carry_cwd_and_env_and_kill_all_ends_everything(session):
    assert session.create_shell(id="sh1")["id"] == "sh1"
    session.run("mkdir -p deep && cd deep && export CARRIED=yes", shell="sh1")
    r = session.run("pwd; echo $CARRIED", shell="sh1")
    assert r.stdout.endswith("/deep\nyes\n"), r.stdout
    assert session.shell("sh1")["env"]["CARRIED"] == "yes"
    assert [s["id"] for s in session.shells()] == ["sh1"]
    session.delete_shell("sh1")
    session.spawn("sleep 300")
    assert session.kill_all()["killed"] == 1
    assert all(not p["running"] for p in session.processes())


def test_create_terminal_starts_a_process_on_a_pty(session):
    record = session.create_terminal(cols=100, rows=30, command="tty; sleep 300")
    assert record["terminal"] is True and record["running"], record
    assert session.kill_all()["killed"] == 1


def test_code_context_keeps_state_reports_errors_and_streams(session):
    created = session.create_context("python", id="py")
    assert (created["id"], created["status"]) == ("py", "idle"), created
    assert session.run_code("py", "x = 40")["results"] == []
    out = session.run_code("py", "print('hi')\nx + 2")
    assert (out["status"], out["stdout"], out["results"]) == ("ok", "hi\n", [{"text/plain": "42"}])
    failed = session.run_code("py", "1 / 0")
    assert (failed["status"], failed["error"]["name"]) == ("error", "ZeroDivisionError"), failed
    timed = session.run_code("py", "while True: pass", timeout_ms=300)
    assert (timed["status"], timed["error"]["name"]) == ("timeout", "KeyboardInterrupt"), timed
    events = list(session.stream_code("py", "print('a')\nx"))
    assert [e["type"] for e in events] == ["stdout", "result", "end"], events
    assert events[1]["data"]["text/plain"] == "40"
    assert [c["id"] for c in session.contexts()] == ["py"]
    assert session.context("py")["runs"] == 5
    session.delete_context("py")
    with pytest.raises(CorralError) as e:
        session.run_code("py", "x")
    assert e.value.status == 404


def test_git_checkout_clones_inside_the_session_and_reports_gits_failure(session):
    made = session.run("git init -q /workspace/src && git -C /workspace/src -c user.email=t@corral.test"
                       " -c user.name=t commit -q --allow-empty -m init && echo made")
    assert "made" in made.stdout, made.stderr
    cloned = session.git_checkout("/workspace/src", target_dir="/workspace/dst")
    assert cloned["targetDir"] == "/workspace/dst", cloned
    assert session.run("git -C /workspace/dst log --format=%s").stdout.strip() == "init"
    with pytest.raises(CorralError) as e:
        session.git_checkout("/workspace/no-such-repo", target_dir="/workspace/x")
    assert e.value.code == "git_failed", e.value


def test_watch_yields_the_events_of_a_directory(session):
    session.run("mkdir -p /workspace/watched")
    events = session.watch("/workspace/watched")
    assert next(events)["type"] == "watching"
    session.write("/workspace/watched/new.txt", b"hello")
    for event in events:
        if event.get("path") == "/workspace/watched/new.txt":
            assert event["type"] in ("create", "modify", "move"), event  # an upload lands by rename
            break
    events.close()


def test_read_text_counts_lines_as_corrald_does_at_newlines_only(session):
    # str.splitlines() would also split at \r, \x0c and U+2028: line 2 would be "b\x0c".
    session.write("lines.txt", "a\r\nb\x0cc\u2028d\ne\n")
    assert session.read_text("lines.txt", start_line=2, end_line=2) == "b\x0cc\u2028d\n"
    assert session.read_text("lines.txt", start_line=1, end_line=1) == "a\r\n"
    assert session.read_text("lines.txt", end_line=2) == "a\r\nb\x0cc\u2028d\n"
    assert session.read_text("lines.txt", start_line=3) == "e\n"
    assert session.read_text("lines.txt", start_line=4) == ""
    # An encoding in which "\n" is not the byte 0x0a: the client splits, by the same rule.
    session.write("lines16.txt", "x\r\ny\u2028z\nw".encode("utf-16"))
    assert session.read_text("lines16.txt", "utf-16", start_line=2, end_line=2) == "y\u2028z\n"
    assert session.read_text("lines16.txt", "utf-16", start_line=3) == "w"
    for start, end in ((0, 1), (3, 2), ("1", None)):
        with pytest.raises(CorralError) as e:
            session.read_text("lines.txt", start_line=start, end_line=end)
        assert e.value.code == "invalid"


def _assert_never_started(error, reason="chdir `/workspace/nope`: ENOENT"):
    assert (error.code, error.status) == ("setup_failed", 0), error
    assert reason in error.message, error.message
    assert error.record["status"] == "setup-failed"


def test_a_command_that_never_started_raises_setup_failed_with_corralds_reason(session):
    # A missing cwd is a setup failure, not an exit: no -1 with empty output (the TS client's bug).
    with pytest.raises(CorralError) as e:
        session.run("pwd", cwd="nope")
    _assert_never_started(e.value)
    assert e.value.record["exitCode"] is None
    with pytest.raises(CorralError) as e:
        session.run(["/no/such/program"])
    _assert_never_started(e.value, "execve `/no/such/program`: ENOENT")
    assert e.value.record["exitCode"] == 127, "the shell's number stays in the record"

    events = session.exec("pwd", cwd="nope")
    assert next(events)["type"] == "start"
    with pytest.raises(CorralError) as e:
        next(events)  # in place of the exit event
    _assert_never_started(e.value)
    with pytest.raises(CorralError) as e:
        session.spawn("pwd", cwd="nope")
    _assert_never_started(e.value)

    # The record of such a process, met later, says the same.
    p = session.process(e.value.record["id"])
    with pytest.raises(CorralError) as e:
        p.exit_code
    _assert_never_started(e.value)
    with pytest.raises(CorralError) as e:
        list(p.stream())
    _assert_never_started(e.value)
    assert p.wait(timeout_ms=1000)["error"].startswith("chdir `/workspace/nope`"), "raw records stay raw"


def test_a_timeout_is_told_apart_from_a_plain_sigterm(session):
    timed = session.run("sleep 30", timeout_ms=300)
    termed = session.run("kill -TERM $$")
    assert (timed.exit_code, timed.signal) == (termed.exit_code, termed.signal) == (143, "SIGTERM")
    assert (timed.status, timed.timed_out) == ("timeout", True)
    assert (termed.status, termed.timed_out) == ("signaled", False)
    assert "timeout" in repr(timed)
    exit_event = list(session.exec("sleep 30", timeout_ms=300))[-1]
    assert (exit_event["type"], exit_event["status"]) == ("exit", "timeout")
    p = session.spawn("sleep 30", timeout_ms=300)
    assert p.wait(timeout_ms=30000)["status"] == "timeout"
