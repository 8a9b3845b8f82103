/* tilegraph/options.h - session options, by their PopTorch-style names.
 *
 * Options are key/value pairs validated against one table (docs/options.md
 * lists it): an unknown key or a malformed value is an error whose message
 * names the key and lists the valid ones. The same keys are accepted from the
 * C API, from command-line flags and from JSON.
 *
 *     tg_options *o = tg_options_create();
 *     tg_options_set(o, "randomSeed", "42");
 *     tg_options_set_int(o, "threadsPerDevice", 2);
 *     ...
 *     tg_options_destroy(o);
 */
#ifndef TILEGRAPH_OPTIONS_H
#define TILEGRAPH_OPTIONS_H

#include "tilegraph/export.h"

#include "tilegraph/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_options tg_options;

TG_API tg_options *tg_options_create(void);
TG_API void tg_options_destroy(tg_options *o);
TG_API tg_options *tg_options_clone(const tg_options *o);

/* Set from text ("42", "true", "pipelined"); validated against the table. */
TG_API tg_status tg_options_set(tg_options *o, const char *key, const char *value);
TG_API tg_status tg_options_set_int(tg_options *o, const char *key, int64_t value);
/* Apply every key of a JSON object: {"randomSeed": 42, "threadsPerDevice": "2"}.
 * `source` names the text in error messages (a file name or an env var). */
TG_API tg_status tg_options_set_json(tg_options *o, const char *json, const char *source);

TG_API int64_t tg_options_get_int(const tg_options *o, const char *key);
TG_API double tg_options_get_float(const tg_options *o, const char *key);
TG_API const char *tg_options_get_string(const tg_options *o, const char *key);

/* Number of options in the table and their names, defaults and descriptions
 * (for --help and docs). */
TG_API int tg_options_count(void);
TG_API const char *tg_options_key(int index);
TG_API const char *tg_options_default(int index);
TG_API const char *tg_options_description(int index);

#ifdef __cplusplus
}
#endif
#endif
