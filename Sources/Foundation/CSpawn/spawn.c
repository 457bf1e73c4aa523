#define _GNU_SOURCE
#include "cspawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

int swiftplex_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                    const char *cwd, const int fds[3]) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attributes);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return rc;
    }
    for (int target = 0; target < 3 && rc == 0; target++) {
        if (fds[target] >= 0) {
            // dup2 onto 0/1/2 clears close-on-exec on the copy.
            rc = posix_spawn_file_actions_adddup2(&actions, fds[target], target);
        } else {
            rc = posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0);
        }
    }
    if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (rc == 0 && cwd != NULL) rc = posix_spawn_file_actions_addchdir_np(&actions, cwd);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attributes, &all);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attributes, &none);
    if (rc == 0) rc = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (rc == 0) rc = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}

int swiftplex_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : errno;
}

int swiftplex_exited(int status) { return WIFEXITED(status); }
int swiftplex_exit_code(int status) { return WEXITSTATUS(status); }
int swiftplex_signaled(int status) { return WIFSIGNALED(status); }
int swiftplex_term_signal(int status) { return WTERMSIG(status); }
