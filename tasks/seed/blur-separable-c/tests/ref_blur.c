/* The reference kernel the speed is measured against: the direct 2-D gather, clamped at the
 * edges, one output pixel at a time. */
void blur(int h, int w, const float *in, float *out, const float *taps, int radius)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float sum = 0.0f;
            for (int dy = -radius; dy <= radius; dy++) {
                int yy = y + dy < 0 ? 0 : y + dy >= h ? h - 1 : y + dy;
                for (int dx = -radius; dx <= radius; dx++) {
                    int xx = x + dx < 0 ? 0 : x + dx >= w ? w - 1 : x + dx;
                    sum += taps[dy + radius] * taps[dx + radius] * in[(long)yy * w + xx];
                }
            }
            out[(long)y * w + x] = sum;
        }
}
