/* core/error.h - setting the per-thread error message (internal). */
#ifndef TG_CORE_ERROR_H
#define TG_CORE_ERROR_H

#include "tilegraph/status.h"

#if defined(__GNUC__)
#define TG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TG_PRINTF(a, b)
#endif

/* Record a message for the calling thread and return `status`, so callers
 * write `return tg_error(TG_ERR_IO, "cannot open '%s': %s", path, why);`.
 * The library's own name for the public tg_error_set (tilegraph/status.h):
 * one function records every message. */
#define tg_error tg_error_set

/* Prefix the current message with "context: " (for adding the file or op name
 * on the way up) and return `status` unchanged. */
tg_status tg_error_prefix(tg_status status, const char *fmt, ...) TG_PRINTF(2, 3);

/* Evaluate a call returning tg_status and return it from the caller on failure. */
#define TG_TRY(expr)                                                                               \
    do {                                                                                           \
        tg_status tg_try_s_ = (expr);                                                              \
        if (tg_try_s_ != TG_OK)                                                                    \
            return tg_try_s_;                                                                      \
    } while (0)

#endif
