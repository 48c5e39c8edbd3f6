"""The CUDA C kernels of the DAG benchmark suite, with their GrCUDA signatures.

Every kernel is float32 (int32 for CSR indices), 1-D grid, grid-stride loops with
bounds checks, and touches only the elements of the arrays it is given (the DAG
tracks each pointer argument's whole byte range, so a kernel must never read or
write outside the slice it was passed). Reductions are two kernels: a per-block
partial (exactly ``grid`` partials) and one block that folds them; both are
deterministic for a fixed grid, so every backend computes bit-identical results
from one compilation.

Each kernel is compiled alone (PRELUDE + its body), so NVRTC compiles small units.
Signatures are NIDL (``name: in|out|inout pointer type, n: sint32``); ``in`` is a
read, ``out``/``inout`` a write (GrCUDA's ``const pointer`` / ``pointer``).
"""

THREADS = 256  # the block size every launch uses (a multiple of 32: block_reduce)
NCLASS = 16  # classes of the ML shape (compile-time: the score accumulators live in registers)

PRELUDE = r"""
#define GRID_STRIDE(i, n) \
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < (n); i += (int)(blockDim.x * gridDim.x))
#define OP_SUM 0
#define OP_MAX 1
#define OP_MIN 2

__device__ __forceinline__ float op_apply(float a, float b, int op) {
    return op == OP_SUM ? a + b : (op == OP_MAX ? fmaxf(a, b) : fminf(a, b));
}
__device__ __forceinline__ float op_identity(int op) {
    return op == OP_SUM ? 0.0f : (op == OP_MAX ? -3.402823466e38f : 3.402823466e38f);
}
/* The reduction of v over the block, valid in thread 0. blockDim.x: a multiple of 32,
   at most 1024. Called once per kernel (one shared buffer). */
__device__ float block_reduce(float v, int op) {
    __shared__ float warp_part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = op_apply(v, __shfl_down_sync(0xffffffffu, v, o), op);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (int)(blockDim.x + 31) >> 5;
        v = lane < nwarps ? warp_part[lane] : op_identity(op);
        for (int o = 16; o > 0; o >>= 1) v = op_apply(v, __shfl_down_sync(0xffffffffu, v, o), op);
    }
    return v;
}
"""


class KernelSpec:
    __slots__ = ("name", "signature", "body")

    def __init__(self, name, signature, body):
        self.name, self.signature, self.body = name, signature, body

    @property
    def source(self):
        return PRELUDE + f"\n#define NCLASS {NCLASS}\n" + self.body

    def __repr__(self):
        return f"KernelSpec({self.name!r}, {self.signature!r})"


KERNELS = {}


def _k(name, signature, body):
    if f'extern "C" __global__ void {name}(' not in body:
        raise AssertionError(f"kernel {name}: the body does not define extern \"C\" {name}")
    KERNELS[name] = KernelSpec(name, signature, body)


# -- generic ----------------------------------------------------------------------------

_k("square", "y: out pointer float, x: in pointer float, n: sint32", r"""
extern "C" __global__ void square(float* y, const float* x, int n) {
    GRID_STRIDE(i, n) { const float v = x[i]; y[i] = v * v; }
}""")

# part[blockIdx.x] = op over the block's elements of x. Launch with grid == len(part).
_k("reduce_partial", "part: out pointer float, x: in pointer float, n: sint32, op: sint32", r"""
extern "C" __global__ void reduce_partial(float* part, const float* x, int n, int op) {
    float acc = op_identity(op);
    GRID_STRIDE(i, n) acc = op_apply(acc, x[i], op);
    acc = block_reduce(acc, op);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}""")

_k("dot_partial", "part: out pointer float, a: in pointer float, b: in pointer float, n: sint32", r"""
extern "C" __global__ void dot_partial(float* part, const float* a, const float* b, int n) {
    float acc = 0.0f;
    GRID_STRIDE(i, n) acc += a[i] * b[i];
    acc = block_reduce(acc, OP_SUM);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}""")

