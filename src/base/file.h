/* Opening files without surprises. Readers use file_open_regular: it never
 * blocks (a FIFO without a writer, a terminal) and accepts only a regular
 * file. Every failed system call is reported with its reason. */
#ifndef BMOE_BASE_FILE_H
#define BMOE_BASE_FILE_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* "a FIFO", "a directory", ... for a st_mode, for messages. */
const char *file_kind_name(mode_t mode);

/* Opens path read-only (close-on-exec): open non-blocking, fstat, refuse
 * anything but a regular file, then clear the non-blocking flag. Returns the
 * descriptor with the file's size in *size, or -1 with "PATH: reason". */
int file_open_regular(const char *path, uint64_t *size, bmoe_error *err);

#endif
