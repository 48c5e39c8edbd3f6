#!/usr/bin/env bash
# Session 44 (issue 26): UCX's "fast completion" for host sends against the defaults, on the GPU machine.
# UCXGO_X_FASTCMPL is an experiment's switch in that build only (ucxx/shim.c, not committed): host tag sends
# and send_multi carry UCP_OP_ATTR_FLAG_FAST_CMPL, for which UCX takes UCX_RNDV_SEND_NBR_THRESH as the
# rendezvous threshold (host memory, intra-node, RNDV_THRESH auto). Parts: PARTS="pp dask" (default both).
set -u
out=${OUT:-/tmp/s44}; mkdir -p "$out"
here=benchmarks/results/session44
declare -A V=(
  [base]=""
  [fast]="UCXGO_X_FASTCMPL=1 UCX_RNDV_SEND_NBR_THRESH=4M"
  [fastcma]="UCXGO_X_FASTCMPL=1 UCX_RNDV_SEND_NBR_THRESH=4M UCX_CMA_BW=11145MBs"
  [thresh4m]="UCX_RNDV_THRESH=auto,intra:4M,inter:256K UCX_CMA_BW=11145MBs"
)
pp() {  # mode variant [CUDA]
  local envs=(UCXGO_PROGRESS_MODE=$1 ${V[$2]} ${3:+CUDA=1})
  coproc S { env "${envs[@]}" python3 $here/pingpong.py server; }
  local port; read -r port <&"${S[0]}"
  echo "pp $1 $2 ${3:-host}: $(env "${envs[@]}" timeout 60 python3 $here/pingpong.py client $port | tr '\n' ' ')"
  wait
}
if [[ " ${PARTS:-pp dask} " == *" pp "* ]]; then
  for r in 1 2; do
    for m in thread loop; do for v in base fast fastcma thresh4m; do SIZES=65536,1048576,8388608 N=300 pp $m $v; done; done
  done 2>&1 | tee -a "$out/pingpong.txt"
  for m in thread loop; do for v in base fastcma; do SIZES=65536,1048576,16777216 N=300 pp $m $v cuda; done; done 2>&1 | tee -a "$out/pingpong.txt"
fi
if [[ " ${PARTS:-pp dask} " == *" dask "* ]]; then
  for r in 1 2 3; do
    order="tcp thread:base thread:fastcma loop:base loop:fastcma"; [ $((r % 2)) = 0 ] && order=$(tr ' ' '\n' <<< "$order" | tac | paste -sd' ')
    for v in $order; do
      if [ "$v" = tcp ]; then envs=(PROTO=tcp); else envs=(PROTO=ucxgo UCXGO_PROGRESS_MODE=${v%%:*} ${V[${v#*:}]}); fi
      echo "dask round $r $v: $(env "${envs[@]}" timeout 120 python3 $here/dask_rpc_echo.py 2>/dev/null | tail -1)"
    done
  done 2>&1 | tee -a "$out/dask_rpc_echo.txt"
fi
