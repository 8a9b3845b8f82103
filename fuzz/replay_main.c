/* fuzz/replay_main.c - a main for the fuzz targets without libFuzzer: every
 * file named (or in a directory named) is given to LLVMFuzzerTestOneInput
 * once. The normal build links each fuzz_<name>.c with it and the suite
 * replays corpus/<name>/ (CTest fuzz/<name>), so a target that no longer
 * compiles, links or passes its own seeds fails every build, not only the
 * next `make fuzz` (issue 46 row 16). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feed one file; 0, or 1 when it cannot be read. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        free(buf);
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

/* Feed a file, or every regular file of a directory; returns the inputs fed. */
static int replay(const char *path, int *errors)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s: not found\n", path);
        (*errors)++;
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        *errors += replay_file(path);
        return 1;
    }
    DIR *d = opendir(path);
    if (!d) {
        (*errors)++;
        return 0;
    }
    int fed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            *errors += replay_file(full);
            fed++;
        }
    }
    closedir(d);
    return fed;
}

int main(int argc, char **argv)
{
    int errors = 0, fed = 0;
    for (int i = 1; i < argc; i++)
        fed += replay(argv[i], &errors);
    printf("replay: %d inputs, %d unreadable\n", fed, errors);
    /* no input at all is a corpus gone missing, not a pass */
    return errors || fed == 0 ? 1 : 0;
}
