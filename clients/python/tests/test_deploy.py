"""deploy/kubernetes/corrald-daemonset.yaml asks for what corrald needs and no more host access:
privileged (namespaces, mounts, seccomp), hostPID false, the cgroup, state and socket mounts, and
only flags corrald really takes."""

import pathlib
import re

import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
MANIFEST = yaml.safe_load((REPO / "deploy/kubernetes/corrald-daemonset.yaml").read_text())


def test_daemonset_shape():
    assert MANIFEST["kind"] == "DaemonSet"
    pod = MANIFEST["spec"]["template"]["spec"]
    assert pod["hostPID"] is False and pod["hostIPC"] is False and pod["hostNetwork"] is False
    (container,) = pod["containers"]
    assert container["securityContext"]["privileged"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/sys/fs/cgroup"]]["hostPath"]["path"] == "/sys/fs/cgroup"
    assert volumes[mounts["/var/lib/corral"]]["hostPath"]["path"] == "/var/lib/corral"
    assert volumes[mounts["/run/corral"]]["hostPath"]["path"] == "/run/corral"


def test_daemonset_flags_are_corralds_own():
    known = set(re.findall(r'name == "(--[a-z-]+)"',
                           (REPO / "supervisor/daemon/daemon_options.cpp").read_text()))
    (container,) = MANIFEST["spec"]["template"]["spec"]["containers"]
    args = dict(a.split("=", 1) for a in container["args"])
    assert set(args) <= known, set(args) - known
    assert args["--socket"].startswith("/run/corral/")
    assert args["--state-dir"] == "/var/lib/corral"
