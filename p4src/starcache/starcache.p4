/*
 * starcache.p4 - the StarCache switch (G. Kim, "Towards Variable-Length
 * In-Network Caching"; docs/starcache.md, ../shared/design/starcache.md §3)
 * for BMv2 (v1model). The P4 twin of hostapps/src/pipeline/starcache.c: same
 * table, register and statistics names and semantics; the controller
 * (netkv/protocols/starcache.py) drives both through the SwitchDriver surface.
 *
 * NOT COMPILED HERE: p4c and BMv2 are not installed on the machines this was
 * written on. The program is checked statically only (tests/test_p4.py:
 * names against starcache.c and the spec, every compile-time variant
 * preprocessed; tests/test_starcache_p4.py); its BMv2 golden-vector test
 * skips without the toolchain.
 *
 * The recirculation port is a loopback veth pair (digest §8, "BMv2 /
 * Mininet emulation"; ../shared/design/BMV2-NOTES.md): BMv2's own
 * recirculate() puts recirculated packets in a strict-priority queue ahead of
 * new ones, and cache packets looping back to back would starve the clients.
 * A cache packet leaves through port SC_LOOP_OUT (the recirculation port of
 * the controller's PRE groups {node's port, SC_LOOP_OUT}) and comes back in
 * on SC_LOOP_IN; `set_queue_rate <pps> SC_LOOP_OUT` is the loop's rate and
 * `set_queue_depth` must exceed the cache packets (twice the cached keys
 * while writes replace them). A packet that enters on SC_LOOP_IN is a cache
 * packet (the C pipelines' meta->recirculated).
 *
 * Per packet (starcache.c sc_process):
 *   from a client port, not R_REQ/W_REQ/CRN_REQ  dropped, stats[HOST_SERVER_OP]
 *   from a client port: CACHED, and FLAG 1 of a W_REQ   zeroed; counted
 *                                  stats[FORGED_FIELDS] when non-zero
 *   R_REQ, cached key              pop++, hits++; INVALID with writes counted
 *                                  but none for SC_STUCK_US: pending_writes = 0,
 *                                  wmask = 0 (stats[STUCK_WRITES]); not VALID:
 *                                  to the server;
 *                                  queue full: overflow++, to the server; else
 *                                  parked at rear (client node, SEQ, LAT, UDP
 *                                  source port) and consumed
 *   W_REQ                          FLAG = 0 (FLAG >= 2: a fragment of a
 *                                  multi-packet write, FLAG and FRAG kept);
 *                                  CACHED = 0; cached: to the key's home
 *                                  (stats[WRONG_HOME] if addressed elsewhere);
 *                                  not DRAINING, FRAG 0: INVALID,
 *                                  wcount++; strict: pending_writes++, the
 *                                  write's number wcount into wmask, and
 *                                  SC_LAT(CacheIdx, wcount) into LAT
 *                                  (the server echoes it in the W_REP);
 *                                  FLAG = 1 (multi-packet: CACHED = 1)
 *   F_REQ (controller), cached     LAT = SC_LAT(CacheIdx, wcount) (the server
 *                                  echoes it)
 *   W_REP/F_REP from a server,     strict, a counted write's reply: its LAT
 *   cached key                     in wmask: cleared, pending_writes--; not in
 *                                  flight (a duplicate, a write before a stuck
 *                                  restart, another slot's): INVALID, last_src OVERLAP,
 *                                  wcount++ (stats[LATE_WRITES]), to its
 *                                  destination only;
 *                                  with FLAG, value bytes and (strict) no other
 *                                  write in flight (an F_REP: and its LAT
 *                                  is SC_LAT(CacheIdx, wcount), no write
 *                                  counted since its F_REQ passed): VALID, the key's packets in
 *                                  the loop `stale` (strict), ack 1 (0 if the
 *                                  head had older fragments), multicast to
 *                                  {destination, loop}; FRAG > 0 (a later
 *                                  fragment): joins the loop if VALID and
 *                                  (strict) FRAG unstale packets loop, else
 *                                  to its destination only
 *   cache packet (SC_LOOP_IN)      stale: drops itself (superseded); key gone
 *                                  or INVALID: drops itself; empty queue: loops
 *                                  on (DRAINING: leaves); else serves the head
 *                                  of the queue: the slot's client, SEQ, LAT
 *                                  and UDP port, CACHED = 1, PARID 0xFF,
 *                                  RESULT RETRY if ack was 0 (the head then
 *                                  moves on), multicast to {client, loop}
 *
 * Named state (identical names in starcache.c):
 *   table     lookup[k0, k1] -> set_idx(idx, home)      (HKEY's two 64-bit words)
 *             node_fwd[node] -> set_port(port)
 *   registers state pending_writes pop qlen front rear ack inloop stale write_ts
 *             last_src last_seq wcount wmask
 *             req_ip req_seq req_ts req_cookie hits overflow stats n_servers
 *
 * What P4 cannot do that starcache.c does inside a control call, and the
 * driver therefore does next to it (StarCacheP4 in
 * netkv/protocols/starcache.py): a `lookup` insert resets the key's
 * registers (INVALID, empty queue, ack 1, nothing in the loop); a delete
 * makes the key INVALID.
 * Differences from starcache.c: the controller is behind the CPU port and
 * outside the rack plan, so an F_REP the switch takes is sent into the loop
 * with a clone to the CPU (starcache.c: the PRE group of the controller's
 * node), and one it does not take goes to the CPU with RESULT RETRY, as in
 * starcache.c (the preamble's RESULT byte, docs/wire.md). The request
 * handle kept per slot (req_cookie) is the client's UDP source port, as
 * netkv-switch keeps it.
 *
 * The C params are compile-time here (defaults = starcache.c's):
 *   -DSC_KEYS=4096 (param keys) -DSC_SLOTS=16 (slots; SC_KEYS * SC_SLOTS <=
 *   65536) -DSC_FAITHFUL=0 (faithful: the paper's 1-bit flag)
 *   -DSC_STUCK_US=20000 (stuck_us: a key's counted writes are taken as lost
 *   when no write has reached it for this long; BMv2's timestamps are in us)
 *   -DSC_LOOP_OUT=510 -DSC_LOOP_IN=511 (the loopback veth pair's ports)
 *
 * Compile: p4c-bm2-ss --arch v1model --p4runtime-files starcache.p4info.txtpb \
 *              -o starcache.json starcache.p4
 */
