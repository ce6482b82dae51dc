/* Moves this process's wall clock by WFCTL_TEST_CLOCK_SHIFT seconds (LD_PRELOAD).
 *
 * Only the wall clock moves: CLOCK_REALTIME and CLOCK_REALTIME_COARSE in clock_gettime, and
 * gettimeofday and time. The monotonic clocks, which timed waits and sleeps use, are left alone
 * (libfaketime shifts those too and hangs Python's threading.Event.wait). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#define BILLION 1000000000LL

static long long shift_ns(void) {
    static int read;
    static long long shift;
    if (!read) {
        const char *text = getenv("WFCTL_TEST_CLOCK_SHIFT");
        shift = text ? (long long)(atof(text) * 1e9) : 0;
        read = 1;
    }
    return shift;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int done = real(id, ts);
    if (done == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        long long ns = ts->tv_sec * BILLION + ts->tv_nsec + shift_ns();
        ts->tv_sec = ns / BILLION;
        ts->tv_nsec = ns % BILLION;
    }
    return done;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    int done = clock_gettime(CLOCK_REALTIME, &ts);
    (void)tz;
    if (done == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return done;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
