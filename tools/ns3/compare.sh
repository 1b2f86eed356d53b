#!/usr/bin/env bash
# sluice sim against ns-3 3.44 on the dumbbell of examples/dumbbell.toml,
# side by side. A manual check (not run by CI): README.md, "Validation
# against ns-3", shows its output and what it means.
#
#   tools/ns3/compare.sh     # ~70 MB download and a 20 s compile once, then ~30 s
#   NS3_ARGS="--minRto=1s --delAck=200ms --hyStartDelayMax=1s" tools/ns3/compare.sh
#                            # ns-3's own TCP timers instead of Linux's (dumbbell.cc says why)
#   SLUICE=path/to/sluice tools/ns3/compare.sh   # that binary, no cargo build
#
# It creates a venv under target/ (NS3_VENV overrides), pip-installs the
# `ns3==3.44.post0` wheel there (only for its C++ headers and shared
# libraries: --no-deps skips cppyy, which the Python bindings need and we
# do not), compiles tools/ns3/dumbbell.cc against it into target/ns3/, builds
# sluice, runs each case in both, and prints a table. Nothing it downloads or
# builds leaves target/.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${NS3_VENV:-target/ns3-venv}
out=target/ns3
mkdir -p "$out"

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -d "$site/ns3/include/ns3" ]; then
    "$venv/bin/pip" install --quiet --no-deps 'ns3==3.44.post0'
fi
ns3="$site/ns3"
lib="$ns3/lib64"

bin=$out/dumbbell
if [ ! -x "$bin" ] || [ tools/ns3/dumbbell.cc -nt "$bin" ]; then
    echo "compiling tools/ns3/dumbbell.cc against $ns3" >&2
    # The wheel's libraries were built with logging and asserts compiled in
    # (lib64/cmake/ns3Targets.cmake), so the headers get the same defines.
    g++ -std=c++20 -O1 -DNS3_LOG_ENABLE -DNS3_ASSERT_ENABLE \
        -I"$ns3/include" tools/ns3/dumbbell.cc -o "$bin" \
        -L"$lib" -Wl,-rpath,"$(cd "$lib" && pwd)" \
        -lns3.44-internet-apps -lns3.44-applications -lns3.44-point-to-point \
        -lns3.44-traffic-control -lns3.44-internet -lns3.44-network -lns3.44-core
fi

sluice=${SLUICE:-target/release/sluice}
if [ -z "${SLUICE:-}" ]; then
    cargo build --release --quiet -p sluice
fi

# case name | sluice arguments | ns-3 arguments. ns-3's buffer is the
# window it offers; Linux doubles SO_RCVBUF and offers 160/256 of that
# (docs/validation.md), so ns-3 gets the window the same request buys on
# Linux: 128 KiB -> 160 KiB, 4 MiB -> 5 MiB.
cases=(
    "pfifo_fast, 4 flows|--variant pfifo_fast|--qdisc=pfifo_fast --buf=163840"
    "pfifo 100, 4 flows|--variant pfifo_100|--qdisc=pfifo_100 --buf=163840"
    "fq_codel, 4 flows|--variant fq_codel|--qdisc=fq_codel --buf=163840"
    "pfifo_fast, 1 flow, 4 MiB|--variant pfifo_fast --set flows=1 --set buf=4MiB|--qdisc=pfifo_fast --flows=1 --buf=5242880"
)

# ns-3's TCP sends one segment per packet: so does sluice's sender here
# (`gso = false`; Linux's default hands qdiscs GSO packets of several).
scenario=$out/dumbbell.toml
sed '/^name = "sender"$/a gso = false' examples/dumbbell.toml >"$scenario"

results=$out/results.jsonl
: >"$results"
for c in "${cases[@]}"; do
    IFS='|' read -r name sargs nargs <<<"$c"
    echo "running: $name" >&2
    # shellcheck disable=SC2086 # the argument lists are meant to split
    s=$("$sluice" sim "$scenario" --json $sargs)
    # shellcheck disable=SC2086
    n=$("$bin" $nargs ${NS3_ARGS:-})
    printf '{"case":"%s","sluice":%s,"ns3":%s}\n' "$name" "$(tr -d '\n' <<<"$s")" "$n" >>"$results"
done

python3 - "$results" <<'EOF'
import json, sys

DURATION = 30.0
# Payload ceiling at 10 Mbit/s: 1448 payload bytes per frame. sluice
# accounts an Ethernet frame (1500 + 14 = 1514 bytes), ns-3's point-to-point
# device a PPP frame (1500 + 2 = 1502 bytes).
CEIL = {"sluice": 10 * 1448 / 1514, "ns-3": 10 * 1448 / 1502}

def sluice_row(r):
    run = r["runs"][0]
    flows = [f["bytes"] * 8 / DURATION / 1e6 for f in run["flows"]]
    p = run["pings"][0]
    return dict(flows=flows, ping=(p["min_ms"], p["median_ms"], p["avg_ms"], p["max_ms"]),
                lost=p["sent"] - p["received"], sent=p["sent"], drops=run["losses"]["egress"])

def ns3_row(r):
    flows = [f["bytes"] * 8 / DURATION / 1e6 for f in r["flows"]]
    p = r["ping"]
    b = r["bottleneck"]
    return dict(flows=flows, ping=(p["min_ms"], p["median_ms"], p["avg_ms"], p["max_ms"]),
                lost=p["sent"] - p["received"], sent=p["sent"],
                drops=b["qdisc_dropped"] + b["device_queue_dropped"])

print("| case | tool | goodput Mbit/s (of ceiling) | per flow Mbit/s | ping RTT min / median / avg / max ms | pings lost | drops |")
print("|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    c = json.loads(line)
    for tool, row in (("sluice", sluice_row(c["sluice"])), ("ns-3", ns3_row(c["ns3"]))):
        total = sum(row["flows"])
        per = (f"{min(row['flows']):.2f}–{max(row['flows']):.2f}"
               if len(row["flows"]) > 1 else "–")
        print(f"| {c['case'] if tool == 'sluice' else ''} | {tool} "
              f"| {total:.3f} ({100 * total / CEIL[tool]:.1f} %) | {per} "
              f"| {' / '.join(f'{x:.1f}' for x in row['ping'])} "
              f"| {row['lost']} of {row['sent']} | {row['drops']} |")
EOF