_k("diff_sum_partial", "part: out pointer float, a: in pointer float, b: in pointer float, n: sint32", r"""
extern "C" __global__ void diff_sum_partial(float* part, const float* a, const float* b, int n) {
    float acc = 0.0f;
    GRID_STRIDE(i, n) acc += a[i] - b[i];
    acc = block_reduce(acc, OP_SUM);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}""")

# out[0] = op over part[0:nparts]. Launch with ONE block.
_k("reduce_final", "out: out pointer float, part: in pointer float, nparts: sint32, op: sint32", r"""
extern "C" __global__ void reduce_final(float* out, const float* part, int nparts, int op) {
    float acc = op_identity(op);
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc = op_apply(acc, part[i], op);
    acc = block_reduce(acc, op);
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = acc;
}""")

_k("divide", "y: out pointer float, x: in pointer float, s: in pointer float, n: sint32", r"""
extern "C" __global__ void divide(float* y, const float* x, const float* s, int n) {
    const float d = s[0];
    GRID_STRIDE(i, n) y[i] = x[i] / d;
}""")

# -- B5 Black-Scholes (A&S 26.2.17 polynomial for the normal CDF) ------------------------

_k("black_scholes",
   "call: out pointer float, put: out pointer float, spot: in pointer float, n: sint32, "
   "strike: float, rate: float, vol: float, t: float", r"""
__device__ __forceinline__ float cnd(float d) {
    const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f, a4 = -1.821255978f, a5 = 1.330274429f;
    const float rsqrt2pi = 0.39894228040143267794f;
    const float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float c = rsqrt2pi * expf(-0.5f * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));
    return d > 0.0f ? 1.0f - c : c;
}
extern "C" __global__ void black_scholes(float* call, float* put, const float* spot, int n,
                                         float strike, float rate, float vol, float t) {
    const float sqrt_t = sqrtf(t);
    const float disc = expf(-rate * t);
    GRID_STRIDE(i, n) {
        const float s = spot[i];
        const float d1 = (logf(s / strike) + (rate + 0.5f * vol * vol) * t) / (vol * sqrt_t);
        const float d2 = d1 - vol * sqrt_t;
        const float c1 = cnd(d1), c2 = cnd(d2);
        call[i] = s * c1 - strike * disc * c2;
        put[i] = strike * disc * (1.0f - c2) - s * (1.0f - c1);
    }
}""")

# -- B6 ML ensemble (feature-major X: x[f * rows + r]; class-major scores: s[c * rows + r])

_k("standardize",
   "z: out pointer float, x: in pointer float, mu: in pointer float, inv_sd: in pointer float, "
   "rows: sint32, nfeat: sint32", r"""
extern "C" __global__ void standardize(float* z, const float* x, const float* mu, const float* inv_sd,
                                       int rows, int nfeat) {
    const int n = rows * nfeat;
    GRID_STRIDE(i, n) { const int f = i / rows; z[i] = (x[i] - mu[f]) * inv_sd[f]; }
}""")

_k("linear_scores",
   "scores: out pointer float, x: in pointer float, w: in pointer float, bias: in pointer float, "
   "rows: sint32, nfeat: sint32", r"""
extern "C" __global__ void linear_scores(float* scores, const float* x, const float* w, const float* bias,
                                         int rows, int nfeat) {
    GRID_STRIDE(r, rows) {
        float acc[NCLASS];
#pragma unroll
        for (int c = 0; c < NCLASS; ++c) acc[c] = bias[c];
        for (int f = 0; f < nfeat; ++f) {
            const float v = x[(size_t)f * rows + r];
#pragma unroll
            for (int c = 0; c < NCLASS; ++c) acc[c] += v * w[f * NCLASS + c];
        }
#pragma unroll
        for (int c = 0; c < NCLASS; ++c) scores[(size_t)c * rows + r] = acc[c];
    }
}""")

