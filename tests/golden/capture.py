#!/usr/bin/env python3
"""Capture golden outputs of the real iproute2 `tc`/`ip` against the real kernel.

Usage (as root, on a machine where `ip netns add` works):

    python3 tests/golden/capture.py                 # all tests/golden/cases/*.cmds
    python3 tests/golden/capture.py cases/htb.cmds  # only some inputs

For every input tests/golden/cases/NAME.cmds the result is written to
tests/golden/NAME.golden.  See tests/golden/README.md for both formats.

Every case runs in a freshly created network namespace (NETNS below) that
holds a veth pair v0/v1 with one tx and one rx queue, fixed MAC addresses and
IPv6 disabled (so no packet is ever sent spontaneously and all counters stay
at 0).  Commands are run as `ip netns exec NETNS <argv>`; nothing is sent
outside the namespace.  In commands DEV/PEER are replaced by v0/v1 before
running; in captured output v0/v1 (as whole words) are replaced by DEV/PEER.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = "gold"
DEV, PEER = "v0", "v1"
DEV_MAC, PEER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
TIMEOUT = 20
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LANG": "C", "LC_ALL": "C", "TERM": "dumb"}


def sh(argv, check=True):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=ENV, timeout=TIMEOUT)
    if check and r.returncode != 0:
        raise RuntimeError("setup command failed: %s: %s" % (argv, r.stderr))
    return r


def netns_exists():
    r = sh(["ip", "netns", "list"], check=False)
    return any(l.split()[0] == NETNS for l in r.stdout.decode().splitlines() if l.strip())


def teardown():
    if netns_exists():
        sh(["ip", "netns", "del", NETNS], check=False)


def setup(mode):
    """mode: 'up' (default), 'down' (veth created, never brought up), 'none' (no veth),
    'up6' (as 'up' with IPv6 left enabled, then 3 s for the link-locals' DAD)."""
    teardown()
    sh(["ip", "netns", "add", NETNS])
    for k in ("all", "default"):
        if mode != "up6":
            sh(["ip", "netns", "exec", NETNS, "sysctl", "-qw",
                "net.ipv6.conf.%s.disable_ipv6=1" % k], check=False)
    if mode == "none":
        return
    sh(["ip", "-n", NETNS, "link", "add", DEV, "numtxqueues", "1", "numrxqueues", "1",
        "address", DEV_MAC, "type", "veth", "peer", "name", PEER,
        "numtxqueues", "1", "numrxqueues", "1", "address", PEER_MAC])
    if mode in ("up", "up6"):
        sh(["ip", "-n", NETNS, "link", "set", DEV, "up"])
        sh(["ip", "-n", NETNS, "link", "set", PEER, "up"])
    if mode == "up6":
        time.sleep(3)


SUB_IN = [(re.compile(r"\bDEV\b"), DEV), (re.compile(r"\bPEER\b"), PEER)]
SUB_OUT = [(re.compile(r"\b%s\b" % DEV), "DEV"), (re.compile(r"\b%s\b" % PEER), "PEER")]


def subst(s, subs):
    for rx, rep in subs:
        s = rx.sub(rep, s)
    return s


def parse_cmds(path):
    """Returns list of cases: dict(name, setup, comments, files, cmds)."""
    cases = []
    header = []
    cur = None
    curfile = None
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("### case:"):
                cur = {"name": line[len("### case:"):].strip(), "setup": "up",
                       "items": []}
                cases.append(cur)
                curfile = None
                continue
            if cur is None:
                if line.startswith("#") or not line.strip():
                    header.append(line)
                    continue
                raise SystemExit("%s: command before first case: %r" % (path, line))
            if line.startswith("%unstable"):
                cur["unstable"] = line[len("%unstable"):].strip()
            elif line.startswith("%sleep "):
                cur["items"].append(("sleep", float(line.split()[1])))
            elif line.startswith("%setup "):
                cur["setup"] = line.split()[1]
                assert cur["setup"] in ("up", "down", "none", "up6"), line
            elif line.startswith("%file "):
                curfile = line.split()[1]
                cur["items"].append(("file", curfile, []))
            elif line.startswith("%|"):
                assert cur["items"] and cur["items"][-1][0] == "file", line
                cur["items"][-1][2].append(line[3:] if line.startswith("%| ") else line[2:])
            elif line.startswith("#"):
                cur["items"].append(("comment", line))
            elif not line.strip():
                continue
            else:
                cmd = line[2:] if line.startswith("$ ") else line
                cur["items"].append(("cmd", cmd))
    return header, cases


def out_lines(data, prefix):
    res = []
    if not data:
        return res
    text = data.decode("utf-8", errors="backslashreplace")
    text = subst(text, SUB_OUT)
    noeol = not text.endswith("\n")
    lines = text.split("\n")
    if not noeol:
        lines = lines[:-1]
    for l in lines:
        res.append(prefix + l)
    if noeol:
        res.append("%noeol " + prefix.strip())
    return res


def run_case(case, tmpdir):
    out = ["### case: " + case["name"]]
    if case["setup"] != "up":
        out.append("%setup " + case["setup"])
    if case.get("unstable"):
        out.append("%unstable " + case["unstable"])
    setup(case["setup"])
    # clean scratch dir for %file items
    for fn in os.listdir(tmpdir):
        os.unlink(os.path.join(tmpdir, fn))
    for item in case["items"]:
        if item[0] == "comment":
            out.append(item[1])
        elif item[0] == "sleep":
            out.append("%%sleep %g" % item[1])
            time.sleep(item[1])
        elif item[0] == "file":
            _, name, lines = item
            out.append("%file " + name)
            for l in lines:
                out.append("%| " + l)
            with open(os.path.join(tmpdir, name), "w") as f:
                for l in lines:
                    f.write(subst(l, SUB_IN) + "\n")
        else:
            cmd = item[1]
            out.append("$ " + cmd)
            argv = shlex.split(subst(cmd, SUB_IN))
            assert argv[0] in ("tc", "ip"), cmd
            try:
                r = subprocess.run(["ip", "netns", "exec", NETNS] + argv,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, cwd=tmpdir, env=ENV,
                                   timeout=TIMEOUT)
                out += out_lines(r.stdout, "> ")
                out += out_lines(r.stderr, "! ")
                rc = r.returncode
                if rc < 0:  # killed by signal: report like a shell would
                    rc = 128 - rc
                out.append("? %d" % rc)
            except subprocess.TimeoutExpired:
                out.append("! <timeout>")
                out.append("? timeout")
    return out


def main():
    if os.geteuid() != 0:
        raise SystemExit("must run as root")
    args = sys.argv[1:]
    if not args:
        d = os.path.join(HERE, "cases")
        args = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".cmds"))
    tmpdir = tempfile.mkdtemp(prefix="golden-")
    tcv = sh(["tc", "-V"]).stdout.decode().strip()
    uname = sh(["uname", "-r"]).stdout.decode().strip()
    total_cases = total_cmds = 0
    try:
        for path in args:
            header, cases = parse_cmds(path)
            base = os.path.splitext(os.path.basename(path))[0]
            res = ["# golden output captured by tests/golden/capture.py from %s"
                   % os.path.relpath(os.path.abspath(path), HERE),
                   "# %s; kernel %s" % (tcv, uname)]
            res += [h for h in header if h.strip()]
            for c in cases:
                res += run_case(c, tmpdir)
                total_cases += 1
                total_cmds += sum(1 for i in c["items"] if i[0] == "cmd")
            with open(os.path.join(HERE, base + ".golden"), "w") as f:
                f.write("\n".join(res) + "\n")
            print("%s: %d cases" % (base, len(cases)), file=sys.stderr)
    finally:
        teardown()
        for fn in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, fn))
        os.rmdir(tmpdir)
    print("total: %d cases, %d commands" % (total_cases, total_cmds), file=sys.stderr)


if __name__ == "__main__":
    main()
