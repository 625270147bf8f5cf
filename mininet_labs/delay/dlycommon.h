/* Shared by dlyfwd.c and dlyprobe.c: one-line errors (exit 2), clocks, checked numbers. */
#ifndef DLYCOMMON_H
#define DLYCOMMON_H
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *prog; /* set by main: the name errors start with */

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s\n", prog, msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static int64_t now_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The number in `s`, or a one-line error naming the option and its range. */
static double num(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: %s must be a number in [%g, %g]: %s\n", prog, opt, lo, hi, s);
        exit(2);
    }
    return v;
}
#endif
