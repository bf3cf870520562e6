#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define MAX_ENTRIES 64

static char *trim(char *s)
{
    char *end;
    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s) - 1;
    while (isspace((unsigned char)*end))
        end--;
    end[1] = '\0';
    return s;
}

static struct entry *find(const struct config *cfg, const char *section, const char *key)
{
    for (size_t i = 0; i < cfg->count; i++) {
        struct entry *e = &cfg->entries[i];
        if (strcmp(e->section, section) == 0 && strncmp(e->key, key, strlen(e->key)) == 0)
            return e;
    }
    return NULL;
}

int config_load(FILE *in, struct config *cfg)
{
    char line[128];
    static char section[32] = "";

    cfg->entries = malloc(MAX_ENTRIES * sizeof *cfg->entries);
    cfg->count = 0;
    if (!cfg->entries)
        return -1;
    while (fgets(line, sizeof line, in)) {
        char *s = trim(line), *eq;
        struct entry *e;
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (close) {
                *close = '\0';
                strcpy(section, trim(s + 1));
            }
            continue;
        }
        eq = strchr(s, '=');
        if (!eq)
            continue;
        *eq = '\0';
        e = find(cfg, section, trim(s));
        if (!e) {
            e = &cfg->entries[cfg->count++];
            e->section = section;
            e->key = strdup(trim(s));
        }
        e->value = strdup(trim(eq + 1));
    }
    return 0;
}

const char *config_get(const struct config *cfg, const char *dotted)
{
    const char *dot = strchr(dotted, '.');
    char section[32] = "";
    const struct entry *e;

    if (dot) {
        memcpy(section, dotted, dot - dotted);
        section[dot - dotted] = '\0';
        dotted = dot + 1;
    }
    e = find(cfg, section, dotted);
    return e ? e->value : NULL;
}

void config_free(struct config *cfg)
{
    free(cfg->entries);
    cfg->entries = NULL;
    cfg->count = 0;
}
