PY=/work/main/.venv/bin/python
P=$1; SIZE=$2; MODE=$3; PORT=$4
export UCX_NET_DEVICES=veth0 UCXGO_PROGRESS_MODE=$MODE $EXTRA
ip netns exec vbA $PY /tmp/pe/dask_echo_ns.py server $P 10.91.0.1 $PORT $SIZE 6 > /dev/null 2>&1 &
sleep 3
ip netns exec vbB $PY /tmp/pe/dask_echo_ns.py client $P 10.91.0.1 $PORT $SIZE 6 > /tmp/pe/cli.out 2>/dev/null &
sleep 3
E=""
for s in epoll_wait epoll_pwait sched_yield nanosleep clock_nanosleep futex write read recvfrom recvmsg sendmsg sendto getpid gettid ioctl; do E="$E,syscalls:sys_enter_$s"; done
perf stat -e ${E#,},context-switches,cpu-migrations -a -x, -o /tmp/pe/stat_$P.txt -- sleep 2
wait %2; US=$(python3 -c "import json;print(json.load(open('/tmp/pe/cli.out'))['us'])")
pkill -f "dask_echo_ns.py server"
echo "$P $MODE: $US us/echo"
python3 - $US <<'PY'
import sys
us=float(sys.argv[1]); n=2e6/us
for l in open('/tmp/pe/stat_'+__import__('os').environ.get('P','x')+'.txt') if False else []: pass
PY
awk -F, -v us=$US '/^[0-9]/{n=2e6/us; printf "  %-40s %8.2f /echo\n", $3, $1/n}' /tmp/pe/stat_$P.txt
