"""Create /app/data deterministically: files of chosen sizes and modification times."""
import datetime
import os
import random
import sys

root = sys.argv[1]
rng = random.Random(2718)
UTC = datetime.timezone.utc
CUT = datetime.datetime(2024, 1, 1, tzinfo=UTC)
LIMIT = 100 * 1024
dirs = ["reports/2022", "reports/2023", "reports/2024", "media/raw", "media/thumbs", "exports",
        "exports/old batch", ".cache", "scratch/tmp"]
names = ["summary", "q1 results", "dump", "photo", "clip", "-dash", "notes", "data", "backup"]
exts = [".csv", ".bin", ".jpg", ".json", ".log", ""]
files = []
for i in range(46):
    d = rng.choice(dirs)
    name = f"{rng.choice(names)}_{i}{rng.choice(exts)}"
    size = rng.choice([rng.randint(0, 4000), rng.randint(50_000, 99_000), rng.randint(101_000, 320_000)])
    when = datetime.datetime(2022, 6, 1, tzinfo=UTC) + datetime.timedelta(seconds=rng.randrange(60_000_000))
    files.append((f"{d}/{name}", size, when))
# boundary cases: exactly the size limit, one byte less, exactly the cut-off time, one second before
files += [("exports/exact_limit.bin", LIMIT, CUT - datetime.timedelta(days=3)),
          ("exports/just_below.bin", LIMIT - 1, CUT - datetime.timedelta(days=3)),
          ("media/raw/at_cutoff.raw", 200_000, CUT),
          ("media/raw/before_cutoff.raw", 200_000, CUT - datetime.timedelta(seconds=1)),
          ("scratch/tmp/only_old_big.bin", 150_000, CUT - datetime.timedelta(days=400)),
          # directories that become empty once their files are archived
          ("exports/2019 dump/part-1.bin", 130_000, CUT - datetime.timedelta(days=500)),
          ("exports/2019 dump/part-2.bin", 131_000, CUT - datetime.timedelta(days=499)),
          ("media/raw/old/deeper/clip.raw", 110_000, CUT - datetime.timedelta(days=90))]
for rel, size, when in files:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(rng.randbytes(size))
    t = when.timestamp()
    os.utime(path, (t, t))
os.symlink("reports/2023", os.path.join(root, "latest-reports"))
os.symlink(os.path.join("..", files[0][0]), os.path.join(root, "exports", "link-to-first"))
for d, _, _ in os.walk(root):  # directory times are not part of the task but keep them stable
    os.utime(d, (CUT.timestamp(), CUT.timestamp()))
