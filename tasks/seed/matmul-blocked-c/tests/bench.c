/* bench M K N SEED: fills A (MxK) and B (KxN) with pseudo-random values from SEED, fills C with
 * garbage, calls matmul() and writes C to standard output as raw native doubles (row-major). */
#include <stdio.h>
#include <stdlib.h>

void matmul(int m, int k, int n, const double *A, const double *B, double *C);

static unsigned long long state;

static double next_value(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench M K N SEED\n");
        return 2;
    }
    long m = atol(argv[1]), k = atol(argv[2]), n = atol(argv[3]);
    state = strtoull(argv[4], NULL, 10);
    if (m < 1 || k < 1 || n < 1 || m > 2048 || k > 2048 || n > 2048) {
        fprintf(stderr, "bench: sizes must be 1..2048\n");
        return 2;
    }
    double *A = malloc(sizeof(double) * m * k), *B = malloc(sizeof(double) * k * n);
    double *C = malloc(sizeof(double) * m * n);
    if (!A || !B || !C)
        return 3;
    for (long i = 0; i < m * k; i++)
        A[i] = next_value();
    for (long i = 0; i < k * n; i++)
        B[i] = next_value();
    for (long i = 0; i < m * n; i++)
        C[i] = 1e300;
    matmul((int)m, (int)k, (int)n, A, B, C);
    if (fwrite(C, sizeof(double), (size_t)(m * n), stdout) != (size_t)(m * n))
        return 4;
    return 0;
}
