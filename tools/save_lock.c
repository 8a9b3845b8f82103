/* tools/save_lock.c - the lock of a checkpoint path (save_lock.h). */
#include "save_lock.h"

#include "tilegraph/files.h"

#include <stdio.h>
#include <unistd.h>

int save_lock_take(save_lock *l, const char *command, const char *path)
{
    snprintf(l->path, sizeof l->path, "%s.lock", path);
    char owner[32];
    if (tg_file_lock(l->path, &l->fd, owner) == TG_OK)
        return 0;
    if (!owner[0])
        fprintf(stderr, "tilegraph %s: --save %s: %s\n", command, path, tg_error_message());
    else
        fprintf(stderr,
                "tilegraph %s: --save %s: another run (pid %s) is writing that checkpoint; "
                "the one ending last would replace the other's weights. Wait for it, or "
                "give this run another --save FILE (nothing was trained)\n",
                command, path, owner);
    return -1;
}

void save_lock_release(save_lock *l)
{
    if (l->fd < 0)
        return;
    /* removed while still held: a run that opened it meanwhile sees the
     * lock and is refused; one that comes later makes a new file */
    unlink(l->path);
    close(l->fd);
    l->fd = -1;
}
