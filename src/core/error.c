/* core/error.c - status names and the per-thread error message. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TG_ERROR_CAP 1024

static _Thread_local char tg_last_message[TG_ERROR_CAP];

const char *tg_status_name(tg_status s)
{
    static const char *const names[] = {
#define TG_STATUS_NAME(code, text) #code,
        TG_STATUS_LIST(TG_STATUS_NAME)
#undef TG_STATUS_NAME
    };
    if ((unsigned)s >= TG_STATUS_COUNT)
        return "TG_UNKNOWN";
    return names[s];
}

static const char *status_text(tg_status s)
{
    static const char *const texts[] = {
#define TG_STATUS_TEXT(code, text) text,
        TG_STATUS_LIST(TG_STATUS_TEXT)
#undef TG_STATUS_TEXT
    };
    return (unsigned)s < TG_STATUS_COUNT ? texts[s] : "unknown error";
}

const char *tg_error_message(void)
{
    return tg_last_message;
}

void tg_error_clear(void)
{
    tg_last_message[0] = '\0';
}

static tg_status set_message(tg_status status, const char *fmt, va_list ap)
{
    if (!fmt)
        snprintf(tg_last_message, sizeof tg_last_message, "%s", status_text(status));
    else
        vsnprintf(tg_last_message, sizeof tg_last_message, fmt, ap);
    return status;
}

tg_status tg_error_set(tg_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(status, fmt, ap);
    va_end(ap);
    return status;
}

tg_status tg_error_prefix(tg_status status, const char *fmt, ...)
{
    char prefix[TG_ERROR_CAP], old[TG_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tg_last_message, sizeof old);
    snprintf(tg_last_message, sizeof tg_last_message, "%s: %s", prefix,
             old[0] ? old : status_text(status));
    return status;
}
