#!/usr/bin/env bash
# Session 43 (issue 26) on the GPU machine's 16 cores, after machine.sh built ucxx_go and installed Dask
# (PYTHONPATH with /tmp/ucxxgo-site, /tmp/devkit-site, /tmp/dask-site): distributed's comm echo (session 24's
# comm_echo.py, as session 42's echo_study.sh ran it, thread mode) with tcp and with ucxgo at several
# UCXGO_SPIN_US (the progress thread's polling after work before it sleeps; default 200), ROUNDS rounds
# (default 2), each variant's order turned round every other round, N echoes a size (default 500).
# Prints one line a run, then medians over the rounds; writes the UCXGO_SPIN_US of 500/1000 whose echo is
# the fastest (summed ratios to the default over the sizes) to $OUT/best_spin.
set -u
out=${OUT:-/tmp/s43}
mkdir -p "$out"
here=benchmarks/results
S=$here/session24/scripts/comm_echo.py
T=$here/session43/echo_timing.py
N=${N:-500}
variants=${VARIANTS:-"tcp ucxgo ucxgo-s500 ucxgo-s1000 ucxgo-s0"}
port=${PORT:-13900}
log=$out/echo_spin.txt
for round in $(seq "${ROUNDS:-2}"); do
  order=$variants; [ $((round % 2)) = 0 ] && order=$(tr ' ' '\n' <<< "$variants" | tac | paste -sd' ')
  for size in 65536 1048576; do
    for v in $order; do
        envs=(UCXGO_PROGRESS_MODE=thread); case $v in *-s*) envs+=(UCXGO_SPIN_US=${v#*-s});; esac
        port=$((port + 1))
        env "${envs[@]}" timeout 100 python3 $T $S server "${v%-s*}" 127.0.0.1 $port 1 0 > "$out/echo_srv.log" 2>&1 &
        for _ in $(seq 300); do grep -q ready "$out/echo_srv.log" 2>/dev/null && break; sleep 0.1; done
        r=$(env "${envs[@]}" timeout 100 python3 $T $S client "${v%-s*}" 127.0.0.1 $port $size "$N" 2>&1 |
            grep -v "^pybridge_Progress" | tr '\n' ' ')
        wait
        echo "echo round $round $v: $r | server $(grep -E '^(pybridge_(Send|Recv)|cpu)' "$out/echo_srv.log" | tr '\n' ' ')" | tee -a "$log"
    done
  done
done
python3 - "$log" "$out/best_spin" <<'PY' | tee -a "$log"
import json, re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"echo round (\d+) (\S+): (\{.*?\})(.*)", line)
    if not m:
        continue
    size, us = next(iter(json.loads(m.group(3)).items()))
    send = re.search(r"pybridge_SendMulti: n=\d+ p50=([\d.]+)us", m.group(4))
    cpu = re.search(r"([\d.]+) cores, (\d+)us/send", m.group(4))
    rows.setdefault((int(size), m.group(2)), []).append((us, send and float(send.group(1)), cpu and float(cpu.group(1)),
                                                         cpu and float(cpu.group(2))))
print("median over rounds: size variant | echo us (each round) | client send_multi p50 us | client cores | client cpu us/echo")
ratio = {}
for (size, v), rs in sorted(rows.items()):
    med = statistics.median(r[0] for r in rs)
    sends = [r[1] for r in rs if r[1] is not None]
    cores = [r[2] for r in rs if r[2] is not None]
    cpus = [r[3] for r in rs if r[3] is not None]
    base = rows.get((size, "ucxgo"))
    rel = med / statistics.median(r[0] for r in base) if base else float("nan")
    tcp = rows.get((size, "tcp"))
    rtcp = med / statistics.median(r[0] for r in tcp) if tcp else float("nan")
    ratio.setdefault(v, []).append(rel)
    print(f"{size} {v}: echo {med:.0f} ({' / '.join(f'{r[0]:.0f}' for r in rs)}) = {rel:.2f}x default, {rtcp:.2f}x tcp"
          f" | send p50 {statistics.median(sends) if sends else float('nan'):.1f}"
          f" | {statistics.median(cores) if cores else float('nan'):.2f} cores | {statistics.median(cpus) if cpus else float('nan'):.0f}")
cands = {v: sum(r) for v, r in ratio.items() if v in ("ucxgo-s500", "ucxgo-s1000")}
best = min(cands, key=cands.get) if cands else "ucxgo-s500"
open(sys.argv[2], "w").write(best.split("-s")[1] + "\n")
print(f"best spin of 500/1000 by the echo: {best}")
PY
