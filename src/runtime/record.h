/* runtime/record.h - the session's part for profiling and tracing
 * (record.c): the execution profile, the devices' recorders of a recorded
 * host step, and the device steps kept for the host trace's export. */
#ifndef TG_RUNTIME_RECORD_H
#define TG_RUNTIME_RECORD_H

#include "runtime/session_state.h"

typedef struct tg_recording tg_recording;

/* The part, with the session's clock origin and its host steps' link ids;
 * NULL when out of memory. Nothing is recorded before tg_recording_start. */
tg_recording *tg_recording_create(void);
/* What program p's options ask for (autoReport.*, the engine trace
 * channel): the profile opened, the devices' recorders and trace tracks
 * allocated. replica_offset: this instance's first replica in an MPI job. */
tg_status tg_recording_start(tg_recording *r, const tg_program *p, const tg_graph *g,
                             int replica_offset);
/* Closes the profile (a failure nobody asked about is printed), writes the
 * host trace's export with the devices' tracks, and frees the part. */
void tg_recording_free(tg_recording *r);

/* The profile being written, or NULL (off, or dropped after a failure). */
struct tg_profile *tg_recording_profile(const tg_recording *r);
/* Whether host step `run` (0-based) is recorded, its link id, and device
 * i's recorder emptied for it. */
bool tg_recording_wants(const tg_recording *r, int64_t run);
uint64_t tg_recording_link(const tg_recording *r, int64_t run);
tg_profile_recorder *tg_recording_device(tg_recording *r, int i);
/* After recorded host step `run`: its device events into the profile and
 * (with host tracing) into the trace tracks of the devices. */
void tg_recording_record_run(tg_recording *r, int64_t run);
void tg_recording_keep_steps(tg_recording *r, uint64_t link);
/* A failure to write the profile (a full disk) must not stop training or
 * cost the weights: the profile is dropped (its temporary removed, the
 * previous profile kept) and the failure kept for tg_recording_finish. */
void tg_recording_drop(tg_recording *r);
/* Closes the profile; the kept failure, once, if writing it failed. */
tg_status tg_recording_finish(tg_recording *r);

#endif
