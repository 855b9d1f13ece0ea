"""Trial statistics of the gradwire/PyTorch comparison (experiments/bench).

The same figures as Summarize in internal/bench (Go), here taken over the
trials of several processes of one side. Self-test: python3 benchstats.py
(runs the examples below, worked by hand; prints nothing when they pass).
"""


def median(values):
    """Median; the mean of the middle two for an even count.

    >>> median([3, 1, 2])
    2
    >>> median([0.30, 0.10, 0.20, 0.12])  # (0.12 + 0.20) / 2
    0.16
    """
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("median of no values")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def summarize(trial_seconds):
    """Best (fastest) trial, median trial, spread (slowest / fastest) and
    median / best of per-trial step times in seconds.

    Trials 0.30, 0.10, 0.20, 0.12 s: best 0.10, median 0.16, spread
    0.30 / 0.10 = 3, median / best 1.6.

    >>> s = summarize([0.30, 0.10, 0.20, 0.12])
    >>> s["best"], s["median"], round(s["spread"], 12), round(s["median_over_best"], 12)
    (0.1, 0.16, 3.0, 1.6)
    """
    best = min(trial_seconds)
    med = median(trial_seconds)
    return {"best": best, "median": med, "spread": max(trial_seconds) / best, "median_over_best": med / best}


def stable(stats, max_spread):
    """Whether a side's trials agree: its median trial is within max_spread
    of its best. Half the trials or more are then that close to the best, so
    both the best and the median stand for the side.

    >>> stable(summarize([1.0, 1.4, 1.5]), 1.5)  # median 1.4 / best 1.0
    True
    >>> stable(summarize([1.0, 1.6, 5.0]), 1.5)  # median 1.6 / best 1.0
    False
    """
    return stats["median_over_best"] <= max_spread


def ratio_cells(gradwire, pytorch, max_spread, gradwire_name="gradwire"):
    """The two ratio cells (of the bests, of the medians): gradwire samples/s
    over PyTorch samples/s, that is PyTorch seconds over gradwire seconds,
    or, when either side's trials disagree by more than max_spread (see
    stable), which side was unstable instead of a number.

    gradwire best 10 ms, median 11 ms; PyTorch best 20 ms, median 26 ms:
    ratios 20/10 = 2.00x and 26/11 = 2.36x.

    >>> ratio_cells(summarize([0.010, 0.011, 0.012]), summarize([0.020, 0.026, 0.027]), 1.5)
    ('2.00x', '2.36x')

    PyTorch bimodal, median 0.1 s over best 0.02 s = 5:

    >>> ratio_cells(summarize([0.010, 0.011]), summarize([0.02, 0.1, 0.1]), 1.5, "openblas")
    ('unstable: PyTorch', 'unstable: PyTorch')
    >>> ratio_cells(summarize([0.01, 0.03, 0.03]), summarize([0.02, 0.1, 0.1]), 1.5, "openblas")
    ('unstable: openblas, PyTorch', 'unstable: openblas, PyTorch')
    """
    bad = [name for name, s in ((gradwire_name, gradwire), ("PyTorch", pytorch)) if not stable(s, max_spread)]
    if bad:
        cell = "unstable: " + ", ".join(bad)
        return cell, cell
    return f"{pytorch['best'] / gradwire['best']:.2f}x", f"{pytorch['median'] / gradwire['median']:.2f}x"


if __name__ == "__main__":
    import doctest
    import sys

    failed, _ = doctest.testmod()
    sys.exit(1 if failed else 0)
