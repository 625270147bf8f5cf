/*
 * dlyfwd: a userspace delay / loss / rate element between two interfaces ("netem without netem").
 *
 * Every frame received on one interface (raw AF_PACKET socket) is held for delay +- jitter
 * (uniform), dropped with probability `loss`, optionally serialised at `rate`, then sent out the
 * other interface; both directions, each with its own FIFO queue (jitter never reorders: a frame
 * never leaves before the one received ahead of it). The arrival time is the kernel's receive
 * timestamp, so the time this process takes to wake up does not add to the delay.
 *
 * Built on first use by mininet_labs/delay/build.py (gcc -O2); driven by mininet_labs/delay/link.py.
 * Prints "ready" on stdout once both sockets are bound; on SIGTERM/SIGINT it stops, on SIGUSR1 it
 * writes its counters (JSON) to --stats (or stdout) and continues. Bad arguments: one line, exit 2.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dlycommon.h"

#define BATCH 64
#define VNET ((int)sizeof(struct virtio_net_hdr))
/* A slot: 4 spare bytes (room to put a VLAN tag back), the virtio-net header, the frame. The
 * header (PACKET_VNET_HDR) carries the kernel's "checksum not filled in yet" state from the
 * receiving interface to the sending one, so a sender's checksum offload keeps working through us. */

struct meta {
    int64_t due_ns;   /* CLOCK_MONOTONIC time to send */
    uint16_t off;     /* where the virtio-net header starts inside the slot */
    uint16_t len;     /* frame bytes (the header excluded) */
};

struct dir {
    const char *name; /* "a_to_b" / "b_to_a" */
    int in_fd, out_fd;
    uint8_t *data;
    struct meta *meta;
    uint32_t head, count;
    int64_t last_due, link_free;
    uint64_t rx, tx, lost, queue_drop, oversize, tx_error, rx_bytes, tx_bytes;
    int64_t max_late_ns; /* worst (actual send - due) seen */
};

static uint32_t cap = 10000, slot_bytes;
static int64_t delay_ns, jitter_ns, rate_bps, early_ns = 50000;
static double loss;
static uint64_t rng;
static volatile sig_atomic_t stop_flag, stats_flag;
static const char *stats_path;
static int rt_prio, rt_active;

static uint64_t next_rand(void) /* xorshift64*: fast, seeded, reproducible */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static int open_sock(const char *ifname, int *mtu)
{
    unsigned idx = if_nametoindex(ifname);
    if (!idx)
        die("no such interface", ifname);
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0)
        die("socket(AF_PACKET) failed (needs root)", strerror(errno));
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = idx};
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0)
        die("bind failed", ifname);
    int one = 1;
    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one);
    if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0)
        die("PACKET_VNET_HDR failed", strerror(errno));
#ifdef PACKET_IGNORE_OUTGOING
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
#endif
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0)
        die("SO_TIMESTAMPNS failed", strerror(errno));
    struct packet_mreq mr = {.mr_ifindex = idx, .mr_type = PACKET_MR_PROMISC};
    setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr);
    int buf = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
    *mtu = ioctl(fd, SIOCGIFMTU, &ifr) == 0 ? ifr.ifr_mtu : 1500;
    /* Frames already queued before the bind (from any interface) are not ours: drain them. */
    char junk[64];
    while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) >= 0)
        ;
    return fd;
}

static void write_stats(struct dir *d)
{
    FILE *f = stdout;
    char tmp[4096];
    if (stats_path) {
        snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
        f = fopen(tmp, "w");
        if (!f)
            return;
    }
    fprintf(f, "{\"delay_ns\": %lld, \"jitter_ns\": %lld, \"loss\": %.9g, \"rate_bps\": %lld, \"limit\": %u, "
               "\"realtime\": %s", (long long)delay_ns, (long long)jitter_ns, loss, (long long)rate_bps, cap,
            rt_active ? "true" : "false");
    for (int i = 0; i < 2; i++)
        fprintf(f, ", \"%s\": {\"rx\": %llu, \"tx\": %llu, \"lost\": %llu, \"queue_drop\": %llu, "
                   "\"oversize\": %llu, \"tx_error\": %llu, \"rx_bytes\": %llu, \"tx_bytes\": %llu, "
                   "\"queued\": %u, \"max_late_ns\": %lld}",
                d[i].name, (unsigned long long)d[i].rx, (unsigned long long)d[i].tx,
                (unsigned long long)d[i].lost, (unsigned long long)d[i].queue_drop,
                (unsigned long long)d[i].oversize, (unsigned long long)d[i].tx_error,
                (unsigned long long)d[i].rx_bytes, (unsigned long long)d[i].tx_bytes, d[i].count,
                (long long)d[i].max_late_ns);
    fprintf(f, "}\n");
    if (stats_path) {
        fclose(f);
        rename(tmp, stats_path);
    } else {
        fflush(f);
    }
}

