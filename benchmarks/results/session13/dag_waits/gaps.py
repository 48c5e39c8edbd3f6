"""Diagnostic: where a 4-launch DAG repetition's time goes on the Python thread, beside CuPy."""
import gc, sys, time
import numpy as np, cupy as cp
import ucxx_go

SRC = r'''extern "C" __global__ void square(float* y, const float* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * x[i]; }'''
n = 64 << 20
xs = [cp.random.random(n, dtype=cp.float32) for _ in range(2)]
ys = [cp.empty(n, cp.float32) for _ in range(2)]
gcev = []
def cb(phase, info):
    gcev.append((time.perf_counter_ns(), phase, info["generation"]))
gc.callbacks.append(cb)

def report(label, reps):
    tot = sorted(r[0] for r in reps)
    print(f"{label}: total ms median {tot[len(tot)//2]/1e6:.3f} min {tot[0]/1e6:.3f} max {tot[-1]/1e6:.3f}")
    for r in reps[:12]:
        print("   total %.3f ms | calls us %s | gaps us %s | sync us %.1f | gc %s" % (r[0]/1e6, [round(c/1e3,1) for c in r[1]], [round(g/1e3,1) for g in r[2]], r[3]/1e3, r[4]))

# DAG
ctx = ucxx_go.ExecutionContext()
k = ctx.build_kernel(SRC, "square", "pointer, const pointer, sint32")
X = [ctx.wrap(a) for a in xs]; Y = [ctx.wrap(a) for a in ys]
reps = []
for rep in range(60):
    cp.cuda.Device().synchronize()
    gcev.clear()
    calls, gaps = [], []
    t0 = time.perf_counter_ns(); prev = t0
    for i in range(4):
        a = time.perf_counter_ns(); gaps.append(a - prev)
        k(64, 256)(Y[i % 2], X[i % 2], n)
        prev = time.perf_counter_ns(); calls.append(prev - a)
    s = time.perf_counter_ns()
    ctx.synchronize_sync()
    t1 = time.perf_counter_ns()
    reps.append((t1 - t0, calls, gaps[1:], t1 - s, [(round((t - t0)/1e3), p[0], g) for t, p, g in gcev]))
report("dag", reps[10:])
# CuPy
mod = cp.RawModule(code=SRC); kk = mod.get_function("square")
ss = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
reps = []
for rep in range(60):
    cp.cuda.Device().synchronize()
    gcev.clear()
    calls, gaps = [], []
    t0 = time.perf_counter_ns(); prev = t0
    for i in range(4):
        a = time.perf_counter_ns(); gaps.append(a - prev)
        kk((64,), (256,), (ys[i % 2], xs[i % 2], np.int32(n)), stream=ss[i % 2])
        prev = time.perf_counter_ns(); calls.append(prev - a)
    s = time.perf_counter_ns()
    for st in ss: st.synchronize()
    t1 = time.perf_counter_ns()
    reps.append((t1 - t0, calls, gaps[1:], t1 - s, [(round((t - t0)/1e3), p[0], g) for t, p, g in gcev]))
report("cupy", reps[10:])
ctx.close()
