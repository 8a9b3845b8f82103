/* tools/save_lock.h - one run at a time writes a checkpoint path.
 *
 * Two runs given the same --save would each replace the file in turn, and
 * the one that ends last would win without a word (its weights, with the
 * other's name on the command line). `train` takes a lock on PATH.lock for
 * as long as it runs, as a profile directory is locked (profile.c): an fcntl
 * lock, so it goes away with the process however that ends; the file holds
 * the owner's pid for the message and is removed at the end. */
#ifndef TG_TOOLS_SAVE_LOCK_H
#define TG_TOOLS_SAVE_LOCK_H

typedef struct save_lock {
    int fd; /* -1: none held */
    char path[1100];
} save_lock;

/* Lock `path` (the checkpoint's name) for this run. Returns 0, or -1 after
 * printing which run holds it and what to do. */
int save_lock_take(save_lock *l, const char *command, const char *path);
void save_lock_release(save_lock *l);

#endif
