/* tilegraph/status.h - status codes and error messages.
 *
 * Every function that can fail returns a tg_status. TG_OK is zero. On failure
 * a sentence naming the object at fault (op, tensor, device, file or option)
 * is kept per thread and returned by tg_error_message() until the next
 * failure on that thread. Codes, names and default messages come from one
 * X-macro list, so they cannot drift apart; a new code goes at the end, so
 * the numbers of the others never change (python/tilegraph/_lib.py copies
 * them).
 *
 * TG_ERR_NOMEM is this process failing to allocate; TG_ERR_CAPACITY is a
 * compiled plan that does not fit its device (memoryPerDevice, a tile's
 * memory): the same program on a larger device, or with a remedy such as
 * recomputation or more stages, would compile.
 */
#ifndef TILEGRAPH_STATUS_H
#define TILEGRAPH_STATUS_H

#include "tilegraph/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_STATUS_LIST(X)                                                                          \
    X(TG_OK, "ok")                                                                                 \
    X(TG_ERR_INVALID_ARG, "invalid argument")                                                      \
    X(TG_ERR_SHAPE, "shape mismatch")                                                              \
    X(TG_ERR_DTYPE, "unsupported data type")                                                       \
    X(TG_ERR_NOMEM, "out of memory")                                                               \
    X(TG_ERR_IO, "input/output error")                                                             \
    X(TG_ERR_FORMAT, "malformed file")                                                             \
    X(TG_ERR_CONFIG, "invalid configuration")                                                      \
    X(TG_ERR_NOT_FOUND, "not found")                                                               \
    X(TG_ERR_NUMERIC, "numerical error")                                                           \
    X(TG_ERR_UNSUPPORTED, "unsupported")                                                           \
    X(TG_ERR_INTERNAL, "internal error")                                                           \
    X(TG_ERR_CAPACITY, "does not fit")

typedef enum tg_status {
#define TG_STATUS_ENUM(code, text) code,
    TG_STATUS_LIST(TG_STATUS_ENUM)
#undef TG_STATUS_ENUM
        TG_STATUS_COUNT
} tg_status;

/* "TG_ERR_SHAPE" for TG_ERR_SHAPE; "TG_UNKNOWN" for a value out of range. */
TG_API const char *tg_status_name(tg_status s);

/* The message of the last failure on the calling thread ("" if none). The
 * pointer stays valid until the next failure on this thread. */
TG_API const char *tg_error_message(void);

/* Forget the calling thread's last message. */
TG_API void tg_error_clear(void);

/* Record a message for the calling thread, as the library does on a failure,
 * and return `status`: for a program that reports its own failures through
 * tg_error_message() like the library's (fmt NULL: the status's default
 * text). */
TG_API tg_status tg_error_set(tg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
