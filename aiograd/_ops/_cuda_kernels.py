"""CuPy kernels for convolution and pooling (issue 22, item 4), compiled once and cached.

Only for CuPy arrays: nothing here imports CuPy until a kernel is first asked for, and
the NumPy path of :mod:`.conv` stays the reference. Each kernel's index arithmetic is
written out below in the form a pure-NumPy reference (tests/test_cuda_kernel_formulas.py)
computes on the CPU, so the mapping is checked without a GPU; tests/test_cuda_kernels.py
compares the kernels with the NumPy path and with torch on a real device.

UNMEASURED and NOT WIRED: no GPU was available when these were written. They are not yet
called by the ops; wiring them in is one dispatch per op in :mod:`.conv` once
tests/test_cuda_kernels.py passes on a CUDA machine (benchmarks/gpu_device_check.sh).

Layouts (all C-contiguous):
- ``x`` (N, C, H, W); ``cols`` (N, C*kh*kw, Ho*Wo), unfold's order;
- geometry ints ``kh kw dh dw sh sw top left oh ow`` as in ``conv._Geometry``.

Note [col2im as one gather kernel]
    Thread per input pixel (n, c, h, w): with ``hp = h + top``, kernel row i contributes
    iff ``t = hp - i dh`` is a multiple of sh and ``0 <= t / sh < oh`` (likewise for
    columns); the pixel writes the sum of its contributions once. No atomics, and no
    zero-fill pass: every output element is written exactly once.
"""

from __future__ import annotations

import functools
from typing import Any

_TYPES = {"float32": "float", "float64": "double"}

_IM2COL = r"""
extern "C" __global__ void im2col(const T* x, T* cols, long long total,
        int C, int H, int W, int kh, int kw, int dh, int dw, int sh, int sw,
        int top, int left, int oh, int ow, T fill) {
    // one thread per column entry: cols[n, (c*kh + i)*kw + j, y*ow + xo]
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total;
         k += (long long)blockDim.x * gridDim.x) {
        long long rest = k;
        int xo = rest % ow; rest /= ow;
        int y = rest % oh; rest /= oh;
        int j = rest % kw; rest /= kw;
        int i = rest % kh; rest /= kh;
        int c = rest % C; long long n = rest / C;
        int h = y * sh + i * dh - top;      // padding inside: no padded copy
        int w = xo * sw + j * dw - left;
        cols[k] = (h >= 0 && h < H && w >= 0 && w < W)
            ? x[((n * C + c) * H + h) * W + w] : fill;
    }
}
"""

_COL2IM = r"""
extern "C" __global__ void col2im(const T* cols, T* x, long long total,
        int C, int H, int W, int kh, int kw, int dh, int dw, int sh, int sw,
        int top, int left, int oh, int ow) {
    // one thread per input pixel: see Note [col2im as one gather kernel]
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total;
         k += (long long)blockDim.x * gridDim.x) {
        long long rest = k;
        int w = rest % W; rest /= W;
        int h = rest % H; rest /= H;
        int c = rest % C; long long n = rest / C;
        int hp = h + top, wp = w + left;
        T sum = 0;
        for (int i = 0; i < kh; ++i) {
            int t = hp - i * dh;
            if (t < 0 || t % sh) continue;
            int y = t / sh;
            if (y >= oh) continue;
            for (int j = 0; j < kw; ++j) {
                int u = wp - j * dw;
                if (u < 0 || u % sw) continue;
                int xo = u / sw;
                if (xo >= ow) continue;
                sum += cols[((n * C + c) * kh * kw + i * kw + j) * (long long)(oh * ow)
                            + y * ow + xo];
            }
        }
        x[k] = sum;
    }
}
"""

