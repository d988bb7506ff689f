"""Numeric kernels whose results do not depend on the CPU: the same bits on every machine.

The dense encoder's vectors decide candidate lists that a model then reads, so they must
not move with the CPU's kernels (ONNX Runtime's AVX-512 and AVX2 GEMMs round differently,
and one near-tie reordered is one changed list). Every kernel here is built from IEEE
operations whose result is defined bit for bit -- +, -, *, /, sqrt, rint, ldexp --
in a fixed order:

- sums run sequentially in a fixed order (numba keeps the order: no ``fastmath``, so no
  reassociation and no fused multiply-add);
- ``exp`` and ``erf`` are polynomials of our own (libm and SIMD libraries differ by an ulp
  between machines);
- matrix products are exact: :func:`to_fixed` turns each row into integers below
  2**FIXED_BITS, the weights are int8, so every partial sum is an integer below 2**53 and
  any BLAS, in any order, gives the same float64 result.
"""

from __future__ import annotations

import math

import numpy as np

from fhs.retrieval.jit import kernel

# A row's integers stay below 2**34; times int8 weights (|w| <= 127) over 1,536 terms the sum
# stays below 2**53, where float64 holds every integer exactly.
FIXED_BITS = 34
LARGEST_EXACT = 2.0**53

# ln 2 split so that k * LN2_HI is exact for |k| < 2**20 (its low 32 bits are zero).
LN2_HI = 0.6931471803691238
LN2_LO = 1.9082149292705877e-10
INV_LN2 = 1.4426950408889634
EXP_TERMS = np.array([1.0 / math.factorial(n) for n in range(14)])  # Taylor of exp on |r| <= ln2/2

