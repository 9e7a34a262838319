/*
 * The lab's clock skew: a host whose wall clock is off by a few seconds, as a host whose NTP is broken or
 * slow to correct it is. Test tooling (tests/soak/soak.py skews a host beside a rollout's fault), never part
 * of cargoship.
 *
 * The lab's hosts are containers on one kernel, and Linux keeps one realtime clock for all of them (time
 * namespaces offset only CLOCK_MONOTONIC and CLOCK_BOOTTIME: time_namespaces(7)), so a host's clock cannot be
 * set apart from the control host's. This library, preloaded by every process of a host from its boot (the
 * image's /etc/ld.so.preload), moves what those processes read of the wall clock by the seconds in
 * /etc/cargoship-lab/clock-skew (a signed integer; none, or no file, is no skew). It reads the file again at
 * most once a second, so that a skew changed or removed reaches the processes that have it at once, as a clock
 * step on a real host does.
 *
 * What a skewed host shows, and so what is moved here:
 * - the wall clock: clock_gettime() of CLOCK_REALTIME, CLOCK_REALTIME_COARSE and CLOCK_TAI, gettimeofday()
 *   and time() (the monotonic and boot-time clocks are not the wall clock and stay as they are, as they do
 *   on a real host whose wall clock is off);
 * - the file times the kernel stamped: on a real host they come from the same skewed clock, so that a file
 *   touched now is 0 s old to a process there. stat(), lstat(), fstat(), fstatat() and statx() move every
 *   time they return by the skew. (A time a process set explicitly, as `touch -d` does, was the process's
 *   own skewed time and is moved a second time on reading; nothing the lab's tests or cargoship compare
 *   is set so.)
 * A skew reaches the processes already running (the engine, the kubelet in it, systemd, journald, sshd) within a
 * second, as a real clock step does (clock_settime(2) sets the one realtime clock every process reads): a node the
 * rollout does not restart renews its Lease on the skewed time, as a real kubelet writes its Lease's renewTime
 * from its own clock every 10 s (real-engines.md, "Node status and restarts"; Kubernetes docs, "Leases": node
 * heartbeats), and journald stamps the services' output (their stdout streams, the engine's log) by it, as it
 * would there (measured: a line through systemd-cat 20 s behind on a host 20 s behind).
 * Not moved: timers and timeouts, which count durations (poll, select, nanosleep, timerfd), and the kernel's
 * own stamps elsewhere (/proc; the syslog datagrams journald takes with the kernel's receive time, as logger
 * sends them: measured on the right time on that host). libfaketime does all this and more, but its Debian 12 build
 * hangs Python's threading waits or fails time.sleep() with EINVAL (measured with Python 3.11.2), which is why
 * the lab has its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SKEW_FILE "/etc/cargoship-lab/clock-skew"

static long skew_seconds;
static long read_at = -1000; /* CLOCK_MONOTONIC_COARSE seconds of the last read */
static int (*next_clock_gettime)(clockid_t, struct timespec *);

static void *real(const char *name) { return dlsym(RTLD_NEXT, name); }

/* A signed decimal number of seconds (0 for anything else). Not strtol(): a newer C library than the hosts'
   names it otherwise (__isoc23_strtol), and the library would not load there. */
static long parsed(const char *text) {
    long sign = 1, value = 0;
    while (*text == ' ' || *text == '\t' || *text == '\n')
        text++;
    if (*text == '-' || *text == '+')
        sign = *text++ == '-' ? -1 : 1;
    if (*text < '0' || *text > '9')
        return 0;
    while (*text >= '0' && *text <= '9' && value < 100000000)
        value = value * 10 + (*text++ - '0');
    return sign * value;
}

/* The skew now, read from SKEW_FILE at most once a second (the file through raw syscalls, so that nothing here
   reaches a wrapper; the monotonic clock is not one this library moves). */
static long skew(void) {
    struct timespec now;
    if (!next_clock_gettime)
        next_clock_gettime = real("clock_gettime");
    if (next_clock_gettime(CLOCK_MONOTONIC_COARSE, &now) != 0 || now.tv_sec - read_at < 1)
        return skew_seconds;
    read_at = now.tv_sec;
    int saved = errno;
    long found = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, SKEW_FILE, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char text[32] = {0};
        long got = syscall(SYS_read, fd, text, sizeof(text) - 1);
        syscall(SYS_close, fd);
        if (got > 0)
            found = parsed(text);
    }
    errno = saved;
    skew_seconds = found;
    return found;
}

static int is_wall_clock(clockid_t clock) {
    return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE || clock == CLOCK_TAI;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    if (!next_clock_gettime)
        next_clock_gettime = real("clock_gettime");
    int rc = next_clock_gettime(clock, ts);
    if (rc == 0 && is_wall_clock(clock))
        ts->tv_sec += skew();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    static int (*next)(struct timeval *restrict, void *restrict);
    if (!next)
        next = real("gettimeofday");
    int rc = next(tv, tz);
    if (rc == 0)
        tv->tv_sec += skew();
    return rc;
}

time_t time(time_t *out) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        return (time_t)-1;
    if (out)
        *out = now.tv_sec;
    return now.tv_sec;
}

/* Every time a stat call returns, moved by the skew (struct stat and struct stat64 alike). */
#define MOVED(st)                             \
    do {                                      \
        long by = skew();                     \
        (st)->st_atim.tv_sec += by;           \
        (st)->st_mtim.tv_sec += by;           \
        (st)->st_ctim.tv_sec += by;           \
    } while (0)

#define STAT_WRAPPER(name, params, args)            \
    int name params {                               \
        static int (*next) params;                  \
        if (!next)                                  \
            next = real(#name);                     \
        if (!next) {                                \
            errno = ENOSYS;                         \
            return -1;                              \
        }                                           \
        int rc = next args;                         \
        if (rc == 0)                                \
            MOVED(st);                              \
        return rc;                                  \
    }

STAT_WRAPPER(stat, (const char *restrict path, struct stat *restrict st), (path, st))
STAT_WRAPPER(lstat, (const char *restrict path, struct stat *restrict st), (path, st))
STAT_WRAPPER(fstat, (int fd, struct stat *st), (fd, st))
STAT_WRAPPER(fstatat, (int dirfd, const char *restrict path, struct stat *restrict st, int flags),
             (dirfd, path, st, flags))
STAT_WRAPPER(stat64, (const char *restrict path, struct stat64 *restrict st), (path, st))
STAT_WRAPPER(lstat64, (const char *restrict path, struct stat64 *restrict st), (path, st))
STAT_WRAPPER(fstat64, (int fd, struct stat64 *st), (fd, st))
STAT_WRAPPER(fstatat64, (int dirfd, const char *restrict path, struct stat64 *restrict st, int flags),
             (dirfd, path, st, flags))

int statx(int dirfd, const char *restrict path, int flags, unsigned int mask, struct statx *restrict stx) {
    static int (*next)(int, const char *restrict, int, unsigned int, struct statx *restrict);
    if (!next)
        next = real("statx");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    int rc = next(dirfd, path, flags, mask, stx);
    if (rc == 0) {
        long by = skew();
        stx->stx_atime.tv_sec += by;
        stx->stx_btime.tv_sec += by;
        stx->stx_ctime.tv_sec += by;
        stx->stx_mtime.tv_sec += by;
    }
    return rc;
}
