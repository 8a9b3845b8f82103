/* tools/run_output.c - `tilegraph run` across hosts passes mpirun
 * --tag-output and rewrites each line's tag, "[1,3]<stdout>:", as the host
 * and rank the plan printed, "[h2:3] " (PopRun prefixes its instances'
 * lines by rank; a rank alone does not say which host to look at). */
#include "run_output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the reader has gone: nothing to do about it here */
        p += w, n -= (size_t)w;
    }
}

/* One line (without its newline) written with its tag rewritten. */
static void emit(const run_stream *s, const run_hosts *h, const char *p, size_t n, int newline)
{
    int job, rank, used = 0;
    char prefix[160];
    /* "[1,3]<stdout>:" or "<stderr>:" */
    if (n > 2 && sscanf(p, "[%d,%d]<%*[a-z]>:%n", &job, &rank, &used) == 2 && used > 0) {
        const char *host = rank >= 0 && rank < h->n && h->host[rank] ? h->host[rank] : "?";
        int k = snprintf(prefix, sizeof prefix, "[%.100s:%d] ", host, rank);
        write_all(s->out, prefix, (size_t)k);
        p += used, n -= (size_t)used;
    }
    write_all(s->out, p, n);
    if (newline)
        write_all(s->out, "\n", 1);
}

void run_output_read(run_stream *s, const run_hosts *h)
{
    ssize_t got = read(s->in, s->line + s->used, sizeof s->line - s->used);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (got <= 0) { /* ended: what is left, without a newline it never had */
        if (s->used)
            emit(s, h, s->line, s->used, 0);
        s->used = 0;
        close(s->in);
        s->in = -1;
        return;
    }
    s->used += (size_t)got;
    size_t start = 0;
    for (size_t i = 0; i < s->used; i++)
        if (s->line[i] == '\n') {
            emit(s, h, s->line + start, i - start, 1);
            start = i + 1;
        }
    if (start == 0 && s->used == sizeof s->line) { /* a line longer than the buffer */
        emit(s, h, s->line, s->used, 0);
        start = s->used;
    }
    memmove(s->line, s->line + start, s->used - start);
    s->used -= start;
}
