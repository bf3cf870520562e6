/* The reference kernel the speed is measured against: for each value, scan the bins in order. */
void histogram(long n, const double *values, int bins, const double *edges, long *counts)
{
    for (int b = 0; b < bins; b++)
        counts[b] = 0;
    for (long i = 0; i < n; i++) {
        double v = values[i];
        for (int b = 0; b < bins; b++)
            if (edges[b] <= v && (v < edges[b + 1] || (b == bins - 1 && v == edges[bins]))) {
                counts[b]++;
                break;
            }
    }
}
