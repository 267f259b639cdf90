#!/bin/sh
# KRN-04: ia32 and x32 syscall ABIs
# Guarantee: seccomp rules cannot be sidestepped
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# The attack is a C program (below). `KRN-04.sh N --compile OUT` compiles it (the harness
# does that outside and runs OUT as the preset's executable); without --compile the script
# compiles it into $TMPDIR and runs it.
SRC=$(cat <<'EOF'
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *N;
static unsigned *a;

static long ia32(long nr, long b, long c, long d, long s) {
    long r;
    asm volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(b), "c"(c), "d"(d), "S"(s) : "memory");
    return r;
}

/* Each call in its own child: a filter that kills (SIGSYS) ends only that child. */
static void probe(const char *label, int which) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        long r = 0;
        switch (which) {
        case 0: r = ia32(20, 0, 0, 0, 0); break;                 /* ia32 getpid */
        case 1: r = ia32(102, 1, (long)a, 0, 0); break;          /* socketcall(SOCKET, AF_UNIX) */
        case 2: r = ia32(359, 1, 1, 0, 0); break;                /* ia32 socket(AF_UNIX) */
        case 3: r = ia32(310, 0x10000000, 0, 0, 0); break;       /* unshare(CLONE_NEWUSER) */
        case 4: r = ia32(26, 16, 1, 0, 0); break;                /* ptrace(ATTACH, 1) */
        case 5: r = syscall(0x40000000 | 41, 1, 1, 0);           /* x32 socket(AF_UNIX) */
                if (r < 0) r = -errno; break;
        case 6: r = syscall(0x40000000 | 272, 0x10000000);       /* x32 unshare(NEWUSER) */
                if (r < 0) r = -errno; break;
        }
        if (r >= 0 || (r != -EPERM && r != -ENOSYS && r != -EACCES))
            printf("ESC-%s %s returned %ld (%s)\n", N, label, r, r < 0 ? strerror(-r) : "OK");
        else
            printf("%s: %ld (%s)\n", label, r, strerror(-r));
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st))
        printf("%s: killed by signal %d%s\n", label, WTERMSIG(st),
               WTERMSIG(st) == SIGSYS ? " (SIGSYS)" : "");
}

int main(int argc, char **argv) {
    N = argc > 1 ? argv[1] : "?";
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    a = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (a == MAP_FAILED) { perror("mmap"); return 1; }
    a[0] = 1; a[1] = 1; a[2] = 0;
    probe("ia32 getpid", 0);
    probe("ia32 socketcall(AF_UNIX)", 1);
    probe("ia32 socket(AF_UNIX)", 2);
    probe("ia32 unshare(NEWUSER)", 3);
    probe("ia32 ptrace(ATTACH,1)", 4);
    probe("x32 socket(AF_UNIX)", 5);
    probe("x32 unshare(NEWUSER)", 6);
    printf("done\n");
    return 0;
}
EOF
)
if [ "$1" = "--compile" ]; then
    printf '%s\n' "$SRC" | gcc -O0 -x c -o "$2" - || exit 1
    exit 0
fi
out="${TMPDIR:-/tmp}/krn04-$N"
printf '%s\n' "$SRC" | gcc -O0 -x c -o "$out" - && exec "$out" "$N"
