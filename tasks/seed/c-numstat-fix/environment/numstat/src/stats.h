#ifndef NUMSTAT_STATS_H
#define NUMSTAT_STATS_H

#include <stddef.h>

/* All functions take an array of n >= 1 values. sort_values sorts in place (ascending). */
void sort_values(double *v, size_t n);
double mean(const double *v, size_t n);
double median(double *v, int n);
double stddev(const double *v, size_t n);

#endif
