/* bench N BINS SEED: makes BINS+1 increasing, unevenly spaced edges and N values from SEED (some
 * outside the edges, some exactly on an edge, some NaN), fills counts with garbage, calls
 * histogram() and writes the BINS counts to standard output, one per line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void histogram(long n, const double *values, int bins, const double *edges, long *counts);

static unsigned long long state;

static double next_value(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(state >> 11) / 9007199254740992.0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench N BINS SEED\n");
        return 2;
    }
    long n = atol(argv[1]), bins = atol(argv[2]);
    state = strtoull(argv[3], NULL, 10);
    if (n < 0 || n > 50000000 || bins < 1 || bins > 100000) {
        fprintf(stderr, "bench: N must be 0..50000000, BINS 1..100000\n");
        return 2;
    }
    double *edges = malloc(sizeof(double) * (bins + 1)), *values = malloc(sizeof(double) * (n + 1));
    long *counts = malloc(sizeof(long) * bins);
    if (!edges || !values || !counts)
        return 3;
    edges[0] = -100.0 * next_value();
    for (long b = 1; b <= bins; b++)
        edges[b] = edges[b - 1] + 0.01 + next_value() * next_value();
    double low = edges[0] - 1.0, span = edges[bins] + 1.0 - low;
    for (long i = 0; i < n; i++) {
        double u = next_value();
        if (u < 0.001)
            values[i] = NAN;
        else if (u < 0.1)
            values[i] = edges[(long)(next_value() * (bins + 1))];
        else
            values[i] = low + span * next_value();
    }
    for (long b = 0; b < bins; b++)
        counts[b] = -12345;
    histogram(n, values, (int)bins, edges, counts);
    for (long b = 0; b < bins; b++)
        printf("%ld\n", counts[b]);
    return 0;
}
