# tests/dist/netns_hosts.sh - network hosts of the test's own on this one
# machine, for the multi-host tests (sourced by POSIX sh; docs/distributed.md,
# "Several hosts on one machine").
#
# hosts_up N makes N hosts h1..hN: each a network namespace with an eth0
# (10.77.0.K/24) on a bridge that lives in a namespace of its own, so no
# address or route of the machine's is touched and parallel runs (each with
# its own prefix, from the shell's pid) cannot collide. Each host's
# /etc/hosts (ip netns exec mounts /etc/netns/NS/hosts over it) names every
# host, and a command run on a host sees the host's name as its hostname (a
# UTS namespace of its own), so OpenMPI and the instances know where they are.
# OpenMPI starts the remote daemons through $HOSTS_DIR/agent (plm_rsh_agent,
# in place of ssh); $HOSTS_MPI holds the mpirun flags that bind its TCP
# traffic (MPI's and its own) to the hosts' network. hosts_down kills every
# process left on the hosts and deletes everything; callers trap it on EXIT
# (hosts_workdir does).
#
# Needs root, iproute2 (ip) and util-linux (unshare); hosts_can explains why
# not (the caller skips with exit 77).
#
# A link with a delay: this kernel has no netem, so with HOSTS_DELAY_MS set
# (before hosts_up; 0 is allowed) every host's link is a pair of TAP devices,
# eth0 on the host and pK on the bridge, joined by tg_delay_link
# ($HOSTS_DELAY_LINK, tests/dist/delay_link.c) in place of a veth pair: it
# holds each frame the host sends for that many ms, as `netem delay` on the
# host's eth0 would, so between two such hosts the round trip grows by twice
# it. host_delay K MS sets another delay on host K's link; host_rate still
# limits the rate (tbf on the TAP devices). The forwarders must be started
# by the test's own shell (not a subshell): they end with it.

HOSTS_NET=10.77.0
HOSTS_PREFIX=tgh$$-
HOSTS_N=0

hosts_can() { # prints the reason and fails when hosts cannot be made here
    [ "$(id -u)" = 0 ] || { echo "not root: network namespaces need root"; return 1; }
    command -v ip >/dev/null 2>&1 || { echo "no ip (iproute2)"; return 1; }
    command -v unshare >/dev/null 2>&1 || { echo "no unshare (util-linux)"; return 1; }
    ip netns add "${HOSTS_PREFIX}probe" 2>/dev/null ||
        { echo "ip netns add fails here (no CAP_SYS_ADMIN, or no namespaces in this kernel)"; return 1; }
    ip netns del "${HOSTS_PREFIX}probe"
}

# hosts_workdir: a directory of the caller's own, W, which it enters; it is
# deleted with the hosts when the shell exits (also after INT or TERM). Lets
# OpenMPI run as root. fail MESSAGE: prints it and the end of every log in W
# (progress lines left out), exits 1.
hosts_workdir() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    W=$(mktemp -d) || exit 1
    trap 'hosts_down; rm -rf "$W"' EXIT
    trap 'exit 1' INT TERM
    cd "$W" || exit 1
}
fail() {
    echo "FAIL: $*"
    for f in "$W"/*.log; do
        echo "--- $f"
        grep -v '^epoch [0-9]*/' "$f" | tail -25
    done
    exit 1
}

# hosts_up N DIR: DIR gets the agent script; sets HOSTS_DIR, HOSTS_MPI
hosts_up() {
    HOSTS_N=$1
    HOSTS_DIR=$2
    br=${HOSTS_PREFIX}br
    ip netns add "$br" || return 1
    ip -n "$br" link add br0 type bridge && ip -n "$br" link set br0 up || return 1
    names="127.0.0.1 localhost"
    k=1
    while [ $k -le "$HOSTS_N" ]; do
        names="$names
$HOSTS_NET.$k h$k"
        k=$((k + 1))
    done
    k=1
    while [ $k -le "$HOSTS_N" ]; do
        ns=${HOSTS_PREFIX}h$k
        ip netns add "$ns" || return 1
        if [ -n "${HOSTS_DELAY_MS:-}" ]; then
            ip -n "$ns" tuntap add dev eth0 mode tap && ip -n "$br" tuntap add dev p$k mode tap &&
                host_delay_start $k "$HOSTS_DELAY_MS" || return 1
        else
            ip link add eth0 netns "$ns" type veth peer name p$k netns "$br" || return 1
        fi
        ip -n "$br" link set p$k master br0 up &&
            ip -n "$ns" addr add "$HOSTS_NET.$k/24" dev eth0 &&
            ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || return 1
        mkdir -p "/etc/netns/$ns" && printf '%s\n' "$names" >"/etc/netns/$ns/hosts" || return 1
        k=$((k + 1))
    done
    # ssh's role: agent HOST COMMAND... runs the command on that host
    cat >"$HOSTS_DIR/agent" <<EOF
#!/bin/sh
h=\$1
shift
ip netns pids "${HOSTS_PREFIX}\$h" >/dev/null 2>&1 || { echo "agent: no host \$h" >&2; exit 255; }
exec ip netns exec "${HOSTS_PREFIX}\$h" unshare --uts sh -c "hostname \$h && \$*"
EOF
    chmod +x "$HOSTS_DIR/agent"
    HOSTS_MPI="--mca plm_rsh_agent $HOSTS_DIR/agent --mca btl tcp,vader,self"
    HOSTS_MPI="$HOSTS_MPI --mca btl_tcp_if_include $HOSTS_NET.0/24 --mca oob_tcp_if_include $HOSTS_NET.0/24"
}

