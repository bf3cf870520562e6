#ifndef KV_CONFIG_H
#define KV_CONFIG_H

#include <stdio.h>

struct entry {
    char *section; /* "" for keys before the first [section] */
    char *key;
    char *value;
};

struct config {
    struct entry *entries;
    size_t count;
};

/* Parse an INI-style file. Returns 0 on success, -1 on error (errno set). */
int config_load(FILE *in, struct config *cfg);
/* Look up "section.key" (or just "key" for the unnamed section); NULL when absent. */
const char *config_get(const struct config *cfg, const char *dotted);
void config_free(struct config *cfg);

#endif
