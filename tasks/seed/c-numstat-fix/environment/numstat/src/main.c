/* numstat: read one number per line from a file (or stdin) and print summary statistics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

static int read_values(FILE *in, double **out, size_t *count)
{
    char line[256];
    size_t n = 0, cap = 16;
    double *v = malloc(cap * sizeof *v);
    int lineno = 0;

    if (!v)
        return -1;
    while (fgets(line, sizeof line, in)) {
        char *end;
        double x;
        line[strcspn(line, "\r\n")] = '\0';
        errno = 0;
        x = strtod(line, &end);
        if (errno || *end != '\0') {
            fprintf(stderr, "numstat: invalid number on line %d\n", lineno);
            free(v);
            return 2;
        }
        if (n == cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof *v);
            if (!v)
                return -1;
        }
        v[n++] = x;
        lineno++;
    }
    *out = v;
    *count = n;
    return 0;
}

int main(int argc, char **argv)
{
    FILE *in = stdin;
    double *v = NULL;
    size_t n = 0;
    int rc;

    if (argc > 2) {
        fprintf(stderr, "usage: numstat [FILE]\n");
        return 64;
    }
    if (argc == 2 && !(in = fopen(argv[1], "r"))) {
        perror(argv[1]);
        return 66;
    }
    rc = read_values(in, &v, &n);
    if (rc != 0)
        return rc < 0 ? 70 : rc;
    printf("count: %zu\n", n);
    sort_values(v, n);
    printf("min: %.3f\n", v[0]);
    printf("max: %.3f\n", v[n - 1]);
    printf("mean: %.3f\n", mean(v, n));
    printf("median: %.3f\n", median(v, n));
    printf("stddev: %.3f\n", stddev(v, n));
    free(v);
    return 0;
}
