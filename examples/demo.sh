#!/bin/bash
# The main job until the simulator lands: run a published tc script unchanged
# against a userspace device and show what tc would show. Needs no root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
cargo build --release -q -p sluice || exit 1
bin="$PWD/target/release/sluice"
links=$(mktemp -d); state=$(mktemp -d)
trap 'rm -rf "$links" "$state"' EXIT
ln -s "$bin" "$links/tc"; ln -s "$bin" "$links/ip"
export SLUICE_STATE_DIR="$state" PATH="$links:$PATH"
ip link add dev ppp0 type dummy && ip link set dev ppp0 up
script=${1:-$here/ultimate-traffic-conditioner-htb.sh}
echo "### bash $script  (tc = sluice)"
bash "$script"
echo "### tc -s -d qdisc show dev ppp0"
tc -s -d qdisc show dev ppp0
echo "### tc -s -d class show dev ppp0"
tc -s -d class show dev ppp0
echo "### tc filter show dev ppp0"
tc filter show dev ppp0
