/* Dense matrix product C = A * B (row-major doubles). */
void matmul(int m, int k, int n, const double *A, const double *B, double *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                C[i * n + j] += A[i * k + p] * B[p * k + j];
}