_k("row_logsumexp", "lse: out pointer float, scores: in pointer float, rows: sint32", r"""
extern "C" __global__ void row_logsumexp(float* lse, const float* scores, int rows) {
    GRID_STRIDE(r, rows) {
        float m = scores[r];
        for (int c = 1; c < NCLASS; ++c) m = fmaxf(m, scores[(size_t)c * rows + r]);
        float s = 0.0f;
        for (int c = 0; c < NCLASS; ++c) s += expf(scores[(size_t)c * rows + r] - m);
        lse[r] = m + logf(s);
    }
}""")

_k("softmax_apply", "scores: inout pointer float, lse: in pointer float, rows: sint32", r"""
extern "C" __global__ void softmax_apply(float* scores, const float* lse, int rows) {
    const int n = rows * NCLASS;
    GRID_STRIDE(i, n) scores[i] = expf(scores[i] - lse[i % rows]);
}""")

_k("argmax_sum", "out: out pointer float, pa: in pointer float, pb: in pointer float, rows: sint32", r"""
extern "C" __global__ void argmax_sum(float* out, const float* pa, const float* pb, int rows) {
    GRID_STRIDE(r, rows) {
        int best = 0;
        float bv = pa[r] + pb[r];
        for (int c = 1; c < NCLASS; ++c) {
            const float v = pa[(size_t)c * rows + r] + pb[(size_t)c * rows + r];
            if (v > bv) { bv = v; best = c; }
        }
        out[r] = (float)best;
    }
}""")

# -- B7 HITS, B9 CG: CSR sparse matrix-vector product -----------------------------------

_k("spmv_csr",
   "y: out pointer float, rowptr: in pointer sint32, col: in pointer sint32, val: in pointer float, "
   "x: in pointer float, n: sint32", r"""
extern "C" __global__ void spmv_csr(float* y, const int* rowptr, const int* col, const float* val,
                                    const float* x, int n) {
    GRID_STRIDE(r, n) {
        float acc = 0.0f;
        const int end = rowptr[r + 1];
        for (int k = rowptr[r]; k < end; ++k) acc += val[k] * x[col[k]];
        y[r] = acc;
    }
}""")

# Rows [0, n) of a CSR matrix whose columns span a vector of ncols elements: the
# product of one row partition (rowptr rebased to the partition's first nonzero) with
# the whole vector (the multi-GPU mode's partitioned HITS/CG, shapes_multi.py).
_k("spmv_csr_rows",
   "y: out pointer float, rowptr: in pointer sint32, col: in pointer sint32, val: in pointer float, "
   "x: in pointer float, n: sint32, ncols: sint32", r"""
extern "C" __global__ void spmv_csr_rows(float* y, const int* rowptr, const int* col, const float* val,
                                         const float* x, int n, int ncols) {
    GRID_STRIDE(r, n) {
        float acc = 0.0f;
        const int end = rowptr[r + 1];
        for (int k = rowptr[r]; k < end; ++k) acc += val[k] * x[col[k]];
        y[r] = acc;
    }
}""")

# -- B9 CG scalars and vector updates (scalars live in 1-element device arrays) ----------

_k("cg_alpha", "alpha: out pointer float, rr: in pointer float, pap: in pointer float", r"""
extern "C" __global__ void cg_alpha(float* alpha, const float* rr, const float* pap) {
    if (blockIdx.x == 0 && threadIdx.x == 0) alpha[0] = rr[0] / pap[0];
}""")

_k("cg_beta", "beta: out pointer float, rr: inout pointer float, rr_new: in pointer float", r"""
extern "C" __global__ void cg_beta(float* beta, float* rr, const float* rr_new) {
    if (blockIdx.x == 0 && threadIdx.x == 0) { beta[0] = rr_new[0] / rr[0]; rr[0] = rr_new[0]; }
}""")