# erf(c + t) = sum_k ERF_TAYLOR[i][k] t**k around c = 0.25 + 0.5 i, |t| <= 0.25 (dev/erf_taylor.py)
# one row per centre, as dev/erf_taylor.py prints it
# fmt: off
ERF_TAYLOR = (
    (0.27632639016823696, 1.0600141293761143, -0.26500353234402857, -0.30917078773469997, 0.12698085924818034, 0.08005315039559197, -0.04053265833248076, -0.01616508402282089, 0.009695887394100754, 0.002604550371431798, -0.0018539408330783904, -0.00034192911382164003, 0.00029514717263323355, 3.686895812997872e-05, -4.0237254785947624e-05, -3.2234863232276822e-06, 4.795080339294754e-06),
    (0.7111556336535151, 0.6429310691952074, -0.4821983018964055, 0.026788794549800304, 0.1506869693426267, -0.053242729167728105, -0.026872509532768433, 0.018435235177909452, 0.0023017883040209273, -0.00396826044637477, 0.00018603225735249506, 0.0006239836743132585, -0.00010618466494862627, -7.57456209347206e-05, 2.2117975642824626e-05, 7.166231694301993e-06, -3.252264713003685e-06),
    (0.9229001282564583, 0.2365211224472908, -0.29565140305911347, 0.16753579506683097, -0.006159404230398197, -0.04718103640485019, 0.021301272963460433, 0.0036259826094427483, -0.005697678057620952, 0.0008776361752808411, 0.0007935114997568478, -0.00032395671499069396, -5.2738032824946004e-05, 5.5828132785536196e-05, -3.0148435589627603e-06, -6.409580608858307e-06, 1.353228718679766e-06),
    (0.9866716712191824, 0.05277499593015037, -0.09235624287776316, 0.09015728471400689, -0.04810220983216831, 0.00662436146831575, 0.008963045098727362, -0.00605875147039124, 0.0007300512471403044, 0.000894181745354845, -0.00044275049925469434, -5.445490386117354e-06, 6.867167700726822e-05, -1.7720574652632584e-05, -4.625462096042058e-06, 3.2732503984500383e-06, -1.7638628012270578e-07),
    (0.9985372834133188, 0.007142319022017983, -0.016070217799540463, 0.021724553691971366, -0.019083383636954297, 0.010657679165667459, -0.0029043570710627813, -0.0006704559699518927, 0.0009994937126113928, -0.00036938041770393946, -1.1466583164141507e-05, 6.51349432823389e-05, -2.26882426454011e-05, -1.3320746753833096e-06, 3.4200230329645604e-06, -8.610833786514346e-07, -1.5682298693348275e-07),
    (0.9998993780778803, 0.0005862772470937923, -0.001612262429507929, 0.0027603887050666057, -0.003258113659630606, 0.0027558084140736853, -0.00165732740366605, 0.0006460409566724474, -8.901157121243978e-05, -7.122311472315157e-05, 5.499699242438933e-05, -1.5843804712042587e-05, -1.0711338137061364e-06, 2.68755471390732e-06, -9.145766511836599e-07, 2.599902759769022e-09, 1.0580689273108972e-07),
    (0.9999956972205363, 2.9189025383581702e-05, -9.486433249664052e-05, 0.00019580971194819392, -0.00028656933775026826, 0.00031379722549089054, -0.0002635285042150599, 0.0001699914145113912, -8.164763053013537e-05, 2.5913847005660593e-05, -2.328866237210874e-06, -2.864299460756217e-06, 1.9043540620324773e-06, -5.482373634736951e-07, 3.415163322790054e-09, 6.639710279972467e-08, -2.7372258733380318e-08),
    (0.9999998862727434, 8.814321912318039e-07, -3.305370717119265e-06, 7.96961606238756e-06, -1.3841239877936921e-05, 1.8370974998189114e-05, -1.9272721446953215e-05, 1.627530274121437e-05, -1.1128227438398495e-05, 6.108880665651509e-06, -2.603308954634454e-06, 7.753483601441538e-07, -9.015197438790608e-08, -5.733324505294767e-08, 4.260241086797881e-08, -1.4202803665529217e-08, 1.6872829502859595e-09),
    (0.9999999981494259, 1.6143993719507412e-08, -6.86119733079065e-08, 1.8901925979923262e-07, -3.787952693040671e-07, 5.872461798771443e-07, -7.309200163448699e-07, 7.477252151146886e-07, -6.378323232711703e-07, 4.5700618015047133e-07, -2.750628401019148e-07, 1.377657287814025e-07, -5.5907869992597255e-08, 1.712664555162862e-08, -3.0258541408386185e-09, -4.057911503930884e-10, 5.685928650775004e-10),
    (0.9999999999815149, 1.7934357034341337e-10, -8.518819591312136e-10, 2.6378450138010383e-09, -5.9809212547337285e-09, 1.0572396879853772e-08, -1.5144716058506144e-08, 1.8036305869912202e-08, -1.8172816922269425e-08, 1.5675358387690353e-08, -1.1660867459902382e-08, 7.505690524657273e-09, -4.175206898701798e-09, 1.992617916086827e-09, -8.015568520213184e-10, 2.609475976217993e-10, -6.142267001878952e-11),
    (0.9999999999998869, 1.2084074716006755e-12, -6.344139225903546e-12, 2.1801684800128854e-11, -5.5114709525037056e-11, 1.0920038456253917e-10, -1.7640341711110032e-10, 2.386050341041412e-10, -2.7536837502359233e-10, 2.748676808961636e-10, -2.396566871589998e-10, 1.8378485359603671e-10, -1.2450012763001698e-10, 7.463941860429059e-11, -3.956196470530362e-11, 1.8452304418895604e-11, -7.49376222594815e-12),
    (0.9999999999999996, 4.938485140964219e-15, -2.8396289560544257e-14, 1.0720628160176492e-13, -2.9875262975155936e-13, 6.549691639480571e-13, -1.175690196300027e-12, 1.775545997743364e-12, -2.300413758263223e-12, 2.5941725248862415e-12, -2.5743359577057163e-12, 2.2668502698927728e-12, -1.782347272631223e-12, 1.2570078056760755e-12, -7.975073209089227e-13, 4.55792741517898e-13, -2.345585121932816e-13),
)
# fmt: on
ERF_COLUMNS = len(ERF_TAYLOR[0])
ERF_CONSTANT_ROW = len(ERF_TAYLOR)
ERF_ROWS = np.concatenate([np.array(ERF_TAYLOR).reshape(-1), [1.0] + [0.0] * (ERF_COLUMNS - 1)])


