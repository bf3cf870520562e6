"""Rolling statistics over a stream of integer sensor readings."""
import math


def rolling_stats(values, window):
    """Mean and standard deviation of every window of `window` consecutive readings."""
    means, stds = [], []
    for i in range(len(values) - window):
        chunk = values[i:i + window]
        mean = sum(chunk) / window
        var = sum((x - mean) ** 2 for x in chunk) / (window - 1)
        means.append(mean)
        stds.append(math.sqrt(var))
    return means, stds