# y += sign * alpha[0] * x
_k("axpy", "y: inout pointer float, x: in pointer float, alpha: in pointer float, sign: float, n: sint32", r"""
extern "C" __global__ void axpy(float* y, const float* x, const float* alpha, float sign, int n) {
    const float a = sign * alpha[0];
    GRID_STRIDE(i, n) y[i] += a * x[i];
}""")

# p = r + beta[0] * p
_k("xpby", "p: inout pointer float, r: in pointer float, beta: in pointer float, n: sint32", r"""
extern "C" __global__ void xpby(float* p, const float* r, const float* beta, int n) {
    const float b = beta[0];
    GRID_STRIDE(i, n) p[i] = r[i] + b * p[i];
}""")

# -- B8 image pipeline (row-major h x w, clamped borders) -------------------------------

# Gaussian blur of radius `radius`, weights exp(-(dx^2+dy^2)/(2 sigma^2)) normalized.
_k("blur", "out: out pointer float, img: in pointer float, h: sint32, w: sint32, radius: sint32, sigma: float", r"""
extern "C" __global__ void blur(float* out, const float* img, int h, int w, int radius, float sigma) {
    const int n = h * w;
    const float inv2s2 = 1.0f / (2.0f * sigma * sigma);
    GRID_STRIDE(i, n) {
        const int y = i / w, x = i - (i / w) * w;
        float acc = 0.0f, wsum = 0.0f;
        for (int dy = -radius; dy <= radius; ++dy) {
            const int yy = min(max(y + dy, 0), h - 1);
            for (int dx = -radius; dx <= radius; ++dx) {
                const int xx = min(max(x + dx, 0), w - 1);
                const float wt = expf(-(float)(dx * dx + dy * dy) * inv2s2);
                acc += wt * img[yy * w + xx];
                wsum += wt;
            }
        }
        out[i] = acc / wsum;
    }
}""")

_k("sobel", "out: out pointer float, img: in pointer float, h: sint32, w: sint32", r"""
extern "C" __global__ void sobel(float* out, const float* img, int h, int w) {
    const int n = h * w;
    GRID_STRIDE(i, n) {
        const int y = i / w, x = i - (i / w) * w;
        const int ym = max(y - 1, 0), yp = min(y + 1, h - 1), xm = max(x - 1, 0), xp = min(x + 1, w - 1);
        const float gx = (img[ym * w + xp] + 2.0f * img[y * w + xp] + img[yp * w + xp])
                       - (img[ym * w + xm] + 2.0f * img[y * w + xm] + img[yp * w + xm]);
        const float gy = (img[yp * w + xm] + 2.0f * img[yp * w + x] + img[yp * w + xp])
                       - (img[ym * w + xm] + 2.0f * img[ym * w + x] + img[ym * w + xp]);
        out[i] = sqrtf(gx * gx + gy * gy);
    }
}""")

# mask = (mask - min) / (max - min), in place
_k("extend", "mask: inout pointer float, mn: in pointer float, mx: in pointer float, n: sint32", r"""
extern "C" __global__ void extend(float* mask, const float* mn, const float* mx, int n) {
    const float lo = mn[0], inv = 1.0f / (mx[0] - mn[0]);
    GRID_STRIDE(i, n) mask[i] = (mask[i] - lo) * inv;
}""")

_k("unsharpen", "out: out pointer float, img: in pointer float, blurred: in pointer float, amount: float, n: sint32",
   r"""
extern "C" __global__ void unsharpen(float* out, const float* img, const float* blurred, float amount, int n) {
    GRID_STRIDE(i, n) out[i] = img[i] * (1.0f + amount) - blurred[i] * amount;
}""")

# out = a * m + b * (1 - m), m = clamp(mask, 0, 1)
_k("combine", "out: out pointer float, a: in pointer float, b: in pointer float, mask: in pointer float, n: sint32",
   r"""
extern "C" __global__ void combine(float* out, const float* a, const float* b, const float* mask, int n) {
    GRID_STRIDE(i, n) {
        const float m = fminf(fmaxf(mask[i], 0.0f), 1.0f);
        out[i] = a[i] * m + b[i] * (1.0f - m);
    }
}""")

