// Files that survive a crash or a power cut: written aside, flushed to disk, then renamed into
// place (and the directory flushed), so a reader finds the old contents or the new, never half.
// Training checkpoints and the served draft versions are kept this way.
#pragma once
#include <string>

namespace eaglet {

// Writes `bytes` to `path` atomically and durably (path.tmp, fsync, rename, fsync the folder).
void write_file_durably(const std::string& path, const std::string& bytes);
// Flushes a file or a folder (its entries: renames and new files in it) to disk.
void fsync_path(const std::string& path);
// rename(2), then flushes the folder of `to` (and of `from`, when it differs).
void rename_durably(const std::string& from, const std::string& to);
// Flushes every regular file directly in `dir`, then `dir` itself.
void fsync_folder(const std::string& dir);

// A named point where a test can make the process die as a crash would (SIGKILL): the
// environment variable EAGLET_CRASH_AT=NAME[:N] kills it the N-th time (default first) NAME is
// reached. Never set in production; tests/test_crash_recovery.cpp drives it.
void crash_point(const char* name);

}  // namespace eaglet
