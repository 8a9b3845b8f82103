/* tools/save_rescue.c - a checkpoint written somewhere when --save's place
 * cannot take it (save_rescue.h). */
#include "save_rescue.h"

#include "tilegraph/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void pause_for(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    if (s > 0)
        nanosleep(&ts, NULL);
}

/* $TMPDIR/tilegraph-rescued-PID-BASENAME (or /tmp). */
static void second_place(const char *target, char *out, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    snprintf(out, cap, "%s/tilegraph-rescued-%ld-%s", dir, (long)getpid(), base);
}

tg_status save_rescue_write_to(save_rescue *r, const char *command, const char *target,
                               save_rescue_write write, void *ctx)
{
    tg_status st = write(target, ctx);
    if (st != TG_ERR_IO)
        return st;
    if (r->where[0]) /* a save went to the second place already: the later ones follow it */
        return write(r->where, ctx);
    char first[600];
    snprintf(first, sizeof first, "%s", tg_error_message());
    fprintf(stderr, "tilegraph %s: %s; trying again\n", command, first);
    pause_for(r->pause_s);
    if ((st = write(target, ctx)) != TG_ERR_IO)
        return st;
    snprintf(first, sizeof first, "%s", tg_error_message());
    char place[sizeof r->where];
    second_place(target, place, sizeof place);
    if (write(place, ctx) != TG_OK) {
        char second[600];
        snprintf(second, sizeof second, "%s", tg_error_message());
        return tg_error_set(TG_ERR_IO, "%s; and the second place failed too: %s", first, second);
    }
    snprintf(r->where, sizeof r->where, "%s", place);
    fprintf(stderr,
            "tilegraph %s: %s; the checkpoint was written to %s instead: move it to %s once "
            "there is room (it resumes as it is: --resume %s)\n",
            command, first, place, target, place);
    return TG_OK;
}