# -- overhead, memory, communication ----------------------------------------------------

_k("touch", "a: inout pointer float, n: sint32", r"""
extern "C" __global__ void touch(float* a, int n) {
    GRID_STRIDE(i, n) a[i] += 1.0f;
}""")

# out[i] = v(base + i) after `work` dependent FMAs v = v * a + b. With a = 1, b = 0 the
# value stays exactly ((base + i) % 1000003) * 0.5 (exact in float32), and the compiler
# cannot drop the loop (a, b are run-time values).
_k("produce", "out: out pointer float, base: sint32, n: sint32, work: sint32, a: float, b: float", r"""
extern "C" __global__ void produce(float* out, int base, int n, int work, float a, float b) {
    GRID_STRIDE(i, n) {
        float v = (float)((base + i) % 1000003) * 0.5f;
        for (int k = 0; k < work; ++k) v = fmaf(v, a, b);
        out[i] = v;
    }
}""")

# out[i] = loop(in[i]) + 1 (exactly in[i] + 1 with a = 1, b = 0)
_k("consume", "out: out pointer float, x: in pointer float, n: sint32, work: sint32, a: float, b: float", r"""
extern "C" __global__ void consume(float* out, const float* x, int n, int work, float a, float b) {
    GRID_STRIDE(i, n) {
        float v = x[i];
        for (int k = 0; k < work; ++k) v = fmaf(v, a, b);
        out[i] = v + 1.0f;
    }
}""")

# 3-point stencil: out[i] = w0 * x[i] + w1 * x[i + 1] + w2 * x[i + 2], i < n_out
# (x holds n_out + 2 elements: the caller passes the slice with its halo).
_k("stencil3", "out: out pointer float, x: in pointer float, n_out: sint32, w0: float, w1: float, w2: float", r"""
extern "C" __global__ void stencil3(float* out, const float* x, int n_out, float w0, float w1, float w2) {
    GRID_STRIDE(i, n_out) out[i] = w0 * x[i] + w1 * x[i + 1] + w2 * x[i + 2];
}""")

REDUCE_OPS = {"sum": 0, "max": 1, "min": 2}


def check_specs():
    """Every signature parses (ucxx_go's own parser when importable) and names as many
    parameters as the C function declares. Raises AssertionError/ValueError."""
    import re

    try:
        from ucxx_go._kernels import parse_signature
    except ImportError:  # the count check below still runs
        parse_signature = None
    for name, spec in KERNELS.items():
        m = re.search(r'extern "C" __global__ void ' + re.escape(name) + r"\(([^)]*)\)", spec.body)
        if m is None:
            raise AssertionError(f"kernel {name}: no extern \"C\" definition")
        c_params = [p.strip() for p in m.group(1).split(",") if p.strip()]
        sig_params = [p.strip() for p in spec.signature.split(",")]
        if len(c_params) != len(sig_params):
            raise AssertionError(f"kernel {name}: C declares {len(c_params)} parameters, the signature {len(sig_params)}")
        for cp_, sp in zip(c_params, sig_params):
            is_ptr_c = "*" in cp_
            is_ptr_s = " pointer " in f" {sp} "
            if is_ptr_c != is_ptr_s:
                raise AssertionError(f"kernel {name}: C parameter {cp_!r} vs signature {sp!r} (pointer mismatch)")
            if is_ptr_c and cp_.startswith("const") != (": in " in sp):
                raise AssertionError(f"kernel {name}: C parameter {cp_!r} is {'const' if cp_.startswith('const') else 'written'}"
                                     f" but the signature says {sp!r}")
            if not is_ptr_c:
                ctype = cp_.rsplit(" ", 1)[0].strip()
                want = {"int": "sint32", "float": "float", "unsigned long long": "uint64"}[ctype]
                if not sp.endswith(want):
                    raise AssertionError(f"kernel {name}: C scalar {cp_!r} vs signature {sp!r}")
        if parse_signature is not None:
            params = parse_signature(spec.signature)
            if len(params) != len(c_params):
                raise AssertionError(f"kernel {name}: parse_signature gives {len(params)} parameters")
        pointer_names = {sp.split(":")[0].strip() for sp in sig_params if " pointer " in f" {sp} "}
        scalar_names = {sp.split(":")[0].strip() for sp in sig_params} - pointer_names
        dummy = {k: 4 for k in scalar_names}
        extra = set(required_lengths(name, dummy, 1, 32)) - pointer_names
        if extra:
            raise AssertionError(f"kernel {name}: required_lengths names {extra}, not pointer parameters")
    return len(KERNELS)


