/* kvget: print one value, or every entry, of an INI-style configuration file. */
#include <stdio.h>

#include "config.h"

int main(int argc, char **argv)
{
    struct config cfg;
    FILE *in;
    int rc = 0;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: kvget FILE [SECTION.KEY]\n");
        return 64;
    }
    if (!(in = fopen(argv[1], "r"))) {
        perror(argv[1]);
        return 66;
    }
    if (config_load(in, &cfg) != 0) {
        perror("kvget");
        fclose(in);
        return 70;
    }
    fclose(in);
    if (argc == 3) {
        const char *v = config_get(&cfg, argv[2]);
        if (v) {
            printf("%s\n", v);
        } else {
            fprintf(stderr, "kvget: %s not found\n", argv[2]);
            rc = 1;
        }
    } else {
        for (size_t i = 0; i < cfg.count; i++) {
            const struct entry *e = &cfg.entries[i];
            if (e->section[0])
                printf("%s.%s=%s\n", e->section, e->key, e->value);
            else
                printf("%s=%s\n", e->key, e->value);
        }
    }
    config_free(&cfg);
    return rc;
}
