/* tools/run_output.h - the instances' output of a job over several hosts,
 * each line prefixed by its instance's host and rank (run_output.c). */
#ifndef TG_TOOLS_RUN_OUTPUT_H
#define TG_TOOLS_RUN_OUTPUT_H

#include <stddef.h>

enum { RUN_OUTPUT_RANKS = 64, RUN_OUTPUT_LINE = 65536 };

/* One stream of mpirun's (--tag-output) and where its lines go. */
typedef struct run_stream {
    int in, out; /* in: -1 once it ended */
    size_t used;
    char line[RUN_OUTPUT_LINE];
} run_stream;

/* The hosts of the instances (NULL: unknown, shown as '?'). */
typedef struct run_hosts {
    int n;
    const char *host[RUN_OUTPUT_RANKS];
} run_hosts;

/* Read what is there on s->in (call when poll says so) and write its whole
 * lines to s->out, OpenMPI's "[job,rank]<stdout>:" tag made "[host:rank] ".
 * At the stream's end the rest is written and s->in becomes -1. */
void run_output_read(run_stream *s, const run_hosts *h);

#endif
