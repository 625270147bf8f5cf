/*
 * dlyprobe: timestamped UDP at a fixed rate and frame size, to measure the one-way delay through a
 * delay element (sender and receiver run in two network namespaces of one machine: one clock).
 *
 *   dlyprobe send --dst IP --port P --rate-bps N --size FRAME_BYTES --duration S
 *   dlyprobe recv --port P --duration S --out FILE
 *
 * The sender paces frames of FRAME_BYTES (Ethernet header included) at N bit/s; each payload holds a
 * sequence number and the CLOCK_REALTIME send time. The receiver writes one record per frame,
 * (seq, sent_ns, received_ns) as three little-endian int64, using the kernel's receive timestamp;
 * it prints "ready" once bound and stops after --duration seconds or SIGTERM. Python reads the
 * file (mininet_labs/delay/measure.py). C, not Python, so 50 Mbit/s of 64-byte frames (~100k
 * frames/s) is paced and received without the tool's own lag in the numbers. Bad arguments: one
 * line, exit 2.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dlycommon.h"

#define HDR 42 /* Ethernet 14 + IPv4 20 + UDP 8 */
#define BATCH 64

static volatile sig_atomic_t stop_flag;
static void on_stop(int s) { (void)s; stop_flag = 1; }

static int do_send(const char *dst, int port, double rate, int size, double duration)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, dst, &to.sin_addr) != 1)
        die("--dst is not an IPv4 address", dst);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) < 0)
        die("cannot open the UDP socket", strerror(errno));
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
    prctl(PR_SET_TIMERSLACK, 1UL);
    uint8_t payload[1514] = {0};
    int plen = size - HDR;
    int64_t interval = (int64_t)((double)size * 8 * 1e9 / rate);
    int64_t start = now_ns(CLOCK_MONOTONIC), next = start, end = start + (int64_t)(duration * 1e9);
    uint64_t seq = 0, errors = 0;
    while (!stop_flag && next < end) {
        /* Sleep to the frame's time (no spinning: the element under test needs the CPU); at high
         * rates a wake-up sends every frame already due, so the average rate holds. */
        if (now_ns(CLOCK_MONOTONIC) < next) {
            struct timespec ts = {.tv_sec = next / 1000000000LL, .tv_nsec = next % 1000000000LL};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
            continue;
        }
        int64_t sent = now_ns(CLOCK_REALTIME);
        memcpy(payload, &seq, 8);
        memcpy(payload + 8, &sent, 8);
        if (send(fd, payload, plen, 0) != plen)
            errors++;
        seq++;
        next += interval;
    }
    printf("{\"sent\": %llu, \"send_errors\": %llu, \"seconds\": %.6f}\n", (unsigned long long)seq,
           (unsigned long long)errors, (now_ns(CLOCK_MONOTONIC) - start) / 1e9);
    return 0;
}

static int do_recv(int port, double duration, const char *out)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY};
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) < 0)
        die("cannot bind the UDP port", strerror(errno));
    int one = 1, buf = 16 << 20;
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    FILE *f = fopen(out, "wb");
    if (!f)
        die("cannot write", out);
    printf("ready\n");
    fflush(stdout);
    static uint8_t data[BATCH][2048];
    static char ctrl[BATCH][128];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    int64_t end = now_ns(CLOCK_MONOTONIC) + (int64_t)(duration * 1e9);
    uint64_t n = 0;
    while (!stop_flag) {
        int64_t left = end - now_ns(CLOCK_MONOTONIC);
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left / 1000000 + 1)) <= 0)
            continue;
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){data[i], sizeof data[i]};
            msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1, .msg_control = ctrl[i],
                                              .msg_controllen = sizeof ctrl[i]};
        }
        int got = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
        int64_t fallback = now_ns(CLOCK_REALTIME);
        for (int i = 0; i < got; i++) {
            if (msgs[i].msg_len < 16)
                continue;
            int64_t rec[3], rx = fallback;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    rx = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
                }
            memcpy(&rec[0], data[i], 8);
            memcpy(&rec[1], data[i] + 8, 8);
            rec[2] = rx;
            fwrite(rec, sizeof rec, 1, f);
            n++;
        }
    }
    fclose(f);
    printf("{\"received\": %llu}\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    prog = "dlyprobe";
    if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv")))
        die("usage: dlyprobe send|recv ...", NULL);
    int sending = !strcmp(argv[1], "send");
    const char *dst = NULL, *out = NULL;
    int port = 0, size = 1514;
    double rate = 0, duration = 0;
    static struct option opts[] = {{"dst", 1, 0, 'd'}, {"port", 1, 0, 'p'}, {"rate-bps", 1, 0, 'r'},
                                   {"size", 1, 0, 's'}, {"duration", 1, 0, 't'}, {"out", 1, 0, 'o'},
                                   {0, 0, 0, 0}};
    int c;
    optind = 2;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dst = optarg; break;
        case 'p': port = (int)num("--port", optarg, 1, 65535); break;
        case 'r': rate = num("--rate-bps", optarg, 1000, 1e10); break;
        case 's': size = (int)num("--size", optarg, HDR + 16, 1514); break;
        case 't': duration = num("--duration", optarg, 0.001, 600); break;
        case 'o': out = optarg; break;
        default: die("unknown option", NULL);
        }
    }
    if (optind != argc || !port || !duration)
        die("--port and --duration are required", NULL);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    if (sending) {
        if (!dst || !rate)
            die("send needs --dst and --rate-bps", NULL);
        return do_send(dst, port, rate, size, duration);
    }
    if (!out)
        die("recv needs --out", NULL);
    return do_recv(port, duration, out);
}
