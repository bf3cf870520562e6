/* Separable blur with clamp-to-edge borders (see the task instruction). */
void blur(int h, int w, const float *in, float *out, const float *taps, int radius)
{
    for (int x = 0; x < w; x++)
        for (int y = 0; y < h; y++) {
            float sum = 0.0f;
            for (int dy = -radius; dy <= radius; dy++)
                for (int dx = -radius; dx <= radius; dx++) {
                    int yy = y + dy < 0 ? 0 : y + dy >= h ? h - 1 : y + dy;
                    int xx = x + dx < 0 ? 0 : x + dx >= h ? h - 1 : x + dx;
                    sum += taps[dy + radius] * taps[dx + radius] * in[yy * w + xx];
                }
            out[y * w + x] = sum;
        }
}
