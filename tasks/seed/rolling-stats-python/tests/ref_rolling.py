"""The reference the speed is measured against: every window summed from scratch."""


def rolling_stats(values, window):
    means, stds = [], []
    for i in range(len(values) - window + 1):
        chunk = values[i:i + window]
        mean = sum(chunk) / window
        means.append(mean)
        stds.append((sum((x - mean) ** 2 for x in chunk) / window) ** 0.5)
    return means, stds
