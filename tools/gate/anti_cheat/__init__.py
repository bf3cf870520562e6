"""The `anti_cheat` stage: every task is hacked before it is admitted (the oracle audit for leaks and near misses, exploit probes, the cheat agent), and each probe's trial judged."""
