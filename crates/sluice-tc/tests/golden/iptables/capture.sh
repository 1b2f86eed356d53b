#!/bin/bash
# Capture what the real iptables prints for each command of a .cmds file:
#   unshare -n bash capture.sh NAME.cmds > NAME.golden
# Run it inside a fresh network namespace (unshare -n as root) so that the
# commands start from empty tables and change nothing outside. Each line of
# the .cmds file is one iptables command line (words split on blanks); lines
# starting with # are comments. The golden file holds, per command, a
# "### iptables ARGS" line, its stdout, its stderr and "rc=N".
# Captured with iptables-legacy 1.8.9 (Debian 12) on Linux 6.x.
set -f
IPT=${IPT:-iptables-legacy}
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  echo "### iptables $line"
  out=$($IPT $line 2>/tmp/capture.err); rc=$?
  [ -n "$out" ] && printf '%s\n' "$out"
  cat /tmp/capture.err
  echo "rc=$rc"
done < "$1"
