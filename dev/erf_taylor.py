"""Regenerate the erf Taylor table of ``fhs/retrieval/exact_math.py`` (needs ``pip install mpmath``).

erf is expanded around the centres 0.25, 0.75, ..., 5.75 (intervals of width 0.5, so
|t| <= 0.25) to degree 16, with the derivatives written through Hermite polynomials:
erf^(m+1)(c) = 2/sqrt(pi) (-1)^m H_m(c) exp(-c^2). Computed at 40 digits and printed
as float64 literals (repr round-trips), so the table is the same bytes on every machine;
the truncation error is below 4e-17 (checked at 40 digits below).

    python -m dev.erf_taylor > /tmp/table.txt
"""

import mpmath as mp

mp.mp.dps = 40
CENTRES = [0.25 + 0.5 * i for i in range(12)]
DEGREE = 16


def coefficients(centre: float) -> list[float]:
    c = mp.mpf(centre)
    out = [mp.erf(c)]
    for m in range(DEGREE):
        out.append(2 / mp.sqrt(mp.pi) * (-1) ** m * mp.hermite(m, c) * mp.e ** (-c * c) / mp.factorial(m + 1))
    return [float(value) for value in out]


def main() -> None:
    worst = mp.mpf(0)
    rows = []
    for centre in CENTRES:
        row = coefficients(centre)
        rows.append(row)
        for step in range(-25, 26):
            t = mp.mpf(step) / 100
            value = sum(mp.mpf(a) * t ** k for k, a in enumerate(row))
            worst = max(worst, abs(value - mp.erf(centre + t)))
    print("ERF_TAYLOR = (")
    for row in rows:
        print("    (" + ", ".join(repr(value) for value in row) + "),")
    print(")")
    print(f"# worst |error| on a grid of each interval: {float(worst):.2e}")


if __name__ == "__main__":
    main()
