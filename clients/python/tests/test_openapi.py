"""docs/openapi.yaml is the truth about corrald: its paths are exactly the routes corrald registers
(supervisor/daemon/api.cpp), every example validates against its schema, and the answers of a real
corrald validate against the schemas too."""

import json
import pathlib
import re

import pytest
import yaml

from schema_subset import SchemaError, Validator

REPO = pathlib.Path(__file__).resolve().parents[3]
DOC = yaml.safe_load((REPO / "docs/openapi.yaml").read_text())
VALIDATOR = Validator(DOC)
METHODS = {"get", "put", "post", "delete", "patch"}


def registered_routes():
    """(METHOD, pattern) of every route in Api::routes() (the table the router is built from)."""
    source = (REPO / "supervisor/daemon/api.cpp").read_text()
    table = source[source.index("routes() {"):source.index("return table;")]
    return set(re.findall(r'\{"(GET|PUT|POST|DELETE|PATCH)",\s*"(/[^"]*)"', table))


def documented_routes():
    return {(m.upper(), path) for path, item in DOC["paths"].items() for m in item if m in METHODS}


def deref(node):
    while isinstance(node, dict) and "$ref" in node:
        node = VALIDATOR.resolve(node["$ref"])
    return node


def test_document_is_openapi_3_1():
    assert DOC["openapi"].startswith("3.1")
    assert DOC["paths"]


def test_paths_are_the_routes_corrald_registers():
    registered, documented = registered_routes(), documented_routes()
    assert len(registered) > 20, "could not read the route table of api.cpp"
    assert registered - documented == set(), "routes corrald serves that docs/openapi.yaml lacks"
    assert documented - registered == set(), "documented paths corrald does not serve"


def test_every_path_parameter_is_declared():
    for path, item in DOC["paths"].items():
        for op_name, op in item.items():
            if op_name not in METHODS:
                continue
            declared = {deref(p)["name"] for p in item.get("parameters", []) + op.get("parameters", [])
                        if deref(p)["in"] == "path"}
            assert declared == set(re.findall(r"\{(\w+)\}", path)), (op_name, path)


def examples():
    """(where, value, schema) for every example of a JSON request or response body."""
    for path, item in DOC["paths"].items():
        for op_name, op in item.items():
            if op_name not in METHODS:
                continue
            bodies = [("request", deref(op.get("requestBody", {})))]
            bodies += [(status, deref(r)) for status, r in op.get("responses", {}).items()]
            for label, body in bodies:
                for media, content in (body or {}).get("content", {}).items():
                    if "json" not in media:
                        continue
                    found = []
                    if "example" in content:
                        found.append(("example", content["example"]))
                    for name, ex in content.get("examples", {}).items():
                        found.append((name, deref(ex)["value"]))
                    for name, value in found:
                        yield f"{op_name.upper()} {path} {label} {media} {name}", value, content["schema"]


def test_examples_validate_against_their_schemas():
    seen = 0
    for where, value, schema in examples():
        assert VALIDATOR.errors(value, schema) == [], where
        seen += 1
    assert seen >= 30


def test_the_validator_rejects_what_it_should():
    process = {"$ref": "#/components/schemas/Process"}
    good = deref({"$ref": "#/components/examples/Process"})["value"]
    assert VALIDATOR.errors(good, process) == []
    assert VALIDATOR.errors({**good, "extra": 1}, process)  # unevaluatedProperties
    assert VALIDATOR.errors({**good, "status": "napping"}, process)  # enum
    assert VALIDATOR.errors({k: v for k, v in good.items() if k != "pid"}, process)  # required
    assert VALIDATOR.errors({**good, "exitCode": "0"}, process)  # type
    event = {"$ref": "#/components/schemas/StreamEvent"}
    assert VALIDATOR.errors({"type": "stdout", "seq": 1, "offset": 0, "data": "x"}, event) == []
    assert VALIDATOR.errors({"type": "stdout", "seq": 1}, event)  # no branch matches
    with pytest.raises(SchemaError):
        VALIDATOR.errors(1, {"multipleOf": 2})


# ---- a real corrald's answers

def schema_of(method, path, status, media="application/json"):
    op = DOC["paths"][path][method]
    return deref(op["responses"][str(status)])["content"][media]["schema"]


