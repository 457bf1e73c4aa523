#ifndef SWIFTPLEX_CSPAWN_H
#define SWIFTPLEX_CSPAWN_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (NULL-terminated) via posix_spawn: the child's standard
/// input, output and error are `fds[0..2]` (-1: /dev/null), every other descriptor is closed in the
/// child (closefrom, no reading of /proc/self/fd), signal dispositions are reset to their defaults
/// and the signal mask is emptied; the child starts in `cwd` when it is not NULL.
/// Returns 0 and sets `*pid`, or an errno value.
int swiftplex_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                    const char *cwd, const int fds[3]);

/// pipe2(O_CLOEXEC): both ends close on exec, so no other child inherits them.
int swiftplex_pipe_cloexec(int fds[2]);

/// The parts of a waitpid status.
int swiftplex_exited(int status);
int swiftplex_exit_code(int status);
int swiftplex_signaled(int status);
int swiftplex_term_signal(int status);

#endif
