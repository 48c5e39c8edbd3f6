b="benchmarks/gpu/collectives_bench.py --lib ucxx --ordered --min-bytes 131072 --max-bytes 67108864 --iters 40 --budget-s 30"
timeout 120 python3 -m ucxx_go.launch -n 4 $b --out $AB_OUT/u4.json > $AB_OUT/u4.log 2>&1; echo "4 ranks rc=$?"
s=; [ "$AB_TAG" = base ] && s=131072
CUDA_VISIBLE_DEVICES=0,1 UCXGO_SLICED_MIN_BYTES=${s:-18446744073709551615} timeout 120 python3 -m ucxx_go.launch -n 2 $b --out $AB_OUT/u2.json > $AB_OUT/u2.log 2>&1; echo "2 ranks (sliced from ${s:-never}) rc=$?"
