#include <math.h>
#include <stdlib.h>

#include "stats.h"

static int cmp_double(const void *a, const void *b)
{
    return (int)(*(const double *)a - *(const double *)b);
}

void sort_values(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
}

double mean(const double *v, size_t n)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    return sum / n;
}

/* v must be sorted */
double median(double *v, size_t n)
{
    return v[n / 2];
}

/* population standard deviation */
double stddev(const double *v, size_t n)
{
    double m = mean(v, n), acc = 0.0;
    for (size_t i = 0; i < n; i++)
        acc += (v[i] - m) * (v[i] - m);
    return sqrt(acc / (n - 1));
}
