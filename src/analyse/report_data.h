/* analyse/report_data.h - the data of one profile as the JSON object the HTML
 * report page reads: meta, devices, memory, tensors, steps, schedule,
 * liveness, the trace of run 0 and ops; on tiled targets the bytes per tile
 * and category, and the host threads' regions when the profile has a
 * host_trace. */
#ifndef TG_ANALYSE_REPORT_DATA_H
#define TG_ANALYSE_REPORT_DATA_H

#include "core/json.h"
#include "profile/reader.h"

/* Append one object to `w`: {"meta": {key: value, ...}, "devices": T, ...}
 * where each table T is {"cols": [names], "rows": [[values], ...]} (rows as
 * arrays keep the embedded page small). */
tg_status tg_report_data_write(tg_profile_reader *r, tg_json_writer *w);

#endif
