/* Opening files without surprises. Readers use file_open_regular: it never
 * blocks (a FIFO without a writer, a terminal) and accepts only a regular
 * file. Writers replace a file through a file_replacement: the data goes to
 * a new temporary file beside the target, synced, then renamed over it, so a
 * failed write leaves the old file as it was, and the only file ever removed
 * is that temporary. Targets that are not regular files (devices, FIFOs,
 * directories) are refused before anything is written; a symbolic link is
 * written through (the file it points to is replaced, the link stays), and
 * a replaced file keeps its permission bits. Every failed system call is
 * reported with its reason. */
#ifndef BMOE_BASE_FILE_H
#define BMOE_BASE_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* "a FIFO", "a directory", ... for a st_mode, for messages. */
const char *file_kind_name(mode_t mode);

/* Whether two paths name one file, whatever the names (symbolic and hard
 * links, "./", ".."): an existing file by its device and inode, a file not
 * created yet by its name in the same folder. */
bool file_same(const char *path, const char *other);

/* Opens path read-only (close-on-exec): open non-blocking, fstat, refuse
 * anything but a regular file, then clear the non-blocking flag. Returns the
 * descriptor with the file's size in *size, or -1 with "PATH: reason". */
int file_open_regular(const char *path, uint64_t *size, bmoe_error *err);

typedef struct file_replacement {
    char *target;    /* the file replaced (a symbolic link resolved), owned */
    char *temporary; /* the new file beside it, owned; NULL once renamed or removed */
    int fd;          /* the temporary, open for writing; -1 once closed */
} file_replacement;

/* Checks path (a regular file, a link to one, or nothing yet) and creates
 * the temporary file beside it. On failure r holds nothing to release. */
int file_replacement_begin(file_replacement *r, const char *path, bmoe_error *err);

/* Syncs the temporary to disk, closes it and renames it over the target. */
int file_replacement_commit(file_replacement *r, bmoe_error *err);

/* Releases r; a temporary that was not committed is closed and removed.
 * Never touches the target. Safe after a failed begin and after commit. */
void file_replacement_release(file_replacement *r);

#endif
