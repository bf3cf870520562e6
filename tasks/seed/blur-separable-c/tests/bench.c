/* bench H W RADIUS SEED: fills an H x W image with pseudo-random values in [0, 1) and 2*RADIUS+1
 * positive filter taps summing to 1 from SEED, fills the output with garbage, calls blur() and
 * writes the output image to standard output as raw native floats (row-major). */
#include <stdio.h>
#include <stdlib.h>

void blur(int h, int w, const float *in, float *out, const float *taps, int radius);

static unsigned long long state;

static float next_value(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((state >> 40) / 16777216.0);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench H W RADIUS SEED\n");
        return 2;
    }
    long h = atol(argv[1]), w = atol(argv[2]), r = atol(argv[3]);
    state = strtoull(argv[4], NULL, 10);
    if (h < 1 || w < 1 || h > 4096 || w > 4096 || r < 0 || r > 16) {
        fprintf(stderr, "bench: H and W must be 1..4096, RADIUS 0..16\n");
        return 2;
    }
    float *in = malloc(sizeof(float) * h * w), *out = malloc(sizeof(float) * h * w);
    float taps[33], total = 0.0f;
    if (!in || !out)
        return 3;
    for (long i = 0; i < h * w; i++)
        in[i] = next_value();
    for (long t = 0; t <= 2 * r; t++)
        total += taps[t] = 0.25f + next_value();
    for (long t = 0; t <= 2 * r; t++)
        taps[t] /= total;
    for (long i = 0; i < h * w; i++)
        out[i] = -1e30f;
    blur((int)h, (int)w, in, out, taps, (int)r);
    if (fwrite(out, sizeof(float), (size_t)(h * w), stdout) != (size_t)(h * w))
        return 4;
    return 0;
}