#include <core.p4>
#include <v1model.p4>

#define NETKV_PARSE_STARCACHE
#include "../common/headers.p4"
#include "../common/types.p4"
#include "../common/parser.p4"
#include "../common/wirecheck.p4"
#include "../common/forward.p4"

#ifndef SC_KEYS
#define SC_KEYS 4096
#endif
#ifndef SC_SLOTS
#define SC_SLOTS 16
#endif
#ifndef SC_FAITHFUL
#define SC_FAITHFUL 0
#endif
#ifndef SC_STUCK_US
#define SC_STUCK_US SC_DEFAULT_STUCK_US
#endif
#ifndef SC_LOOP_OUT
#define SC_LOOP_OUT 510
#endif
#ifndef SC_LOOP_IN
#define SC_LOOP_IN 511
#endif
#if SC_KEYS < 1 || SC_SLOTS < 1 || SC_KEYS * SC_SLOTS > 65536
#error "SC_KEYS x SC_SLOTS (keys x slots) must be in 1..65536"
#endif
#if SC_FAITHFUL != 0 && SC_FAITHFUL != 1
#error "SC_FAITHFUL (faithful) must be 0 or 1"
#endif

/* a write number or fetch stamp as LAT carries it (starcache.c SC_LAT): the
 * CacheIdx in the high 16 bits (SC_KEYS <= 65536), the slot's count in the
 * low 16; wcount outlives a slot's tenants, and without the slot a reply
 * from a key's earlier slot could carry a number in flight at its new one */