def check(method, path, status, value):
    assert VALIDATOR.errors(value, schema_of(method, path, status)) == [], (method, path, value)


def test_real_answers_validate(daemon):
    c = daemon.client
    check("get", "/v1/health", 200, c.health())
    check("get", "/v1/policies", 200, c.policies())
    check("post", "/v1/policies/validate", 200, c.validate_policy("name: a\nextends: none\n"))
    check("post", "/v1/policies/validate", 200, c.validate_policy("name: a\nnope: 1\n"))
    s = c.create_session(policy="default")
    try:
        check("post", "/v1/sessions", 201, s.record)
        check("get", "/v1/sessions", 200, {"sessions": c.sessions()})
        run = s.run("echo hi; printf '\\377' >&2; exit 1")
        check("post", "/v1/sessions/{sid}/run", 200, run.record)
        for event in s.exec("echo streamed; printf '\\000\\000\\000\\000' "):
            assert VALIDATOR.errors(event, {"$ref": "#/components/schemas/StreamEvent"}) == [], event
        p = s.spawn("read x; echo $x", stdin_open=True)
        check("post", "/v1/sessions/{sid}/processes", 201, p.record)
        check("post", "/v1/sessions/{sid}/processes/{proc}/stdin", 200, p.write_stdin("v\n", eof=True))
        check("get", "/v1/sessions/{sid}/processes/{proc}/wait", 200, p.wait(timeout_ms=30000))
        check("get", "/v1/sessions/{sid}/processes/{proc}", 200, p.info())
        check("get", "/v1/sessions/{sid}/processes/{proc}/logs", 200, p.logs())
        check("get", "/v1/sessions/{sid}/processes", 200, {"processes": s.processes()})
        sleeper = s.spawn(["sleep", "300"])
        check("post", "/v1/sessions/{sid}/processes/{proc}/signal", 200, sleeper.signal("TERM"))
        sleeper = s.spawn(["sleep", "300"])
        check("delete", "/v1/sessions/{sid}/processes/{proc}", 200, sleeper.kill())
        check("put", "/v1/sessions/{sid}/files", 200, s.write("d/a.txt", "hello"))
        check("post", "/v1/sessions/{sid}/files/mkdir", 201, s.mkdir("d/e"))
        check("post", "/v1/sessions/{sid}/files/move", 200, s.move("d/a.txt", "d/b.txt"))
        check("get", "/v1/sessions/{sid}/files/list", 200, {"path": "d", "entries": s.list("d")})
        check("get", "/v1/sessions/{sid}/files/stat", 200, s.stat("d/b.txt"))
        check("delete", "/v1/sessions/{sid}/files", 200, s.delete("d", recursive=True))
        check("patch", "/v1/sessions/{sid}/env", 200, {"env": s.patch_env(set={"A": "1"})})
        lease = s.lease_port()
        check("post", "/v1/sessions/{sid}/ports", 201, lease)
        check("get", "/v1/sessions/{sid}/ports", 200, {"ports": s.ports()})
        endpoint = s._json("GET", f"/ports/{lease['port']}/endpoint", query={"protocol": "ws"})
        check("get", "/v1/sessions/{sid}/ports/{port}/endpoint", 200, endpoint)
        check("delete", "/v1/sessions/{sid}/ports/{port}", 200, s.release_port(lease["port"]))
        check("get", "/v1/sessions/{sid}", 200, s._json("GET"))
    finally:
        check("delete", "/v1/sessions/{sid}", 200, s.end())


def test_real_errors_validate(daemon):
    from corral import CorralError
    calls = (
        (lambda: daemon.client.session("nope"), 404),
        (lambda: daemon.client.create_session(policy_yaml="name: x\nlimits: {memory: lots}\n"), 422),
        (lambda: daemon.client.transport.json("POST", "/v1/sessions", json_body={"bogus": 1}), 400),
        (lambda: daemon.client.transport.json("GET", "/v1/nowhere"), 404),
    )
    for call, status in calls:
        with pytest.raises(CorralError) as e:
            call()
        assert e.value.status == status
        body = {"error": {"code": e.value.code, "message": e.value.message}}
        if e.value.diagnostics is not None:
            body["error"]["diagnostics"] = e.value.diagnostics
        assert VALIDATOR.errors(body, {"$ref": "#/components/schemas/Error"}) == [], body
