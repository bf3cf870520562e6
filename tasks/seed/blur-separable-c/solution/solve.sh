#!/bin/bash
# Reference solution: the filter is separable (weight taps[dy] * taps[dx]), so blur each row with
# the 1-D taps (edges clamped through a padded copy of the row), then blur the columns of that
# result, walking whole rows so the inner loops are contiguous: 2(2r+1) instead of (2r+1)^2
# multiply-adds per pixel. The x clamp also uses the width, not the height.
set -euo pipefail
cd /app/blur
cat > blur.c <<'C'
#include <stdlib.h>

static int clamp(int v, int n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

void blur(int h, int w, const float *in, float *out, const float *taps, int radius)
{
    float *tmp = malloc(sizeof(float) * (size_t)h * (size_t)w);
    float *row = malloc(sizeof(float) * ((size_t)w + 2 * (size_t)radius));
    if (!tmp || !row)
        abort();
    for (int y = 0; y < h; y++) {
        const float *line = in + (long)y * w;
        for (int i = 0; i < w + 2 * radius; i++)
            row[i] = line[clamp(i - radius, w)];
        float *t = tmp + (long)y * w;
        for (int x = 0; x < w; x++)
            t[x] = 0.0f;
        for (int d = 0; d <= 2 * radius; d++)
            for (int x = 0; x < w; x++)
                t[x] += taps[d] * row[x + d];
    }
    for (int y = 0; y < h; y++) {
        float *o = out + (long)y * w;
        for (int x = 0; x < w; x++)
            o[x] = 0.0f;
        for (int d = 0; d <= 2 * radius; d++) {
            const float *t = tmp + (long)clamp(y + d - radius, h) * w;
            for (int x = 0; x < w; x++)
                o[x] += taps[d] * t[x];
        }
    }
    free(row);
    free(tmp);
}
C
make -s clean bench
./bench 2 3 1 7 | od -A n -t f4
