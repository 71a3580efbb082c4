# shellcheck shell=bash
# netns.sh - test "hosts" as network namespaces, sourced by the tests that
# need a real network hop (tests/netns/check_netns_relays.sh,
# deploy/scenario.sh's consumer 2): a bridge in the root namespace, one namespace per host
# with a veth pair onto it, and nftables cuts inside a host. Addresses are
# in 198.18.0.0/15 ONLY (RFC 2544, reserved for network tests): never a
# real host, never the private ranges.
#
#   . scripts/netns.sh
#   netns_sweep PREFIX [LINKPFX]  remove the leftovers of runs that were
#                                 SIGKILLed (no trap ran): everything named
#                                 PREFIX<pid>... whose pid is gone
#   netns_net PREFIX<pid>         a bridge PREFIX<pid>br with a free
#                                 198.18.X.1/24; sets NETNS_BR, NETNS_SUBNET
#                                 (198.18.X), NETNS_GW (198.18.X.1)
#   netns_host PREFIX<pid> L N    host L (one letter) = namespace
#                                 PREFIX<pid>L with 198.18.X.N/24 on a veth
#                                 pair onto the bridge; prints its address
#   netns_pair NS HOSTIF NSIF HOSTIP NSIP LEN
#                                 namespace NS joined to the root namespace
#                                 by one veth pair, no bridge (HOSTIP/LEN on
#                                 HOSTIF here, NSIP/LEN on NSIF in NS)
#   netns_cut NS IP PORT          drop TCP to and from IP:PORT in NS, both
#                                 ways (an nftables table 'obcut' in NS)
#   netns_restore NS              remove that table
#   netns_cut_link TABLE IF       drop everything in and out of IF, in the
#                                 root namespace (nftables table TABLE)
#   netns_restore_link TABLE      remove that table
#   netns_teardown PREFIX<pid>    the hosts (their veths and nft tables go
#                                 with them) and the bridge
#
# Every function returns non-zero with a message on stderr when the kernel
# or a tool refuses; nothing here exits the caller. Root is needed.

