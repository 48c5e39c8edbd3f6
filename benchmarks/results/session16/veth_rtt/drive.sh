#!/bin/bash
NA=vbA; NB=vbB
ip netns del $NA 2>/dev/null; ip netns del $NB 2>/dev/null
ip netns add $NA; ip netns add $NB
ip link add vbx type veth peer name vby
ip link set vbx netns $NA name veth0; ip link set vby netns $NB name veth0
ip -n $NA addr add 10.91.0.1/24 dev veth0; ip -n $NB addr add 10.91.0.2/24 dev veth0
for ns in $NA $NB; do ip -n $ns link set lo up; ip -n $ns link set veth0 up; done
PY=/work/main/.venv/bin/python
port=14000
for r in 1 2 3; do
for cfg in asyncio ucxgo:thread ucxgo:loop; do
  b=${cfg%%:*}; m=${cfg#*:}; port=$((port+1))
  export UCX_TLS=tcp UCX_NET_DEVICES=veth0 UCXGO_PROGRESS_MODE=$m
  ip netns exec $NA $PY /tmp/vlat/lat.py server $b 10.91.0.1 $port 3000 > /tmp/vlat/srv.log 2>&1 &
  for i in $(seq 50); do grep -q ready /tmp/vlat/srv.log && break; sleep 0.1; done
  echo -n "$r $cfg: "; ip netns exec $NB timeout 60 $PY /tmp/vlat/lat.py client $b 10.91.0.1 $port 3000 2>&1 | tail -1
  wait
done
done
ip netns del $NA; ip netns del $NB
