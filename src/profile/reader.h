/* profile/reader.h - opening a profile for reading, validated.
 *
 * A profile that is not a SQLite file, is truncated or corrupt, lacks a
 * table, or was written by a newer tilegraph (a higher schema_version) is
 * rejected with a message naming the file and what is wrong. Read-only.
 */
#ifndef TG_PROFILE_READER_H
#define TG_PROFILE_READER_H

#include "tilegraph/status.h"

#include <stdint.h>

typedef struct sqlite3 sqlite3;
typedef struct tg_profile_reader tg_profile_reader;

tg_status tg_profile_reader_open(const char *path, tg_profile_reader **out);
/* The pid of the run writing DIR/<kind> now (its .profile.lock held), or 0:
 * a profile being written has no file under its final name yet. */
long tg_profile_writer_pid(const char *kind_dir);
void tg_profile_reader_close(tg_profile_reader *r);

sqlite3 *tg_profile_reader_db(const tg_profile_reader *r);
const char *tg_profile_reader_path(const tg_profile_reader *r);
int tg_profile_reader_schema(const tg_profile_reader *r);

/* A value from the meta table ("" if absent); valid until the next call. */
const char *tg_profile_reader_meta(tg_profile_reader *r, const char *key);
/* The single integer a query returns (the first column of the first row);
 * `fallback` when there is no row. */
tg_status tg_profile_reader_int(tg_profile_reader *r, const char *sql, int64_t fallback,
                                int64_t *out);

#endif
