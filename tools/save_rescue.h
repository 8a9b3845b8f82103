/* tools/save_rescue.h - a checkpoint that cannot be written where --save
 * says is not lost with the run (issue 46, row 12).
 *
 * A full disk at the final --save used to end a run of hours with "the
 * previous file is kept": the weights only the run held were gone. A save
 * that fails for want of room or on a failing device (TG_ERR_IO) is tried
 * again after a pause (space may be freed meanwhile), then written to a
 * second place: $TMPDIR (or /tmp), under a name that says what it is and
 * which run made it. The run says where it went and how to continue, and
 * ends with exit code 1 so that scripts notice the target was not written. */
#ifndef TG_TOOLS_SAVE_RESCUE_H
#define TG_TOOLS_SAVE_RESCUE_H

#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>

/* What write(path) does: write the checkpoint to that path. */
typedef tg_status (*save_rescue_write)(const char *path, void *ctx);

typedef struct save_rescue {
    char where[1200]; /* the second place, once a save went there; "" otherwise */
    double pause_s;   /* before trying the target again: 1 s (tests: 0) */
} save_rescue;

/* Write to `target` through `write`: TG_OK when it is written there, or,
 * after a failed retry, at the second place (r->where names it, and a
 * message on stderr says what happened and where it went). Other failures
 * (out of memory, a bad argument) and a second place that fails too are
 * returned as they are, with both reasons in the message. Once a save went
 * to the second place, a later one that fails at the target goes there at
 * once (a --checkpoint-every run keeps its latest weights in one place). */
tg_status save_rescue_write_to(save_rescue *r, const char *command, const char *target,
                               save_rescue_write write, void *ctx);

#endif
