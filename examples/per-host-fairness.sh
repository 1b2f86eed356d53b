#!/bin/bash
# Upstream shaping after a blog post about a DSL shaping script (credited in
# docs/examples.md).
# The post links its script without reproducing it, so this follows its
# description: shape just below the DSL's upstream rate so packets do not
# queue in the modem, hash the hosts of the LAN into buckets so no host can
# take more than its share, and give every bucket an fq_codel for flow
# fairness and low delay. Runs unchanged with sluice's `tc` first on PATH.

DEV=wan0          # the interface towards the DSL modem
UPLINK=900        # kbit/s: just below the line's 1000 kbit/s upstream
BUCKETS=8         # host buckets

# clean up, hide errors
tc qdisc del dev $DEV root 2> /dev/null > /dev/null

# shape everything at $UPLINK so the modem's buffer stays empty
tc qdisc add dev $DEV root handle 1: htb default 10
tc class add dev $DEV parent 1: classid 1:1 htb rate ${UPLINK}kbit

# one class per bucket: an equal guaranteed share, the whole link to borrow,
# so the busy buckets split the link evenly
for i in $(seq 0 $((BUCKETS - 1))); do
	CLASS=$(printf "%x" $((0x10 + i)))
	tc class add dev $DEV parent 1:1 classid 1:$CLASS htb \
		rate $((UPLINK / BUCKETS))kbit ceil ${UPLINK}kbit
	tc qdisc add dev $DEV parent 1:$CLASS fq_codel
done

# hosts to buckets 1:10 .. 1:17 by the hash of their address; nfct-src is the
# address before NAT (conntrack's original source), the packet's source
# address when there is no connection tracking
tc filter add dev $DEV parent 1: protocol all prio 1 handle 1 \
	flow hash keys nfct-src divisor $BUCKETS baseclass 1:10