@kernel()
def exp_nonpositive(x: np.ndarray, n: int, out: np.ndarray, powers: np.ndarray) -> None:
    """``out[:n]`` = e**x for x <= 0, to about an ulp (0 below -708, where e**x is not a normal number).

    x = k ln2 + r with |r| <= ln2/2, a degree-13 Taylor polynomial of e**r, and 2**k written
    straight into a float64's exponent bits (``powers``), so the loop vectorizes."""
    for j in range(n):
        v = max(x[j], -708.0)
        k = np.floor(v * INV_LN2 + 0.5)
        r = (v - k * LN2_HI) - k * LN2_LO
        p = EXP_TERMS[13]
        for m in range(12, -1, -1):
            p = p * r + EXP_TERMS[m]
        out[j] = p
        powers[j] = (np.int64(k) + 1023) << 52
    scale = powers.view(np.float64)
    for j in range(n):
        out[j] = out[j] * scale[j] if x[j] >= -708.0 else 0.0


@kernel()
def erf_abs(a: np.ndarray, out: np.ndarray, rows: np.ndarray) -> None:
    """``out`` = erf(a) for a >= 0 (an array), to about 1e-16, from ``ERF_ROWS``: each element's row
    of Taylor coefficients is picked first (``rows``), then one Horner step runs over all elements."""
    n = a.size
    t = np.empty(n)
    for e in range(n):
        inside = a[e] < 6.0  # beyond 6 (and for NaN) the last row: erf = 1
        i = int(a[e] * 2.0) if inside else ERF_CONSTANT_ROW
        rows[e] = i * ERF_COLUMNS
        t[e] = a[e] - (0.5 * i + 0.25) if inside else 0.0
        out[e] = ERF_ROWS[rows[e] + ERF_COLUMNS - 1]
    for k in range(ERF_COLUMNS - 2, -1, -1):
        for e in range(n):
            out[e] = out[e] * t[e] + ERF_ROWS[rows[e] + k]


@kernel()
def to_fixed(x: np.ndarray, ints: np.ndarray, back: np.ndarray) -> None:
    """Each row of ``x`` as integers below 2**FIXED_BITS (``ints``) times a power of two (``back``).

    The power of two is chosen from the row's largest magnitude, so the scaling is exact and
    only bits below 2**-FIXED_BITS of that magnitude are rounded (to nearest even)."""
    for r in range(x.shape[0]):
        largest = 0.0
        for c in range(x.shape[1]):
            largest = max(largest, abs(x[r, c]))
        shift = 0
        if largest > 0.0:
            shift = FIXED_BITS - math.frexp(largest)[1]
        scale = math.ldexp(1.0, shift)
        back[r] = math.ldexp(1.0, -shift)
        for c in range(x.shape[1]):
            ints[r, c] = np.rint(x[r, c] * scale)


