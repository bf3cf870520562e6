/* Count values into the bins [edges[b], edges[b+1]). */
void histogram(long n, const double *values, int bins, const double *edges, long *counts)
{
    for (long i = 0; i < n; i++)
        for (int b = 0; b < bins; b++)
            if (edges[b] <= values[i] && values[i] < edges[b + 1])
                counts[b]++;
}
