#!/usr/bin/env python3
# The reference values of fleet_sdc_test.cpp's ExactIntervalsAgreeWithReferenceValuesTo1e12: exact
# 95% Garwood (Poisson) and Clopper-Pearson (binomial) bounds by bisection of the tails in 50-digit
# decimal arithmetic, independent of Boost.Math.
from decimal import Decimal as D, getcontext
from math import comb

getcontext().prec = 50
a = D("0.025")


def poisson_cdf(k, mu):  # P(X <= k)
    t = (-mu).exp()
    s = t
    for j in range(1, k + 1):
        t = t * mu / j
        s += t
    return s


def binomial_cdf(k, n, p):
    return sum(D(comb(n, j)) * p**j * (1 - p) ** (n - j) for j in range(k + 1))


def bisect(f, target, lo, hi, decreasing):
    for _ in range(200):
        mid = (lo + hi) / 2
        if (f(mid) > target) == decreasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


for k in [1, 10, 1000]:
    lo = bisect(lambda m: 1 - poisson_cdf(k - 1, m), a, D(0), D(3 * k + 10), False)
    hi = bisect(lambda m: poisson_cdf(k, m), a, D(0), D(3 * k + 20), True)
    print("garwood", k, format(lo, ".20e"), format(hi, ".20e"))
lo = bisect(lambda p: 1 - binomial_cdf(2, 10, p), a, D(0), D(1), False)
hi = bisect(lambda p: binomial_cdf(3, 10, p), a, D(0), D(1), True)
print("clopper-pearson 3/10", format(lo, ".20e"), format(hi, ".20e"))
print("garwood 0 upper = -ln(0.025)", format(-a.ln(), ".20e"))