@kernel()
def from_fixed(product: np.ndarray, back: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> None:
    """In place: an exact integer product back to values, times each column's weight scale, plus bias."""
    for r in range(product.shape[0]):
        for c in range(product.shape[1]):
            product[r, c] = (product[r, c] * back[r]) * scale[c] + bias[c]


@kernel()
def add_layer_norm(
    a: np.ndarray, b: np.ndarray | None, gamma: np.ndarray, beta: np.ndarray, eps: float, out: np.ndarray
) -> None:
    """``out`` = LayerNorm(a + b) row by row (b may be None), sums in column order."""
    n = a.shape[1]
    for r in range(a.shape[0]):
        total = 0.0
        for c in range(n):
            z = a[r, c] + b[r, c] if b is not None else a[r, c]
            out[r, c] = z
            total += z
        mean = total / n
        spread = 0.0
        for c in range(n):
            d = out[r, c] - mean
            spread += d * d
        inverse = 1.0 / math.sqrt(spread / n + eps)
        for c in range(n):
            out[r, c] = (out[r, c] - mean) * inverse * gamma[c] + beta[c]


@kernel()
def gelu(x: np.ndarray, root2: float) -> None:
    """In place, row by row: x * 0.5 * (1 + erf(x / root2)), the exact GELU."""
    width = x.shape[1]
    scaled = np.empty(width)
    value = np.empty(width)
    rows = np.empty(width, np.int64)
    for r in range(x.shape[0]):
        for c in range(width):
            scaled[c] = abs(x[r, c] / root2)
        erf_abs(scaled, value, rows)
        for c in range(width):
            v = x[r, c]
            e = value[c] if v >= 0.0 else -value[c]
            x[r, c] = v * (0.5 * (1.0 + e))


@kernel()
def attention(qkv: np.ndarray, mask: np.ndarray, heads: int, scale: float, out: np.ndarray) -> None:
    """Multi-head self-attention over ``qkv`` rows (batch * length, 3 * width) into ``out``; keys where
    ``mask`` is 0 take no weight. A score sums over the head's dimensions in order, an output over
    the unmasked keys in order (the loops run across keys or dimensions, so they vectorize)."""
    batch, length = mask.shape
    width = qkv.shape[1] // 3
    size = width // heads
    keys = np.empty((size, length))
    values = np.empty((length, size))
    scores = np.empty(length)
    weights = np.empty(length)
    powers = np.empty(length, np.int64)
    row = np.empty(size)
    for b in range(batch):
        base = b * length
        for h in range(heads):
            q0, k0, v0 = h * size, width + h * size, 2 * width + h * size
            valid = 0
            for j in range(length):
                if mask[b, j]:
                    for d in range(size):
                        keys[d, valid] = qkv[base + j, k0 + d] * scale
                        values[valid, d] = qkv[base + j, v0 + d]
                    valid += 1
            for i in range(length):
                for j in range(valid):
                    scores[j] = 0.0
                for d in range(size):
                    qd = qkv[base + i, q0 + d] * scale
                    for j in range(valid):
                        scores[j] += qd * keys[d, j]
                top = -np.inf
                for j in range(valid):
                    top = max(top, scores[j])
                for j in range(valid):
                    scores[j] -= top
                exp_nonpositive(scores, valid, weights, powers)
                total = 0.0
                for j in range(valid):
                    total += weights[j]
                for d in range(size):
                    row[d] = 0.0
                for j in range(valid):
                    w = weights[j] / total
                    for d in range(size):
                        row[d] += w * values[j, d]
                for d in range(size):
                    out[base + i, q0 + d] = row[d]


@kernel()
def mean_pool_unit(hidden: np.ndarray, mask: np.ndarray, out: np.ndarray) -> None:
    """Each sequence's mean over its unmasked tokens, scaled to unit length (float32 ``out``)."""
    batch, length = mask.shape
    width = hidden.shape[1]
    row = np.empty(width)
    for b in range(batch):
        row[:] = 0.0
        count = 0
        for i in range(length):
            if mask[b, i]:
                count += 1
                for c in range(width):
                    row[c] += hidden[b * length + i, c]
        squares = 0.0
        for c in range(width):
            row[c] = row[c] / max(count, 1)
            squares += row[c] * row[c]
        norm = max(math.sqrt(squares), 1e-12)
        for c in range(width):
            out[b, c] = row[c] / norm


@kernel()
def dots(matrix: np.ndarray, rows: np.ndarray, query: np.ndarray, out: np.ndarray) -> None:
    """``out[i]`` = matrix[rows[i]] . query in float64, summed in column order: the same on every CPU."""
    for i in range(rows.size):
        total = 0.0
        for c in range(query.size):
            total += float(matrix[rows[i], c]) * float(query[c])
        out[i] = total