# on_host K COMMAND...: run a command on host hK (as hK)
on_host() {
    h=h$1
    shift
    ip netns exec "${HOSTS_PREFIX}$h" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@"
}

# the bridge's side of host K's link: a cable pulled (down) or put back (up)
host_link() { # K up|down
    ip -n "${HOSTS_PREFIX}br" link set "p$1" "$2" || return 1
    [ "$2" = up ] || return 0
    # the other hosts' ARP entries for host K failed while it was down, and a
    # failed entry refuses connections to it (EHOSTUNREACH) until the kernel
    # probes again: mpirun then could not start its daemon there ("ORTE was
    # unable to reliably start one or more daemons")
    k=1
    while [ $k -le "$HOSTS_N" ]; do
        ip -n "${HOSTS_PREFIX}h$k" neigh flush all 2>/dev/null
        k=$((k + 1))
    done
}

# whether links can have a delay here (prints why not): /dev/net/tun and the
# forwarder, $HOSTS_DELAY_LINK
host_delay_can() {
    [ -c /dev/net/tun ] || { echo "no /dev/net/tun (TUN/TAP devices)"; return 1; }
    [ -x "${HOSTS_DELAY_LINK:-}" ] ||
        { echo "no forwarder at '${HOSTS_DELAY_LINK:-}' (HOSTS_DELAY_LINK: build/tests/tg_delay_link)"; return 1; }
}

# host K's forwarder, holding what the host sends for MS ms (what it
# receives passes at once: the other host's link holds that)
host_delay_start() { # K MS
    dl_log=$HOSTS_DIR/delay$1.log
    "$HOSTS_DELAY_LINK" -d "$2" -D 0 "${HOSTS_PREFIX}h$1:eth0" "${HOSTS_PREFIX}br:p$1" >"$dl_log" 2>&1 &
    echo $! >"$HOSTS_DIR/delay$1.pid"
    dl_tries=0
    until grep -qs "^ready" "$dl_log"; do
        dl_tries=$((dl_tries + 1))
        [ $dl_tries -le 100 ] && kill -0 "$(cat "$HOSTS_DIR/delay$1.pid")" 2>/dev/null ||
            { echo "host h$1's delay link did not start: $(cat "$dl_log")" >&2; return 1; }
        sleep 0.05
    done
}

# host K's link holds what the host sends for MS ms from now on (a new
# forwarder on the same devices; frames in flight are lost, as on a cable
# swapped, and TCP sends them again)
host_delay() { # K MS
    dl_pid=$(cat "$HOSTS_DIR/delay$1.pid" 2>/dev/null) ||
        { echo "host h$1 has no delay link (set HOSTS_DELAY_MS before hosts_up)" >&2; return 1; }
    kill "$dl_pid" 2>/dev/null
    wait "$dl_pid" 2>/dev/null # the shell's own child: reaped; another's: watched below
    dl_tries=0
    while kill -0 "$dl_pid" 2>/dev/null && [ $dl_tries -lt 100 ]; do
        sleep 0.05
        dl_tries=$((dl_tries + 1))
    done
    host_delay_start "$1" "$2"
}

# whether links can be rate-limited here (prints why not)
host_rate_can() {
    command -v tc >/dev/null 2>&1 || { echo "no tc (iproute2)"; return 1; }
    err=$(tc -n "${HOSTS_PREFIX}br" qdisc add dev p1 root tbf rate 100mbit burst 32kbit latency 400ms 2>&1) ||
        { echo "tc cannot add a tbf qdisc here: $err"; return 1; }
    tc -n "${HOSTS_PREFIX}br" qdisc del dev p1 root
}

# host K's link limited to RATE (tc's token bucket filter, both directions)
host_rate() { # K RATE (e.g. 10mbit)
    tc -n "${HOSTS_PREFIX}br" qdisc replace dev "p$1" root tbf rate "$2" burst 32kbit latency 400ms &&
        tc -n "${HOSTS_PREFIX}h$1" qdisc replace dev eth0 root tbf rate "$2" burst 32kbit latency 400ms
}

hosts_down() {
    for f in "${HOSTS_DIR:-/nonexistent}"/delay*.pid; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$HOSTS_PREFIX"); do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
        rm -rf "/etc/netns/$ns"
    done
}