_MAX_POOL = r"""
extern "C" __global__ void max_pool(const T* x, T* out, A* argmax, long long total,
        int H, int W, int kh, int kw, int dh, int dw, int sh, int sw,
        int top, int left, int oh, int ow) {
    // one thread per output (n*c, y, xo); argmax: the first maximum's window position
    // i*kw + j, row-major, as the NumPy path's; padding is -inf (never picked)
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total;
         k += (long long)blockDim.x * gridDim.x) {
        int xo = k % ow; int y = (k / ow) % oh; long long plane = k / ((long long)oh * ow);
        const T* src = x + plane * H * W;
        T best = 0; int where = -1;
        for (int i = 0; i < kh; ++i) {
            int h = y * sh + i * dh - top;
            if (h < 0 || h >= H) continue;
            for (int j = 0; j < kw; ++j) {
                int w = xo * sw + j * dw - left;
                if (w < 0 || w >= W) continue;
                T v = src[h * W + w];
                if (where < 0 || v > best || v != v && best == best) {
                    best = v; where = i * kw + j;
                }
            }
        }
        out[k] = best; argmax[k] = (A)where;
    }
}
"""


@functools.cache
def _kernel(source: str, name: str, dtype: str, index_type: str = "int") -> Any:
    """``source``'s kernel ``name`` for ``dtype`` (and argmax type), compiled once."""
    import cupy

    header = f"typedef {_TYPES[dtype]} T;\ntypedef {index_type} A;\n"
    return cupy.RawKernel(header + source, name)


def _launch(kernel: Any, total: int, args: tuple[Any, ...]) -> None:
    threads = 256
    blocks = max(1, min((total + threads - 1) // threads, 65535))
    kernel((blocks,), (threads,), args)


def _geometry_ints(geo: Any) -> tuple[int, ...]:
    (kh, kw), (dh, dw), (sh, sw) = geo.kernel, geo.dilation, geo.stride
    (top, _), (left, _) = geo.pads
    return kh, kw, dh, dw, sh, sw, top, left, geo.out[0], geo.out[1]


def im2col(x: Any, geo: Any, fill: float = 0.0) -> Any:
    """The (N, C*kh*kw, Ho*Wo) columns of the CuPy array ``x`` (N, C, H, W), padding
    with ``fill`` inside the kernel."""
    import cupy

    x = cupy.ascontiguousarray(x)
    n, c, h, w = x.shape
    kh, kw = geo.kernel
    cols = cupy.empty((n, c * kh * kw, geo.out[0] * geo.out[1]), dtype=x.dtype)
    _launch(_kernel(_IM2COL, "im2col", x.dtype.name), cols.size,
            (x, cols, cupy.int64(cols.size), cupy.int32(c), cupy.int32(h), cupy.int32(w))
            + tuple(cupy.int32(v) for v in _geometry_ints(geo)) + (x.dtype.type(fill),))
    return cols


def col2im(cols: Any, geo: Any) -> Any:
    """The adjoint of :func:`im2col`, one gather kernel (Note [col2im as one gather
    kernel])."""
    import cupy

    cols = cupy.ascontiguousarray(cols)
    n, c, h, w = geo.input_shape
    x = cupy.empty((n, c, h, w), dtype=cols.dtype)
    _launch(_kernel(_COL2IM, "col2im", cols.dtype.name), x.size,
            (cols, x, cupy.int64(x.size), cupy.int32(c), cupy.int32(h), cupy.int32(w))
            + tuple(cupy.int32(v) for v in _geometry_ints(geo)))
    return x


def max_pool(x: Any, geo: Any) -> tuple[Any, Any]:
    """(values (N, C, Ho, Wo), argmax (N, C, Ho*Wo)) of the CuPy array ``x``; argmax is
    int8 for windows of up to 127 elements, else int32 (the NumPy path's dtypes)."""
    import cupy

    x = cupy.ascontiguousarray(x)
    n, c, h, w = x.shape
    k = geo.kernel[0] * geo.kernel[1]
    index_type, index_dtype = ("signed char", cupy.int8) if k <= 127 else ("int", cupy.int32)
    out = cupy.empty((n, c) + tuple(geo.out), dtype=x.dtype)
    argmax = cupy.empty((n, c, geo.out[0] * geo.out[1]), dtype=index_dtype)
    geo_ints = _geometry_ints(geo)
    _launch(_kernel(_MAX_POOL, "max_pool", x.dtype.name, index_type), out.size,
            (x, out, argmax, cupy.int64(out.size), cupy.int32(h), cupy.int32(w))
            + tuple(cupy.int32(v) for v in geo_ints))
    return out, argmax