/* Send every frame of `d` due by `now` + early_ns (sendmmsg: one system call for a burst). */
static void send_due(struct dir *d, int64_t now)
{
    static struct mmsghdr msgs[BATCH];
    static struct iovec iov[BATCH];
    while (d->count && d->meta[d->head].due_ns <= now + early_ns) {
        uint32_t n = 0;
        while (n < BATCH && n < d->count) {
            uint32_t slot = (d->head + n) % cap;
            struct meta *m = &d->meta[slot];
            if (m->due_ns > now + early_ns)
                break;
            if (now - m->due_ns > d->max_late_ns)
                d->max_late_ns = now - m->due_ns;
            iov[n] = (struct iovec){d->data + (size_t)slot * slot_bytes + m->off, (size_t)m->len + VNET};
            msgs[n].msg_hdr = (struct msghdr){.msg_iov = &iov[n], .msg_iovlen = 1};
            n++;
        }
        int sent = sendmmsg(d->out_fd, msgs, n, MSG_DONTWAIT);
        uint32_t done = sent > 0 ? (uint32_t)sent : 0;
        for (uint32_t i = 0; i < done; i++)
            d->tx_bytes += iov[i].iov_len - VNET;
        d->tx += done;
        if (done < n) /* the frame at `done` failed: count it and drop it, send the rest next round */
            done++, d->tx_error++;
        d->head = (d->head + done) % cap;
        d->count -= done;
    }
}

/* Receive what is waiting on d->in_fd (at most a few batches, so sending stays on time). */
static void receive(struct dir *d)
{
    static uint8_t scratch[BATCH][2048];
    static struct mmsghdr msgs[BATCH];
    static struct iovec iov[BATCH];
    static struct sockaddr_ll from[BATCH];
    static char ctrl[BATCH][256];
    for (int round = 0; round < 16; round++) {
        uint32_t room = cap - d->count, n = room < BATCH ? room : BATCH;
        int full = n == 0;
        if (full)
            n = BATCH; /* queue full: read into scratch and drop (tail drop) */
        for (uint32_t i = 0; i < n; i++) {
            uint32_t slot = (d->head + d->count + i) % cap;
            iov[i].iov_base = full ? scratch[i] : d->data + (size_t)slot * slot_bytes + 4;
            iov[i].iov_len = full ? sizeof scratch[i] : slot_bytes - 4;
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof from[i],
                                              .msg_iov = &iov[i], .msg_iovlen = 1,
                                              .msg_control = ctrl[i], .msg_controllen = sizeof ctrl[i]};
        }
        uint32_t count0 = d->count; /* frame i went to slot head + count0 + i */
        int got = recvmmsg(d->in_fd, msgs, n, MSG_DONTWAIT | MSG_TRUNC, NULL);
        if (got <= 0)
            return;
        int64_t off_rt = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_MONOTONIC);
        int64_t mono_now = now_ns(CLOCK_MONOTONIC);
        for (int i = 0; i < got; i++) {
            if (from[i].sll_pkttype == PACKET_OUTGOING)
                continue;
            if (msgs[i].msg_len < (unsigned)VNET + 14)
                continue;
            uint32_t len = msgs[i].msg_len - VNET;
            d->rx++;
            d->rx_bytes += len;
            if (full) {
                d->queue_drop++;
                continue;
            }
            uint32_t slot = (d->head + d->count) % cap;
            uint8_t *base = d->data + (size_t)slot * slot_bytes;
            uint8_t *landed = d->data + (size_t)((d->head + count0 + i) % cap) * slot_bytes;
            struct virtio_net_hdr *vh = (struct virtio_net_hdr *)(landed + 4);
            if (len > slot_bytes - 8 - VNET || (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ||
                vh->gso_type != VIRTIO_NET_HDR_GSO_NONE) {
                /* a frame above the MTU: the sender's TSO/GSO is on (link.py turns it off) */
                d->oversize++;
                continue;
            }
            int64_t arrival = mono_now;
            struct tpacket_auxdata *aux = NULL;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - off_rt;
                    if (t <= mono_now && t > mono_now - 1000000000LL)
                        arrival = t;
                } else if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA) {
                    aux = (struct tpacket_auxdata *)CMSG_DATA(c);
                }
            }
            if (loss > 0 && (double)(next_rand() >> 11) * 0x1.0p-53 < loss) {
                d->lost++;
                continue;
            }
            if (landed != base) /* an earlier frame of this batch was dropped: close the gap */
                memmove(base + 4, landed + 4, VNET + len);
            vh = (struct virtio_net_hdr *)(base + 4);
            uint16_t off = 4;
            if (aux && (aux->tp_status & TP_STATUS_VLAN_VALID)) {
                /* The kernel took the 802.1Q tag out of the frame; put it back (and move the
                 * checksum start with the bytes behind it). */
                uint16_t tpid = htons((aux->tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux->tp_vlan_tpid : 0x8100);
                uint16_t tci = htons(aux->tp_vlan_tci);
                memmove(base, base + 4, VNET + 12);
                memcpy(base + VNET + 12, &tpid, 2);
                memcpy(base + VNET + 14, &tci, 2);
                vh = (struct virtio_net_hdr *)base;
                if (vh->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM)
                    vh->csum_start += 4;
                off = 0;
                len += 4;
            }
            int64_t due = arrival + delay_ns;
            if (jitter_ns)
                due += (int64_t)(next_rand() % (uint64_t)(2 * jitter_ns + 1)) - jitter_ns;
            if (due < d->last_due)
                due = d->last_due; /* FIFO: jitter does not reorder */
            if (rate_bps) {
                int64_t start = due > d->link_free ? due : d->link_free;
                due = start + (int64_t)len * 8 * 1000000000LL / rate_bps;
                d->link_free = due;
            }
            d->last_due = due;
            d->meta[slot] = (struct meta){.due_ns = due, .off = off, .len = (uint16_t)len};
            d->count++;
        }
        if ((uint32_t)got < n)
            return;
    }
}

