"""python3 bench.py MODULE N WINDOW SEED: makes N integer readings from SEED (large offsets,
slow drifts, long constant stretches), calls rolling_stats(values, WINDOW) from the Python file
MODULE and prints {"mean": [...], "std": [...]} as JSON."""
import importlib.util
import json
import random
import sys


def readings(n, seed):
    rng = random.Random(seed)
    value = rng.choice([0, 1, -1]) * rng.randrange(10**9)
    out = []
    while len(out) < n:
        kind = rng.random()
        run = rng.randrange(1, 400)
        if kind < 0.3:
            out += [value] * run  # a sensor stuck on one reading
        else:
            spread = rng.choice([1, 3, 50, 10**4])
            for _ in range(run):
                value += rng.randint(-spread, spread)
                out.append(value)
    return out[:n]


def main():
    module, n, window, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    spec = importlib.util.spec_from_file_location("rolling_under_test", module)
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    means, stds = code.rolling_stats(readings(n, seed), window)
    sys.stdout.write(json.dumps({"mean": [float(m) for m in means], "std": [float(s) for s in stds]}))


main()
