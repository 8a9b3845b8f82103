/* tools/output.c - human units and progress bars.
 *
 * Progress bars redraw in place on a terminal (at most 10 times a second) and
 * print one line per 10% otherwise, so logs of long runs stay readable.
 */
#include "cli.h"

#include "tilegraph/analyse.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

char *cli_bytes(double b, char *buf, size_t cap)
{
    /* The analyse renderer's units, so commands and views print sizes alike;
     * a negative or NaN size keeps its plain "N B" form. */
    if (b >= 0)
        return tg_format_bytes(b, buf, cap);
    snprintf(buf, cap, "%.0f B", b);
    return buf;
}

char *cli_duration(double s, char *buf, size_t cap)
{
    if (s < 1e-6)
        snprintf(buf, cap, "%.0f ns", s * 1e9);
    else if (s < 1e-3)
        snprintf(buf, cap, "%.1f us", s * 1e6);
    else if (s < 1)
        snprintf(buf, cap, "%.1f ms", s * 1e3);
    else if (s < 60)
        snprintf(buf, cap, "%.2f s", s);
    else
        snprintf(buf, cap, "%d min %02d s", (int)(s / 60), (int)s % 60);
    return buf;
}

double cli_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void cli_progress_start(cli_progress *p, const char *label, int64_t total, bool enabled)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total > 0 ? total : 1;
    p->start = cli_now();
    p->enabled = enabled;
    p->tty = isatty(STDERR_FILENO);
}

static void draw(cli_progress *p, bool final)
{
    int pct = (int)(100 * p->done / p->total);
    char el[32], eta[32];
    double elapsed = cli_now() - p->start;
    cli_duration(elapsed, el, sizeof el);
    double remaining = p->done > 0 ? elapsed * (double)(p->total - p->done) / (double)p->done : 0;
    cli_duration(remaining, eta, sizeof eta);
    if (p->tty) {
        enum { WIDTH = 24 };
        char bar[WIDTH * 3 + 1];
        int full = (int)(WIDTH * p->done / p->total), used = 0;
        for (int i = 0; i < WIDTH; i++) {
            const char *c = i < full ? "\xe2\x96\x88" : "\xc2\xb7"; /* block, middle dot */
            size_t n = strlen(c);
            memcpy(bar + used, c, n);
            used += (int)n;
        }
        bar[used] = '\0';
        fprintf(stderr, "\r\033[K%s %3d%% |%s| %lld/%lld [%s%s%s] %s", p->label, pct, bar,
                (long long)p->done, (long long)p->total, el, final ? "" : " < ", final ? "" : eta,
                p->status);
        if (final)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s %3d%% %lld/%lld [%s] %s\n", p->label, pct, (long long)p->done,
                (long long)p->total, el, p->status);
    }
    fflush(stderr);
}

void cli_progress_update(cli_progress *p, int64_t done, const char *status)
{
    int64_t before = p->done;
    p->done = done;
    if (status)
        snprintf(p->status, sizeof p->status, "%s", status);
    if (!p->enabled)
        return;
    double now = cli_now();
    if (p->tty) {
        if (now - p->last_draw >= 0.1) {
            p->last_draw = now;
            draw(p, false);
        }
    } else if (10 * done / p->total != 10 * before / p->total && done < p->total) {
        draw(p, false);
    }
}

/* The bar ends where the work did: a run stopped early (--max-steps, a
 * signal) shows how far it got, not 100%. */
void cli_progress_finish(cli_progress *p, const char *status)
{
    if (status)
        snprintf(p->status, sizeof p->status, "%s", status);
    if (p->enabled)
        draw(p, true);
}

void cli_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}