static void on_stop(int s) { (void)s; stop_flag = 1; }
static void on_stats(int s) { (void)s; stats_flag = 1; }

static void usage(void)
{
    fprintf(stderr, "%s: usage: dlyfwd --a IF --b IF [--delay-us N] [--jitter-us N] [--loss P] "
                    "[--rate-bps N] [--limit FRAMES] [--seed N] [--rt PRIO] [--early-us N] [--stats PATH]\n", prog);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *ifa = NULL, *ifb = NULL;
    prog = "dlyfwd";
    rng = 0x9E3779B97F4A7C15ULL;
    opterr = 0; /* our one-line message, not getopt's */
    static struct option opts[] = {
        {"a", 1, 0, 'a'}, {"b", 1, 0, 'b'}, {"delay-us", 1, 0, 'd'}, {"jitter-us", 1, 0, 'j'},
        {"loss", 1, 0, 'l'}, {"rate-bps", 1, 0, 'r'}, {"limit", 1, 0, 'L'}, {"seed", 1, 0, 's'},
        {"rt", 1, 0, 'R'}, {"stats", 1, 0, 'S'}, {"early-us", 1, 0, 'E'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a': ifa = optarg; break;
        case 'b': ifb = optarg; break;
        case 'd':
            delay_ns = (int64_t)(num("--delay-us", optarg, 0, 60e6) * 1000);
            break;
        case 'j':
            jitter_ns = (int64_t)(num("--jitter-us", optarg, 0, 60e6) * 1000);
            break;
        case 'l':
            loss = num("--loss", optarg, 0, 1);
            break;
        case 'r':
            rate_bps = (int64_t)num("--rate-bps", optarg, 1000, 1e11);
            break;
        case 'L':
            cap = (uint32_t)num("--limit", optarg, 1, 1e6);
            break;
        case 's': rng = (uint64_t)num("--seed", optarg, 0, 9007199254740992.0) * 0x9E3779B97F4A7C15ULL | 1; break;
        case 'R':
            rt_prio = (int)num("--rt", optarg, 0, 99);
            break;
        case 'S': stats_path = optarg; break;
        case 'E': early_ns = (int64_t)(num("--early-us", optarg, 0, 1000) * 1000); break;
        default: usage();
        }
    }
    if (optind != argc || !ifa || !ifb)
        usage();
    if (!strcmp(ifa, ifb))
        die("--a and --b must differ", ifa);
    if (jitter_ns > delay_ns)
        die("--jitter-us must not exceed --delay-us", NULL);

    int mtu_a, mtu_b;
    struct dir d[2] = {{.name = "a_to_b"}, {.name = "b_to_a"}};
    d[0].in_fd = d[1].out_fd = open_sock(ifa, &mtu_a);
    d[1].in_fd = d[0].out_fd = open_sock(ifb, &mtu_b);
    slot_bytes = (uint32_t)((mtu_a > mtu_b ? mtu_a : mtu_b) + 14 + 4 + 8 + VNET + 63) & ~63u;
    if (slot_bytes > 65535)
        die("MTU too large", NULL);
    for (int i = 0; i < 2; i++) {
        d[i].data = calloc(cap, slot_bytes);
        d[i].meta = calloc(cap, sizeof(struct meta));
        if (!d[i].data || !d[i].meta)
            die("out of memory for --limit", NULL);
        memset(d[i].data, 0, (size_t)cap * slot_bytes); /* touch the pages now, not mid-run */
    }

    prctl(PR_SET_TIMERSLACK, 1UL); /* wake at the due time, not up to 50 us later */
    if (rt_prio > 0) {
        struct sched_param sp = {.sched_priority = rt_prio};
        rt_active = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
        mlockall(MCL_CURRENT | MCL_FUTURE);
    }
    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &orig);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    signal(SIGUSR1, on_stats);
    signal(SIGPIPE, SIG_IGN);
    printf("ready\n");
    fflush(stdout);

    struct pollfd pfd[2] = {{.fd = d[0].in_fd, .events = POLLIN}, {.fd = d[1].in_fd, .events = POLLIN}};
    /* A frame arriving now is not due before now + delay - jitter ("quiet"), so while frames are
     * queued we need not wake for each arrival: sleep to the head frame's due time (at most 1 ms
     * on), then read what came meanwhile in batches (its arrival time is the kernel's timestamp:
     * reading it later adds nothing). Each wake-up sends the frames due within the next early_ns
     * in one burst. At 40k frames/s this cuts wake-ups several times over, which is what keeps
     * small frames on time on a loaded machine. With no frames queued, or no quiet time, we block
     * on the sockets. */
    int64_t quiet = delay_ns - jitter_ns < 1000000 ? delay_ns - jitter_ns : 1000000;
    while (!stop_flag) {
        int64_t now = now_ns(CLOCK_MONOTONIC);
        send_due(&d[0], now);
        send_due(&d[1], now);
        receive(&d[0]);
        receive(&d[1]);
        now = now_ns(CLOCK_MONOTONIC);
        send_due(&d[0], now); /* frames just read may already be due (a delay below the wake-up) */
        send_due(&d[1], now);
        int64_t next = INT64_MAX;
        for (int i = 0; i < 2; i++)
            if (d[i].count && d[i].meta[d[i].head].due_ns < next)
                next = d[i].meta[d[i].head].due_ns;
        int use_fds = next == INT64_MAX || quiet < 50000;
        int64_t wake = next;
        if (!use_fds && now + quiet < wake)
            wake = now + quiet;
        struct timespec ts, *tp = NULL;
        if (wake != INT64_MAX) {
            int64_t wait = wake - now_ns(CLOCK_MONOTONIC);
            if (wait < 0)
                wait = 0;
            ts.tv_sec = wait / 1000000000LL;
            ts.tv_nsec = wait % 1000000000LL;
            tp = &ts;
        }
        pfd[0].revents = pfd[1].revents = 0;
        int r = ppoll(use_fds ? pfd : NULL, use_fds ? 2 : 0, tp, &orig);
        if (stats_flag) {
            stats_flag = 0;
            write_stats(d);
        }
        if (r > 0) {
            for (int i = 0; i < 2; i++) {
                if (!(pfd[i].revents & (POLLERR | POLLNVAL | POLLHUP)))
                    continue;
                int err;
                socklen_t el = sizeof err;
                getsockopt(pfd[i].fd, SOL_SOCKET, SO_ERROR, &err, &el); /* clears ENETDOWN */
                if (!if_nametoindex(i ? ifb : ifa) || (pfd[i].revents & POLLNVAL)) {
                    fprintf(stderr, "dlyfwd: interface %s is gone\n", i ? ifb : ifa);
                    write_stats(d);
                    return 3;
                }
            }
        }
    }
    write_stats(d);
    return 0;
}
