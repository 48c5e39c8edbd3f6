#!/usr/bin/env bash
# Session 28: why 16 MiB device calls in flight (ten ordered calls, one synchronize) take
# longer a call than one call with a synchronize. All GPUs, one rank each; the collectives
# at 4, 16 and 64 MiB, stream-ordered, with the defaults and with the executor's tuning
# knobs (sliced programs from 1 B, waits-only programs from 1 B), in flight 10 and 3; NCCL
# beside them. Two alternating rounds. Writes $OUT/midsize/<variant>_r<round>.json.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
n=$(nvidia-smi -L | wc -l)
o=$OUT/midsize; mkdir -p "$o"
b="benchmarks/gpu/collectives_bench.py --budget-s 60 --iters 30 --min-bytes 4194304 --max-bytes 67108864"
for round in 1 2; do
    for v in nccl ordered sliced waits ordered3 nccl3; do
        a="--lib ucxx --ordered"; e=""
        case $v in
            nccl) a="--lib nccl" ;;
            nccl3) a="--lib nccl --inflight 3" ;;
            ordered3) a="--lib ucxx --ordered --inflight 3" ;;
            sliced) e="UCXGO_SLICED_MIN_BYTES=1" ;;
            waits) e="UCXGO_PROGRAM_WAITS_MIN_BYTES=1" ;;
        esac
        env $e timeout 200 python3 -m ucxx_go.launch -n "$n" $b $a --out "$o/${v}_r$round.json" > "$o/${v}_r$round.log" 2>&1
        echo "midsize $v r$round rc=$?"
    done
done
rm -f "$o"/*.rank*
python3 - "$o" <<'PY'
import glob, json, os, statistics, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    v = os.path.basename(f).rsplit("_r", 1)[0]
    for r in json.load(open(f))["rows"]:
        rows.setdefault((r["op"], r["bytes"]), {}).setdefault(v, []).append(r)
vs = ["nccl", "nccl3", "ordered", "ordered3", "sliced", "waits"]
print("op size | " + " | ".join(f"{v} call/flight" for v in vs))
for (op, b), d in sorted(rows.items()):
    cell = lambda v: "/".join(f"{statistics.median(r[k] for r in d[v]):.0f}" for k in ("us_per_call", "us_inflight")) if v in d else "-"
    print(f"{op} {b >> 20}M | " + " | ".join(cell(v) for v in vs))
PY
