/* The reference kernel the speed is measured against: the textbook triple loop. */
void matmul(int m, int k, int n, const double *A, const double *B, double *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int p = 0; p < k; p++)
                sum += A[(long)i * k + p] * B[(long)p * n + j];
            C[(long)i * n + j] = sum;
        }
}
