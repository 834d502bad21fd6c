#!/usr/bin/env python3
"""Prints the constants and tables of src/mathfn.c, computed from their
definitions at 400 bits with mpmath (pip install mpmath).

    python3 tools/gen_mathfn.py

Every double is printed as Python's repr (at most 17 significant digits),
which names exactly one double; C compilers following Annex F convert such
literals correctly rounded, so the tables are the same bits everywhere.
"""
import mpmath
from mpmath import mp, mpf

mp.prec = 400


def d(x):
    """x rounded to the nearest double, as a C literal."""
    return repr(float(mpf(x)))


def bits_round(x, nbits):
    """x rounded to nbits significant bits (a double with trailing zeros)."""
    x = mpf(x)
    e = int(mpmath.floor(mpmath.log(abs(x), 2)))
    scale = mpf(2) ** (nbits - 1 - e)
    return mpmath.nint(x * scale) / scale


def main():
    ln2 = mpmath.log(2)
    print("/* expf: 2^(j/32) = e^(j ln2 / 32), j = 0..31, as hi + lo */")
    for j in range(32):
        v = mpf(2) ** (mpf(j) / 32)
        hi = mpf(float(v))
        print("    {%s, %s}," % (d(hi), d(v - hi)))
    print()
    c1 = ln2 / 32
    print("32/ln2 =", d(32 / ln2))
    print("expf poly in r (units of ln2/32): c1..c4 =", ", ".join(d(c1 ** i / mpmath.factorial(i)) for i in range(1, 5)))
    l1 = bits_round(c1, 37)
    print("ln2/32 = L1 + L2: L1 (37 bits) =", d(l1), " L2 =", d(c1 - l1))
    h = bits_round(ln2, 42)
    print("ln2 = hi (42 bits) + lo:", d(h), d(ln2 - h))
    print("1/n! n=2..13:", ", ".join(d(mpf(1) / mpmath.factorial(n)) for n in range(2, 14)))
    print("1/n n=3..9:", ", ".join(d(mpf(1) / n) for n in range(3, 10)))
    print("pi/2 * 2^-64 =", d(mpmath.pi / 2 / mpf(2) ** 64))
    print()
    print("/* log: for the top 7 fraction bits i of the mantissa m1 in [1, 2):")
    print("   invc (26 bits, about 1/c for the centre c of m's interval), -log(invc) as hi + lo */")
    for i in range(128):
        if i in (0, 127):
            invc = mpf(1)
        else:
            lo = (1 + mpf(i) / 128) / (1 if i < 64 else 2)
            c = lo + mpf(1) / (256 if i < 64 else 512)
            invc = mpmath.nint(mpf(2) ** 25 / c) / mpf(2) ** 25
        lc = -mpmath.log(invc)
        hi = mpf(float(lc))
        print("    {%s, %s, %s}," % (d(invc), d(hi), d(lc - hi)))
    print()
    print("/* 2/pi in 32-bit words: bits -31..0 (zero), then 1..224 after the binary point */")
    g = int(mpmath.floor(2 / mpmath.pi * mpf(2) ** 224))
    words = [0] + [(g >> (32 * (6 - k))) & 0xFFFFFFFF for k in range(7)]
    print("   ", ", ".join("0x%08xu" % w for w in words))


if __name__ == "__main__":
    main()