def required_lengths(name, s, grid, block):
    """How many elements kernel `name` touches in each pointer argument, given its
    scalar arguments `s` (by parameter name) and its grid: the exact length each
    argument must have (the DAG tracks the whole range of what it is passed, so a
    longer argument over-synchronizes and a shorter one is a bug). Pointer arguments
    not listed (CSR column/value arrays) are not checked."""
    C = NCLASS
    if name == "square":
        return {"y": s["n"], "x": s["n"]}
    if name == "reduce_partial":
        return {"part": grid, "x": s["n"]}
    if name in ("dot_partial", "diff_sum_partial"):
        return {"part": grid, "a": s["n"], "b": s["n"]}
    if name == "reduce_final":
        if grid != 1:
            raise ValueError(f"reduce_final must run as one block, got grid {grid}")
        return {"out": 1, "part": s["nparts"]}
    if name == "divide":
        return {"y": s["n"], "x": s["n"], "s": 1}
    if name == "black_scholes":
        return {"call": s["n"], "put": s["n"], "spot": s["n"]}
    if name == "standardize":
        n = s["rows"] * s["nfeat"]
        return {"z": n, "x": n, "mu": s["nfeat"], "inv_sd": s["nfeat"]}
    if name == "linear_scores":
        return {"scores": s["rows"] * C, "x": s["rows"] * s["nfeat"], "w": s["nfeat"] * C, "bias": C}
    if name == "row_logsumexp":
        return {"lse": s["rows"], "scores": s["rows"] * C}
    if name == "softmax_apply":
        return {"scores": s["rows"] * C, "lse": s["rows"]}
    if name == "argmax_sum":
        return {"out": s["rows"], "pa": s["rows"] * C, "pb": s["rows"] * C}
    if name == "spmv_csr":
        return {"y": s["n"], "rowptr": s["n"] + 1, "x": s["n"]}
    if name == "spmv_csr_rows":
        return {"y": s["n"], "rowptr": s["n"] + 1, "x": s["ncols"]}
    if name == "cg_alpha":
        return {"alpha": 1, "rr": 1, "pap": 1}
    if name == "cg_beta":
        return {"beta": 1, "rr": 1, "rr_new": 1}
    if name == "axpy":
        return {"y": s["n"], "x": s["n"], "alpha": 1}
    if name == "xpby":
        return {"p": s["n"], "r": s["n"], "beta": 1}
    if name in ("blur", "sobel"):
        n = s["h"] * s["w"]
        return {"out": n, "img": n}
    if name == "extend":
        return {"mask": s["n"], "mn": 1, "mx": 1}
    if name == "unsharpen":
        return {"out": s["n"], "img": s["n"], "blurred": s["n"]}
    if name == "combine":
        return {"out": s["n"], "a": s["n"], "b": s["n"], "mask": s["n"]}
    if name == "touch":
        return {"a": s["n"]}
    if name == "produce":
        return {"out": s["n"]}
    if name == "consume":
        return {"out": s["n"], "x": s["n"]}
    if name == "stencil3":
        return {"out": s["n_out"], "x": s["n_out"] + 2}
    raise KeyError(f"required_lengths: no entry for kernel {name!r}")
