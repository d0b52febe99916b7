#!/usr/bin/env bash
# Issue #32's GPU table in one device call: `smgpy serve` against `mlx_lm.server` on random-weight llamas
# of three sizes (benches/mlx_tiny.py --shape), then the engine's own loop in process (benches/mlx_loop.py).
#
# On a lent device machine, after the two calls of ../shared/docs/gpu.md (this tree's smgpy in .gpu-b):
#   .gpu-b/gpu-run bash benches/gpu_table.sh            (with a timeout_s of 600)
# Each part writes its log and JSON under $OUT (or ./gpu-out), so what finished comes back even when a
# later part runs out of time. SHAPES, DTYPE, PER_CLIENT, ROUNDS and CLIENTS override the defaults below,
# which fit about 8 minutes on an H200 (each part has its own time limit).
set -u
out=${OUT:-gpu-out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
shapes=${SHAPES:-"tiny 135m 1.7b"}
dtype=${DTYPE:-bfloat16}
per_client=${PER_CLIENT:-6}
rounds=${ROUNDS:-1}
clients=${CLIENTS:-"1 32 64"}
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1 || true
for shape in $shapes; do
    # shellcheck disable=SC2086 # the client counts are separate arguments
    timeout 150 python3 mlx_tiny.py --shape "$shape" --dtype "$dtype" --rounds "$rounds" \
        --per-client "$per_client" --concurrency $clients --json "$out/servers-$shape.json" \
        > "$out/servers-$shape.log" 2>&1
    echo "servers, $shape: exit $?"
    tail -n 6 "$out/servers-$shape.log"
done
timeout 90 python3 mlx_loop.py --shape 135m --dtype "$dtype" --rounds 1 --per-client "$per_client" \
    --out "$out/loop-135m.json" > "$out/loop-135m.log" 2>&1
echo "loop, 135m: exit $?"
tail -n 12 "$out/loop-135m.log"
