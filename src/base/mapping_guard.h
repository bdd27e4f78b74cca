/* Read-only file mappings that survive their file being cut short. Reading a
 * page of a shared file mapping past the file's end raises SIGBUS, which
 * kills the process; a model file truncated while mapped would end any run
 * that way. A guarded mapping's reads past the end read zeros instead, and
 * the guard remembers that it happened, so the engine can fail the
 * evaluation with an error naming the file (it asks between layers and after
 * each evaluation, one atomic load each: nothing on the compute threads).
 *
 * Why process-wide state: a fault is delivered to the process's one SIGBUS
 * handler, and only a handler can tell a bad read in a mapping from any
 * other. The first guard installs it (once, never removed); it handles only
 * a SIGBUS of a bad address inside a guarded mapping and passes every other
 * one to the handler it replaced (or, for the default action, ends the
 * process as that would). The guarded mappings are a fixed table the handler
 * reads without locks. What the handler does there: fstat the mapped file
 * for its new size and map anonymous zero pages over the mapping from the
 * file's end (both single system calls, safe in a handler). */
#ifndef BMOE_BASE_MAPPING_GUARD_H
#define BMOE_BASE_MAPPING_GUARD_H

#include <stdbool.h>
#include <stddef.h>

/* Guards the read-only mapping [base, base + size) of the file open as fd
 * (which must stay open while guarded). Returns the guard, or -1 when the
 * table is full (the mapping then works unguarded, as before). */
int mapping_guard_add(const void *base, size_t size, int fd);

/* Stops guarding (before the mapping is unmapped); -1 is ignored. */
void mapping_guard_remove(int guard);

/* Whether a read past the file's end hit the mapping since it was guarded. */
bool mapping_guard_faulted(int guard);

#endif
