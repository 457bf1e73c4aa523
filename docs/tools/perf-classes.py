#!/usr/bin/env python3
"""Shares of a perf profile by class of work (docs/performance.md, "Relay": where a relay message's time goes).

    perf record -F 999 -g -o relay.data swiftplex-bench relay --only relay --rounds 3
    perf script -i relay.data | swift demangle --simplified > relay.txt
    python3 docs/tools/perf-classes.py relay.txt

Each sample goes to the class of the leaf-most frame of its call chain that matches one (so
malloc under BlockCodec counts as block codec); a sample whose chain matches none is "other"
(or libsodium / kernel when its leaf is there: libsodium has no frame pointers, so chains
through it stop at it). The main thread (process start) is left out.
"""
import collections
import re
import sys

CLASSES = [
    ("fsync (WAL commit)", r"fdatasync|fsync|unixSync|ext4_sync|jbd2"),
    ("SQLite statements", r"libsqlite3|GRDB"),
    ("auth: client makes authenticator", r"AuthPrivateKey\.authorization|Transmission\.signed"),
    ("auth: relay verifies", r"SessionKeys\.verify|RelayCore\.verify"),
    ("seal MSG (relay)", r"ReceivedMessage\.seal|sealedDelivery"),
    ("open MSG (client)", r"ReceivedMessage\.open|RecipientQueue\.open"),
    ("TLS (NIOSSL/BoringSSL)", r"NIOSSL|BoringSSL|boringSSL"),
    ("socket I/O syscalls", r"sendmsg|recvmsg|writev|readv|tcp_|__sys_sendto|__sys_recvfrom|sock_|ksys_read|ksys_write"),
    ("hand-offs / wake-ups (futex, eventfd, dispatch, epoll, task switch)",
     r"futex|eventfd|epoll|sem_post|sem_wait|schedule|try_to_wake_up|_dispatch|dispatch_|DispatchQueue"
     r"|SelectableEventLoop|NIOThread|pthread_cond"),
    ("Swift concurrency (tasks, continuations)", r"swift_task|swift_job|swift_continuation|Continuation|TaskGroup|AsyncStream|swift::|_Concurrency"),
    ("block codec", r"BlockCodec|BlockDecoder|ByteToMessageHandler"),
    ("transmission/command encode+decode", r"Transmission\.|ClientCommand|ServerResponse|readShortBytes|writeShortBytes"),
    ("relay core (state, dictionaries, lock)", r"RelayCore|RelayStore|GroupCommit|RelayConnectionHandler|ConnectionBudget|WorkTally|WorkMeter"),
    ("client library (RelayConnection/handler)", r"RelayClientHandler|RelayConnection\.|RecipientQueue|RelayBench|Recorder"),
    ("NIO pipeline/other", r"NIOCore|NIOPosix"),
]
PATTERNS = [(name, re.compile(p)) for name, p in CLASSES]


def samples(path):
    """(thread name, call chain leaf first) of each sample."""
    comm, chain = None, []
    for line in open(path, errors="replace"):
        if not line.strip():
            if comm is not None:
                yield comm, chain
            comm, chain = None, []
        elif line.startswith("\t") or line.startswith(" " * 8):
            chain.append(line.strip())
        else:
            if comm is not None:
                yield comm, chain
            comm, chain = line.split()[0], []
    if comm is not None:
        yield comm, chain


def classify(chain):
    for frame in chain:
        for name, rx in PATTERNS:
            if rx.search(frame):
                return name
    if chain and "libsodium" in chain[0]:
        return "libsodium (caller unknown)"
    if chain and "kernel" in chain[0]:
        return "kernel other"
    return "other"


def main():
    classes, threads, total = collections.Counter(), collections.Counter(), 0
    for comm, chain in samples(sys.argv[1]):
        if comm.startswith("bench-") or comm.startswith("swiftplex-bench"):
            continue
        total += 1
        classes[classify(chain)] += 1
        threads[comm] += 1
    print(f"samples {total}")
    for name, n in classes.most_common():
        print(f"{100 * n / total:5.1f}%  {name}")
    print("threads:", ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in threads.most_common()))


if __name__ == "__main__":
    main()
