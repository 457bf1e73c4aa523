// A hostile "plugin runner" for the isolation tests: it speaks the host's frame protocol
// (Sources/Host/PluginHost/Frames.swift) just well enough to be started, then misbehaves in the way
// its plugin path names (the path's last component). Given a real plugin (a path ending in .so)
// it execs the real runner instead, so one PluginManager can run a good plugin and a bad one.
//
//   huge-seq      answers the first event with `done` for sequence number 2^64 - 1
//   huge-level    sends a `log` frame with level 2^32
//   float-level   sends a `log` frame with level 1e30
//   unknown-done  answers the first event with `done` for an event never sent
//   event-frame   sends the host an `event` frame
//   huge-frame    announces a frame of 2^31 - 1 bytes
//   endless-line  writes 64 MiB to stderr without a newline, then sleeps
//   call-flood    sends 5,000 `call` frames (Chat API commands) at once, reading answers
//   no-read       stops reading its stdin after `start` and sleeps
//   silent        never says hello
//
// Built by the tests with: cc -O1 -DREAL_RUNNER='"<path>"' -o hostile-runner hostile_runner.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef REAL_RUNNER
#define REAL_RUNNER "swiftplex-plugin-runner"
#endif

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) exit(3);
        c += w;
        n -= (size_t)w;
    }
}

static void frame(uint8_t kind, const void *body, uint32_t n) {
    uint32_t len = n + 1;
    uint8_t h[5] = { len >> 24, (len >> 16) & 0xFF, (len >> 8) & 0xFF, len & 0xFF, kind };
    write_all(1, h, 5);
    if (n) write_all(1, body, n);
}

static void control(const char *json) { frame(0, json, (uint32_t)strlen(json)); }

static int read_all(void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t r = read(0, c, n);
        if (r <= 0) return 0;
        c += r;
        n -= (size_t)r;
    }
    return 1;
}

// Reads one frame; returns its kind (or -1 at EOF) and its body in *body (malloc'd).
static int next(uint8_t **body, uint32_t *n) {
    uint8_t h[4];
    if (!read_all(h, 4)) return -1;
    uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if (len == 0) return -1;
    uint8_t *b = malloc(len);
    if (!b || !read_all(b, len)) return -1;
    *body = b;
    *n = len;
    return b[0];
}

static void done(uint64_t seq) {
    uint8_t b[9];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(seq >> (56 - 8 * i));
    b[8] = 1;
    frame(2, b, 9);
}

int main(int argc, char **argv) {
    if (argc != 2) return 64;
    const char *path = argv[1];
    size_t len = strlen(path);
    if (len > 3 && strcmp(path + len - 3, ".so") == 0) {
        execl(REAL_RUNNER, REAL_RUNNER, path, (char *)NULL);
        return 127;
    }
    const char *mode = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (strcmp(mode, "silent") == 0) { for (;;) pause(); }
    control("{\"op\":\"hello\",\"info\":{\"name\":\"hostile\",\"version\":\"1\",\"events\":[\"*\"]}}");
    int events = 0;
    for (;;) {
        uint8_t *b = NULL;
        uint32_t n = 0;
        int kind = next(&b, &n);
        if (kind < 0) return 0;
        if (kind == 0 && n > 1 && memmem(b, n, "\"start\"", 7)) {
            control("{\"op\":\"started\"}");
            if (strcmp(mode, "no-read") == 0) { for (;;) pause(); }
        } else if (kind == 0 && n > 1 && memmem(b, n, "\"stop\"", 6)) {
            return 0;
        } else if (kind == 1 && n >= 9) {
            uint64_t seq = 0;
            for (int i = 1; i <= 8; i++) seq = seq << 8 | b[i];
            events++;
            if (strcmp(mode, "huge-seq") == 0) { done(UINT64_MAX); }
            else if (strcmp(mode, "unknown-done") == 0) { done(seq + 1000000); }
            else if (strcmp(mode, "huge-level") == 0) { control("{\"op\":\"log\",\"level\":4294967296,\"message\":\"x\"}"); done(seq); }
            else if (strcmp(mode, "float-level") == 0) { control("{\"op\":\"log\",\"level\":1e30,\"message\":\"x\"}"); done(seq); }
            else if (strcmp(mode, "event-frame") == 0) { uint8_t e[9] = { 0 }; frame(1, e, 9); }
            else if (strcmp(mode, "huge-frame") == 0) {
                uint8_t h[5] = { 0x7F, 0xFF, 0xFF, 0xFF, 0 };
                write_all(1, h, 5);
                for (;;) pause();
            } else if (strcmp(mode, "endless-line") == 0) {
                static char chunk[65536];
                memset(chunk, 'A', sizeof chunk);
                for (int i = 0; i < 1024; i++) write_all(2, chunk, sizeof chunk);
                for (;;) pause();
            } else if (strcmp(mode, "call-flood") == 0) {
                if (events == 1) {
                    char call[160];
                    for (int i = 1; i <= 5000; i++) {
                        snprintf(call, sizeof call, "{\"op\":\"call\",\"id\":%d,\"fn\":\"command\",\"command\":\"/flood %d\"}", i, i);
                        control(call);
                    }
                }
                done(seq);
            } else {
                done(seq);
            }
        }
        free(b);
    }
}