#define SC_LAT(idx, n) ((((bit<32>)(idx)) << 16) | (((bit<32>)(n)) & 0xFFFF))

#define SC_STAT_COUNT 17            /* cells of `stats`: SC_STAT_* (constants.p4) */
const bit<8> SC_SERVER_NONE = 0xFF; /* PARID of a reply no server sent (NK_SERVER_NONE) */

control StarcacheIngress(inout headers_t hdr, inout metadata_t meta,
                         inout standard_metadata_t sm) {
    @name(".state")          register<bit<8>>(SC_KEYS) state_reg;
    @name(".pending_writes") register<bit<16>>(SC_KEYS) pending_writes;
    @name(".pop")            register<bit<32>>(SC_KEYS) pop;
    @name(".qlen")           register<bit<16>>(SC_KEYS) qlen;
    @name(".front")          register<bit<16>>(SC_KEYS) front;
    @name(".rear")           register<bit<16>>(SC_KEYS) rear;
    @name(".ack")            register<bit<8>>(SC_KEYS) ack;
    @name(".inloop")         register<bit<16>>(SC_KEYS) inloop;
    @name(".stale")          register<bit<16>>(SC_KEYS) stale;
    @name(".write_ts")       register<bit<32>>(SC_KEYS) write_ts;   /* us, wraps */
    @name(".last_src")       register<bit<32>>(SC_KEYS) last_src;   /* last counted write: client */
    @name(".last_seq")       register<bit<32>>(SC_KEYS) last_seq;   /* ... and its SEQ */
    @name(".wcount")         register<bit<32>>(SC_KEYS) wcount;     /* counted writes, ever (wraps) */
    @name(".wmask")          register<bit<32>>(SC_KEYS) wmask;      /* bit i: write wcount - i in flight */
    @name(".req_ip")         register<bit<32>>(SC_KEYS * SC_SLOTS) req_ip;
    @name(".req_seq")        register<bit<32>>(SC_KEYS * SC_SLOTS) req_seq;
    @name(".req_ts")         register<bit<32>>(SC_KEYS * SC_SLOTS) req_ts;
    @name(".req_cookie")     register<bit<64>>(SC_KEYS * SC_SLOTS) req_cookie;
    @name(".hits")           register<bit<64>>(1) hits;
    @name(".overflow")       register<bit<64>>(1) overflow;
    @name(".stats")          register<bit<64>>(SC_STAT_COUNT) stats;
    @name(".n_servers")      register<bit<8>>(1) n_servers;  /* server s behind port s */

    NetkvClassify() classify;
    StarcacheWireCheck() wire_check;
    NetkvForward() forward;

    bit<1>  l_hit = 0;
    bit<16> l_idx = 0;
    bit<8>  l_home = 0;
    bit<64> sc_k0 = 0;     /* HKEY's two 64-bit words: lookup's key */
    bit<64> sc_k1 = 0;

    @name(".set_idx")
    action set_idx(bit<16> idx, bit<8> home) {
        l_hit = 1;
        l_idx = idx;
        l_home = home;
    }

    @name(".lookup_miss")
    action lookup_miss() {
        l_hit = 0;
    }

    /* HKEY -> CacheIdx and the key's home server */
    @name(".lookup")
    table lookup {
        key = {
            sc_k0 : exact @name("k0");
            sc_k1 : exact @name("k1");
        }
        actions = {
            set_idx;
            @defaultonly lookup_miss;
        }
        const default_action = lookup_miss();
        size = SC_KEYS;
    }

    action stat(bit<8> i) {
        bit<64> v;
        stats.read(v, (bit<32>)i);
        stats.write((bit<32>)i, v + 1);
    }

    /* The helpers below are macros that expand into the apply block, not
     * actions: p4c rejects extern calls under an `if` inside an action on
     * BMv2. Only C comments inside them. */

/* to the destination node; the controller (outside the rack plan) is
 * behind the CPU port (starcache.c forward) */
#define SC_FORWARD()                                                         \
        if (meta.dst_node == NODE_NONE) {                                    \
            meta.fwd = FWD_PORT;                                             \
            meta.out_port = CPU_PORT;                                        \
        }
/* one copy to the destination node and one into the loop (starcache.c
 * to_node_and_loop: the PRE group {node's port, SC_LOOP_OUT}) */
#define SC_NODE_AND_LOOP()                                                   \
        if (meta.dst_node == NODE_NONE) {                                    \
            meta.to_cpu = 1;                                                 \
            meta.fwd = FWD_PORT;                                             \
            meta.out_port = SC_LOOP_OUT;                                     \
        } else {                                                             \
            sm.mcast_grp = (bit<16>)SC_MCAST_GROUP(meta.dst_node);           \
            meta.fwd = FWD_MCAST;                                            \
        }
/* an F_REP the switch does not take: the controller fetches again
 * (starcache.c sets m->result; the preamble's RESULT byte carries it) */
#define SC_FETCH_REFUSED()                                                   \
            hdr.starcache_pre.result = RESULT_RETRY;                         \
            meta.hdr_changed = 1;

/* a cache packet of key l_idx drops itself (starcache.c leave_loop) */
#define SC_LEAVE_LOOP(why)                                                   \
        {                                                                    \
            bit<16> il_;                                                     \
            inloop.read(il_, (bit<32>)l_idx);                                \
            if (il_ != 0) {                                                  \
                inloop.write((bit<32>)l_idx, il_ - 1);                       \
            }                                                                \
            stat(why);                                                       \
            meta.fwd = FWD_DROP;                                             \
        }

    apply {
        classify.apply(hdr, meta, sm);
        if (meta.is_proto == 1 && meta.fwd != FWD_DROP) {
            bool ok;
            wire_check.apply(hdr, ok);
            if (!ok) {
                meta.fwd = FWD_DROP;
                meta.is_proto = 0;
            }
        } else {
            meta.is_proto = 0;
        }

        bool want_route = false;     /* starcache.c forward(): counts NO_ROUTE */
        if (meta.is_proto == 1) {
            bit<8> op = hdr.starcache.op;
            bit<8> n8;
            n_servers.read(n8, 0);
            bool recirc = sm.ingress_port == SC_LOOP_IN;
            if (recirc) {
                meta.origin = ORIGIN_TRUSTED;
            } else if (meta.origin == ORIGIN_CLIENT && meta.in_port < (bit<16>)n8) {
                meta.origin = ORIGIN_SERVER;
            }
            if (meta.origin == ORIGIN_CLIENT && op != STARCACHE_OP_R_REQ &&
                op != STARCACHE_OP_W_REQ && op != STARCACHE_OP_CRN_REQ) {
                /* a forged reply would enter the loop and answer other clients */
                stat(SC_STAT_HOST_SERVER_OP);
                meta.fwd = FWD_DROP;
            } else {
                if (meta.origin == ORIGIN_CLIENT) {
                    /* CACHED is the switch's; FLAG and FRAG of a write too */
                    if (hdr.starcache.cached != 0 ||
                        (op == STARCACHE_OP_W_REQ && hdr.starcache.flag == 1)) {
                        stat(SC_STAT_FORGED_FIELDS);
                    }
                    hdr.starcache.cached = 0;
                    meta.hdr_changed = 1;
                }
                sc_k0 = hdr.starcache.hkey[127:64];
                sc_k1 = hdr.starcache.hkey[63:0];
                lookup.apply();
                bit<32> idx = (bit<32>)l_idx;

                if (recirc) {
                    if (op != STARCACHE_OP_R_REP && op != STARCACHE_OP_W_REP &&
                        op != STARCACHE_OP_F_REP) {
                        stat(SC_STAT_LOOP_DROPS);
                        meta.fwd = FWD_DROP;
                    } else if (l_hit == 0) {
                        stat(SC_STAT_LOOP_DROPS);      /* evicted */
                        meta.fwd = FWD_DROP;
                    } else {
                        /* a cache packet's pass (starcache.c cache_packet) */
                        hdr.starcache.op = STARCACHE_OP_R_REP;
                        meta.hdr_changed = 1;
                        @atomic {
                            bit<16> st_;
                            bit<8> s8;
                            bit<16> q;
                            stale.read(st_, idx);
                            state_reg.read(s8, idx);
                            qlen.read(q, idx);
                            if (st_ != 0) {
                                /* older than the newest write's packet (FIFO loop) */
                                stale.write(idx, st_ - 1);
                                SC_LEAVE_LOOP(SC_STAT_SUPERSEDED)
                            } else if (s8 == SC_STATE_INVALID) {
                                SC_LEAVE_LOOP(SC_STAT_LOOP_DROPS)
                            } else if (q == 0) {
                                if (s8 == SC_STATE_DRAINING) {
                                    SC_LEAVE_LOOP(SC_STAT_LOOP_DROPS)
                                } else {
                                    stat(SC_STAT_LOOPS);
                                    meta.fwd = FWD_PORT;
                                    meta.out_port = SC_LOOP_OUT;
                                }
                            } else {
                                /* serve the head of the queue */
                                bit<16> i;
                                bit<8> a;
                                front.read(i, idx);
                                ack.read(a, idx);
                                bit<8> flag = hdr.starcache.flag;
                                if (flag == 0) {
                                    flag = 1;
                                }
                                /* ack 0: older fragments answered this head
                                 * in part; this visit says RETRY, it moves on */
                                bool restart = a == 0;
                                if (!restart && a < flag) {
                                    ack.write(idx, a + 1);   /* multi-packet item */
                                } else {
                                    qlen.write(idx, q - 1);
                                    if (i + 1 == SC_SLOTS) {
                                        front.write(idx, 0);
                                    } else {
                                        front.write(idx, i + 1);
                                    }
                                    ack.write(idx, 1);
                                }
                                bit<32> r = idx * SC_SLOTS + (bit<32>)i;
                                bit<32> node;
                                bit<64> cookie;
                                req_ip.read(node, r);
                                req_seq.read(hdr.starcache.seq, r);
                                req_ts.read(hdr.starcache.lat, r);
                                req_cookie.read(cookie, r);
                                hdr.starcache.cached = 1;
                                hdr.starcache.parid = SC_SERVER_NONE;
                                if (restart) {
                                    hdr.starcache_pre.result = RESULT_RETRY;
                                } else {
                                    hdr.starcache_pre.result = RESULT_OK;
                                }
                                hdr.udp.dst_port = (bit<16>)cookie;
                                meta.dst_node = (bit<16>)node;
                                stat(SC_STAT_SERVED);
                                sm.mcast_grp = (bit<16>)SC_MCAST_GROUP(meta.dst_node);
                                meta.fwd = FWD_MCAST;
                            }
                        }
                    }
                } else if (op == STARCACHE_OP_R_REQ && l_hit == 1) {
                    /* starcache.c read_request: park, or to the server */
                    want_route = true;
                    @atomic {
                        bit<32> p;
                        pop.read(p, idx);
                        if (p != 0xFFFFFFFF) {
                            pop.write(idx, p + 1);
                        }
                        bit<64> h;
                        hits.read(h, 0);
                        hits.write(0, h + 1);
                        bit<8> s8;
                        bit<16> q;
                        state_reg.read(s8, idx);
                        qlen.read(q, idx);
                        bit<16> pw;
                        bit<32> wts;
                        pending_writes.read(pw, idx);
                        write_ts.read(wts, idx);
                        if (s8 == SC_STATE_INVALID && pw != 0 &&
                            (bit<32>)sm.ingress_global_timestamp - wts > SC_STUCK_US) {
                            /* the counted writes with no reply were lost;
                             * a reply that comes after all is late */
                            pending_writes.write(idx, 0);
                            wmask.write(idx, 0);
                            stat(SC_STAT_STUCK_WRITES);
                        }
                        if (s8 == SC_STATE_DRAINING) {
                            stat(SC_STAT_DRAINING_READS);
                        } else if (s8 != SC_STATE_VALID) {
                            stat(SC_STAT_INVALID_READS);
                        } else if (q >= SC_SLOTS) {
                            bit<64> o;
                            overflow.read(o, 0);
                            overflow.write(0, o + 1);
                        } else {
                            bit<16> i;
                            rear.read(i, idx);
                            if (i + 1 == SC_SLOTS) {
                                rear.write(idx, 0);
                            } else {
                                rear.write(idx, i + 1);
                            }
                            qlen.write(idx, q + 1);
                            bit<32> r = idx * SC_SLOTS + (bit<32>)i;
                            req_ip.write(r, (bit<32>)meta.src_node);
                            req_seq.write(r, hdr.starcache.seq);
                            req_ts.write(r, hdr.starcache.lat);
                            req_cookie.write(r, (bit<64>)hdr.udp.src_port);
                            stat(SC_STAT_PARKED);
                            meta.fwd = FWD_DROP;     /* held: a cache packet will answer */
                            want_route = false;
                        }
                    }
                } else if (op == STARCACHE_OP_W_REQ) {
                    /* FLAG tells the server whether to attach the new value;
                     * a multi-packet write (FLAG >= 2) keeps FLAG and FRAG,
                     * its shape, and is told in CACHED, on its FRAG 0 */
                    want_route = true;
                    bool multi = hdr.starcache.flag >= 2;
                    if (!multi) {
                        hdr.starcache.flag = 0;
                        hdr.starcache_pre.frag = 0;
                    }
                    hdr.starcache.cached = 0;
                    meta.hdr_changed = 1;
                    if (l_hit == 1) {
                        if (meta.dst_node != (bit<16>)l_home) {
                            /* only the home's reply may revalidate the key */
                            meta.dst_node = (bit<16>)l_home;
                            stat(SC_STAT_WRONG_HOME);
                        }
                        @atomic {
                            bit<8> s8;
                            state_reg.read(s8, idx);
                            if (s8 != SC_STATE_DRAINING && hdr.starcache_pre.frag == 0) {
                                state_reg.write(idx, SC_STATE_INVALID);
                                bit<16> pw;
                                pending_writes.read(pw, idx);
                                bit<32> wc;
                                wcount.read(wc, idx);
                                wcount.write(idx, wc + 1);
                                if (SC_FAITHFUL == 0) {
                                    /* the write's number, in flight until
                                     * its W_REP clears it; one falling out
                                     * of the window (32 later write
                                     * numbers, late replies included) is
                                     * counted no more (starcache.c
                                     * next_write_number) */
                                    bit<32> wm;
                                    wmask.read(wm, idx);
                                    bit<16> pw1 = pw;
                                    if (wm[31:31] == 1 && pw1 != 0) {
                                        pw1 = pw1 - 1;
                                    }
                                    wmask.write(idx, (wm << 1) | 1);
                                    if (pw1 != 0xFFFF) {
                                        pw1 = pw1 + 1;
                                    }
                                    pending_writes.write(idx, pw1);
                                    hdr.starcache.lat = SC_LAT(idx, wc + 1);
                                }
                                write_ts.write(idx, (bit<32>)sm.ingress_global_timestamp);
                                /* counted while another write was in
                                 * flight: no reply of the overlap
                                 * revalidates (starcache.c) */
                                if (SC_FAITHFUL == 0 && pw != 0) {
                                    last_src.write(idx, SC_LAST_OVERLAP);
                                } else {
                                    last_src.write(idx, (bit<32>)meta.src_node);
                                }
                                last_seq.write(idx, hdr.starcache.seq);
                                if (multi) {
                                    hdr.starcache.cached = 1;
                                } else {
                                    hdr.starcache.flag = 1;
                                }
                                stat(SC_STAT_INVALIDATIONS);
                            }
                        }
                    }
                } else if ((op == STARCACHE_OP_W_REP || op == STARCACHE_OP_F_REP) && l_hit == 1) {
                    /* starcache.c server_update */
                    bool is_write = op == STARCACHE_OP_W_REP;
                    /* starcache.c carries_item: value bytes and OK, or a
                     * write the server refused (RETRY with the stored value) */
                    bool item = hdr.starcache_pre.vlen != 0 &&
                                (hdr.starcache_pre.result == RESULT_OK ||
                                 (is_write && hdr.starcache_pre.result == RESULT_RETRY));
                    @atomic {
                        bit<8> s8;
                        bit<16> pw;
                        state_reg.read(s8, idx);
                        pending_writes.read(pw, idx);
                        if (s8 == SC_STATE_DRAINING) {
                            if (!is_write) {
                                SC_FETCH_REFUSED()
                            }
                            want_route = true;
                            SC_FORWARD()
                        } else if (hdr.starcache_pre.frag != 0) {
                            /* a later fragment of a multi-packet item joins
                             * the loop behind the item's earlier ones
                             * (strict: FRAG packets of the key loop that are
                             * not stale) */
                            bit<16> il;
                            bit<16> st;
                            inloop.read(il, idx);
                            stale.read(st, idx);
                            bool join = item && s8 == SC_STATE_VALID &&
                                        (SC_FAITHFUL == 1 ||
                                         (pw == 0 && il - st == (bit<16>)hdr.starcache_pre.frag));
                            if (!join) {
                                if (is_write) {
                                    stat(SC_STAT_STALE_UPDATES);
                                } else {
                                    SC_FETCH_REFUSED()
                                }
                                want_route = true;
                                SC_FORWARD()
                            } else {
                                if (SC_FAITHFUL == 0 && il != 0xFFFF) {
                                    inloop.write(idx, il + 1);
                                }
                                SC_NODE_AND_LOOP()
                            }
                        } else {
                            /* strict: a counted write's reply clears its
                             * write's number (LAT, echoed) if that write is
                             * in flight; else it is late (starcache.c
                             * late_write): a duplicate, or a write taken as
                             * lost, or an uncounted write's (FLAG 0: the key
                             * was inserted since, and the insert's fetch may
                             * have read before it); it lowers no count, the
                             * key goes INVALID, no write in flight
                             * revalidates, and the write number moves on (a
                             * fetch stamped before is refused) */
                            bool late = false;
                            if (is_write && SC_FAITHFUL == 0) {
                                bit<32> wc0;
                                bit<32> wm;
                                wcount.read(wc0, idx);
                                wmask.read(wm, idx);
                                /* a number stamped at another slot (the
                                 * key's before a delete and re-add) is late */
                                bit<32> d = (wc0 - hdr.starcache.lat) & 0xFFFF;
                                if (hdr.starcache.flag != 0 && (hdr.starcache.lat >> 16) == idx &&
                                    d < 32 && ((wm >> d) & 1) == 1) {
                                    wmask.write(idx, wm & ~((bit<32>)1 << d));
                                    if (pw != 0) {
                                        pw = pw - 1;
                                        pending_writes.write(idx, pw);
                                    }
                                } else {
                                    late = true;
                                    state_reg.write(idx, SC_STATE_INVALID);
                                    last_src.write(idx, SC_LAST_OVERLAP);
                                    if (wm[31:31] == 1 && pw != 0) {
                                        pending_writes.write(idx, pw - 1);
                                    }
                                    wmask.write(idx, wm << 1);
                                    wcount.write(idx, wc0 + 1);
                                    stat(SC_STAT_LATE_WRITES);
                                }
                            }
                            if (late) {
                                want_route = true;
                                SC_FORWARD()
                            } else {
                                /* a reply without value bytes (a W_REQ whose
                                 * HKEY is not its key's: RETRY) or an F_REP's
                                 * RETRY puts nothing into the loop; a refused
                                 * write's RETRY with the stored value does */
                                /* strict: only the reply of the last counted
                                 * write revalidates (a reordered older one
                                 * would loop its older value) */
                                bit<32> ls;
                                bit<32> lq;
                                last_src.read(ls, idx);
                                last_seq.read(lq, idx);
                                bool last = ls == (bit<32>)meta.dst_node && lq == hdr.starcache.seq;
                                /* strict: a fetch's reply only for a key that
                                 * is not VALID (a late F_REP would loop its
                                 * older value behind a write's newer one) */
                                /* strict: and a fetch's reply only if no
                                 * write was counted since its F_REQ passed
                                 * (LAT, the F_REQ's stamp, echoed, is wcount
                                 * now): a server read older than writes
                                 * answered meanwhile (starcache.c) */
                                bit<32> wc;
                                wcount.read(wc, idx);
                                bool fresh = hdr.starcache.lat == SC_LAT(idx, wc);
                                bool take = hdr.starcache.flag != 0 && item &&
                                            (SC_FAITHFUL == 1 ||
                                             (pw == 0 && s8 != SC_STATE_VALID &&
                                              ((is_write && last) || (!is_write && fresh))));
                                if (!take) {
                                    if (is_write && hdr.starcache.flag != 0) {
                                        stat(SC_STAT_STALE_UPDATES);
                                    } else if (!is_write) {
                                        SC_FETCH_REFUSED()
                                    }
                                    want_route = true;
                                    SC_FORWARD()
                                } else {
                                    state_reg.write(idx, SC_STATE_VALID);
                                    /* a head older fragments answered in part: 0 */
                                    bit<8> a0;
                                    ack.read(a0, idx);
                                    if (a0 != 1) {      /* 0 stays: two writes in a row */
                                        ack.write(idx, 0);
                                    } else {
                                        ack.write(idx, 1);
                                    }
                                    if (SC_FAITHFUL == 0) {
                                        /* the key's packets in the loop now are older */
                                        bit<16> il;
                                        inloop.read(il, idx);
                                        stale.write(idx, il);
                                        if (il != 0xFFFF) {
                                            inloop.write(idx, il + 1);
                                        }
                                    }
                                    if (is_write) {
                                        stat(SC_STAT_REVALIDATIONS);
                                    } else {
                                        stat(SC_STAT_FETCHES);
                                    }
                                    SC_NODE_AND_LOOP()
                                }
                            }
                        }
                    }
                } else if (op == STARCACHE_OP_F_REQ && l_hit == 1) {
                    /* the controller's fetch (a client's is dropped above):
                     * LAT carries the key's write count, which the server
                     * echoes in its F_REP (starcache.c) */
                    @atomic {
                        bit<32> wc;
                        bit<16> pw;
                        wcount.read(wc, idx);
                        pending_writes.read(pw, idx);
                        /* a counted write in flight: one behind, which no
                         * count matches (the server may apply the write
                         * after reading; starcache.c) */
                        if (SC_FAITHFUL == 0 && pw != 0) {
                            wc = wc - 1;
                        }
                        hdr.starcache.lat = SC_LAT(idx, wc);
                    }
                    meta.hdr_changed = 1;
                    want_route = true;
                    SC_FORWARD()
                } else {
                    /* uncached R_REQ/W_REP/F_REP, CRN_REQ, F_REQ, R_REP from
                     * a server: no cache logic */
                    if (op == STARCACHE_OP_F_REP) {
                        SC_FETCH_REFUSED()
                    }
                    want_route = true;
                    SC_FORWARD()
                }
            }
        }

        forward.apply(hdr, meta, sm);

        if (want_route && meta.fwd == FWD_DROP) {
            stat(SC_STAT_NO_ROUTE);
        }
    }
}

control StarcacheEgress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t sm) {
    NetkvEgress() egress_common;
    apply {
        egress_common.apply(hdr, meta, sm);
    }
}

V1Switch(NetkvParser(), NetkvVerifyChecksum(), StarcacheIngress(), StarcacheEgress(),
         NetkvComputeChecksum(), NetkvDeparser()) main;