# netns_sweep PREFIX [LINKPREFIX...]: namespaces PREFIX<pid>[letter] (their
# veths and tables go with them), root tables inet PREFIX<pid>, links
# PREFIX<pid>... and LINKPREFIX<pid>... left in the root namespace
netns_sweep() {
	local prefix=$1 ns pid link table
	shift
	for ns in $(ip netns list 2>/dev/null | grep -oE "^${prefix}[0-9]+[a-z]?"); do
		pid=${ns#"$prefix"}; pid=${pid%%[a-z]}
		kill -0 "$pid" 2>/dev/null && continue
		echo "netns: removing the leftover namespace $ns of dead run $pid" >&2
		ip netns del "$ns" 2>/dev/null
	done
	if command -v nft >/dev/null; then
		for table in $(nft list tables inet 2>/dev/null | grep -oE "${prefix}[0-9]+$"); do
			pid=${table#"$prefix"}
			kill -0 "$pid" 2>/dev/null && continue
			echo "netns: removing the leftover nftables table $table of dead run $pid" >&2
			nft delete table inet "$table" 2>/dev/null
		done
	fi
	local p
	for p in "$prefix" "$@"; do # links left in the root namespace: bridges, veths
		for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
			grep -E "^${p}[0-9]+([a-z]+)?$"); do
			pid=${link#"$p"}; pid=${pid%%[a-z]*}
			kill -0 "$pid" 2>/dev/null && continue
			echo "netns: removing the leftover link $link of dead run $pid" >&2
			ip link del "$link" 2>/dev/null
		done
	done
	return 0
}

# netns_net TAG: the bridge, on a /24 of 198.18.0.0/16 that no interface
# uses (198.19.0.0/16 is scripts/docker-tmp.sh's address pool)
netns_net() {
	local tag=$1 x tries
	for tries in 1 2 3 4 5 6 7 8 9 10; do
		x=$((RANDOM % 256))
		ip -4 addr show | grep -q "inet 198\.18\.$x\." || break
		[ "$tries" = 10 ] && { echo "netns: no free 198.18.X.0/24 found" >&2; return 1; }
	done
	NETNS_BR="${tag}br" NETNS_SUBNET="198.18.$x" NETNS_GW="198.18.$x.1"
	ip link add "$NETNS_BR" type bridge &&
		ip addr add "$NETNS_GW/24" dev "$NETNS_BR" &&
		ip link set "$NETNS_BR" up ||
		{ echo "netns: cannot make bridge $NETNS_BR" >&2; return 1; }
}

# netns_host TAG LETTER N
netns_host() {
	local tag=$1 l=$2 ns="$1$2" ip="$NETNS_SUBNET.$3"
	ip netns add "$ns" &&
		ip link add "${tag}h$l" type veth peer name "${tag}n$l" &&
		ip link set "${tag}h$l" master "$NETNS_BR" &&
		ip link set "${tag}h$l" up &&
		ip link set "${tag}n$l" netns "$ns" &&
		ip netns exec "$ns" ip addr add "$ip/24" dev "${tag}n$l" &&
		ip netns exec "$ns" ip link set "${tag}n$l" up &&
		ip netns exec "$ns" ip link set lo up ||
		{ echo "netns: cannot make host $ns ($ip)" >&2; return 1; }
	echo "$ip"
}

# netns_pair NS HOSTIF NSIF HOSTIP NSIP LEN
netns_pair() {
	local ns=$1 hif=$2 nif=$3 hip=$4 nip=$5 len=$6
	ip netns add "$ns" &&
		ip link add "$hif" type veth peer name "$nif" &&
		ip link set "$nif" netns "$ns" &&
		ip addr add "$hip/$len" dev "$hif" &&
		ip link set "$hif" up &&
		ip netns exec "$ns" ip addr add "$nip/$len" dev "$nif" &&
		ip netns exec "$ns" ip link set "$nif" up &&
		ip netns exec "$ns" ip link set lo up ||
		{ echo "netns: cannot make $ns ($nip, veth $hif)" >&2; ip link del "$hif" 2>/dev/null;
		  ip netns del "$ns" 2>/dev/null; return 1; }
}

# netns_cut_link TABLE IF
netns_cut_link() {
	nft add table inet "$1" &&
		nft add chain inet "$1" out '{ type filter hook output priority 0; policy accept; }' &&
		nft add chain inet "$1" in '{ type filter hook input priority 0; policy accept; }' &&
		nft add rule inet "$1" out oifname "$2" drop &&
		nft add rule inet "$1" in iifname "$2" drop ||
		{ echo "netns: cannot cut $2" >&2; return 1; }
}

# netns_restore_link TABLE
netns_restore_link() {
	nft delete table inet "$1" || { echo "netns: cannot restore (table $1)" >&2; return 1; }
}

# netns_cut NS IP PORT
netns_cut() {
	local ns=$1 ip=$2 port=$3
	ip netns exec "$ns" nft add table inet obcut &&
		ip netns exec "$ns" nft add chain inet obcut out '{ type filter hook output priority 0; policy accept; }' &&
		ip netns exec "$ns" nft add chain inet obcut in '{ type filter hook input priority 0; policy accept; }' &&
		ip netns exec "$ns" nft add rule inet obcut out ip daddr "$ip" tcp dport "$port" drop &&
		ip netns exec "$ns" nft add rule inet obcut in ip saddr "$ip" tcp sport "$port" drop ||
		{ echo "netns: cannot cut $ns from $ip:$port" >&2; return 1; }
}

# netns_restore NS
netns_restore() {
	ip netns exec "$1" nft delete table inet obcut ||
		{ echo "netns: cannot restore $1" >&2; return 1; }
}

# netns_teardown TAG
netns_teardown() {
	local tag=$1 ns
	for ns in $(ip netns list 2>/dev/null | grep -oE "^${tag}[a-z]"); do
		ip netns del "$ns" 2>/dev/null
	done
	ip link del "${tag}br" 2>/dev/null
	return 0
}
