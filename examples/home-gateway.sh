#!/bin/bash
# The home-gateway policy of "Journey to the Center of the Linux Kernel:
# Traffic Control, Shaping and QoS" by Julien Vehent (its section "Shaping
# the traffic on the Home Network"), run unchanged by bash with sluice's tc
# and iptables links first on PATH. The article prints the SSH block
# verbatim and, for the other classes, the script's progress lines, its
# `tc qdisc show` and one `tc -s class show` entry; the commands of those
# classes are rebuilt here from those lines (ids, rates, ceils, prios, leaf
# qdiscs). Marks are set on a connection's first packet with CONNMARK and
# copied to every packet by `--restore-mark`, as the article explains; bare
# TCP ACKs are marked last. The article's `-dport 22` (which iptables
# refuses: `-d port`, then a stray `22`) is its script's `--dport 22`; its
# `/sbin/` prefixes are dropped so that the links on PATH are the tools
# that run.

IFACE=eth0
echo "~~~~ LOADING $IFACE TRAFFIC CONTROL RULES ~~~~"
echo "#-cleanup"
tc qdisc del dev $IFACE root 2> /dev/null
echo "#-define a HTB root qdisc"
tc qdisc add dev $IFACE root handle 1: htb default 999 r2q 40
echo "#--uplink - rate 1600 kbit ceil 1600 kbit"
tc class add dev $IFACE parent 1:0 classid 1:1 htb rate 1600kbit ceil 1600kbit

echo "#---interactive - id 100 - rate 160 kbit ceil 1600 kbit"
tc class add dev $IFACE parent 1:1 classid 1:100 htb rate 160kbit ceil 1600kbit burst 15k prio 1
echo "#--- ~ sub interactive: pfifo"
tc qdisc add dev $IFACE parent 1:100 handle 1100: pfifo limit 10
echo "#--- ~ interactive filter"
tc filter add dev $IFACE parent 1:0 protocol ip prio 1 handle 100 fw flowid 1:100
echo "#--- ~ netfilter rule - all UDP traffic at 100"
iptables -t mangle -A POSTROUTING -o $IFACE -p udp -j CONNMARK --set-mark 100
# (sluice: ping is what this scenario measures latency with; it rides with UDP)
iptables -t mangle -A POSTROUTING -o $IFACE -p icmp -j CONNMARK --set-mark 100

echo "#---tcp acks - id 200 - rate 320 kbit ceil 1600 kbit"
tc class add dev $IFACE parent 1:1 classid 1:200 htb rate 320kbit ceil 1600kbit burst 15k prio 2
echo "#--- ~ sub tcp acks: pfifo"
tc qdisc add dev $IFACE parent 1:200 handle 1200: pfifo limit 10
echo "#--- ~ filtre tcp acks"
tc filter add dev $IFACE parent 1:0 protocol ip prio 2 handle 200 fw flowid 1:200
echo "#--- ~ netfilter rule for TCP ACKs will be loaded at the end"

# SSH class: for outgoing connections to
# avoid lag when somebody else is downloading
# however, an SSH connection cannot fill up
# the connection to more than 70%
echo "#---ssh - id 300 - rate 160 kbit ceil 1120 kbit"
tc class add dev eth0 parent 1:1 classid 1:300 htb \
    rate 160kbit ceil 1120kbit burst 15k prio 3
# SFQ will mix the packets if there are several
# SSH connections in parallel
# and ensure that none has the priority
echo "#--- ~ sub ssh: sfq"
tc qdisc add dev eth0 parent 1:300 handle 1300: \
    sfq perturb 10 limit 32
echo "#--- ~ ssh filter"
tc filter add dev eth0 parent 1:0 protocol ip \
    prio 3 handle 300 fw flowid 1:300
echo "#--- ~ netfilter rule - SSH at 300"
iptables -t mangle -A POSTROUTING -o eth0 -p tcp --tcp-flags SYN SYN --dport 22 -j CONNMARK \
    --set-mark 300

echo "#---http branch - id 400 - rate 800 kbit ceil 1600 kbit"
tc class add dev $IFACE parent 1:1 classid 1:400 htb rate 800kbit ceil 1600kbit burst 30k prio 4
echo "#--- ~ sub http branch: sfq"
tc qdisc add dev $IFACE parent 1:400 handle 1400: sfq perturb 10 limit 32
echo "#--- ~ http branch filter"
tc filter add dev $IFACE parent 1:0 protocol ip prio 4 handle 400 fw flowid 1:400
echo "#--- ~ netfilter rule - http/s"
iptables -t mangle -A POSTROUTING -o $IFACE -p tcp --tcp-flags SYN SYN -m multiport --dports 80,443 -j CONNMARK --set-mark 400

echo "#---default - id 999 - rate 160kbit ceil 1600kbit"
tc class add dev $IFACE parent 1:1 classid 1:999 htb rate 160kbit ceil 1600kbit burst 15k prio 9
echo "#--- ~ sub default: sfq"
tc qdisc add dev $IFACE parent 1:999 handle 1999: sfq perturb 10 limit 32
echo "#--- ~ filtre default"
tc filter add dev $IFACE parent 1:0 protocol ip prio 99 handle 999 fw flowid 1:999

echo "#--- ~ propagating marks on connections"
iptables -t mangle -A POSTROUTING -j CONNMARK --restore-mark

echo "#--- ~ Mark TCP ACKs flags at 200"
iptables -t mangle -A POSTROUTING -o $IFACE -p tcp --tcp-flags SYN,RST,FIN,ACK ACK -m length --length :64 -j MARK --set-mark 200

echo "Traffic Control is up and running"
