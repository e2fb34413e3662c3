/*
 * netlr.p4 - the NetLR switch (G. Kim, W. Lee, "In-Network Leaderless
 * Replication for Distributed Data Stores", PVLDB 15(7) 2022; docs/netlr.md,
 * ../shared/design/netlr.md §3) for BMv2 (v1model). The P4 twin of
 * hostapps/src/pipeline/netlr.c: same table, register and statistics names
 * and semantics; the controller (netkv/protocols/netlr.py) drives both
 * through the SwitchDriver surface.
 *
 * NOT COMPILED HERE: p4c and BMv2 are not installed on the machines this was
 * written on. The program is checked statically only (tests/test_p4.py:
 * names against netlr.c and docs/netlr.md, every compile-time variant
 * preprocessed; tests/test_netlr_p4.py); its BMv2 golden-vector test skips
 * without the toolchain.
 *
 * Per packet (netlr.c nl_process):
 *   from a client port, not READ/WRITE   dropped, stats[HOST_SERVER_OP] (a
 *                                        forged W_REPLY would commit a write
 *                                        no replica applied)
 *   from a client port: SEQ, FLAGS, EPOCH cleared; stats[FORGED_FIELDS] when
 *                                        any was set
 *   from the CPU, or NL_CHAIN (the CR    forwarded by destination
 *   baseline: the hosts address the head, the next replica, the tail)
 *   READ/WRITE with oid 0                dropped, stats[BAD_OID]
 *   READ   dirty (dset[id] == oid): to CRep[id], stats[DIRTY_READS]; else to
 *          get_dst_rep_table[DstRepIdx] (round-robin, wraps at num_replica);
 *          strict with NL_STAMP: SEQ = the global seq, flag STAMPED
 *   WRITE  strict with NL_DEDUP: its req_id stamped before from this ingress
 *          port (ReqWin, the NL_REQ_WINDOW req_ids below ReqMax), or older
 *          than that window: dropped, stats[DUP_WRITES] / [OLD_WRITES];
 *          dset[id] holds another oid: dropped (NL_COLLISION_NACK: NACK back
 *          to the client), stats[COLLISIONS]; no live replica: dropped;
 *          else dset[id] = oid, SEQ = ++seq, EPOCH = epoch, multicast to
 *          group 1; strict: CRep = PIN and lseq = 0 if the slot was
 *          empty, MaxSeq = SEQ, AckMask = 0
 *   W_REPLY from replica r (its node), only while dset[id] == oid and its
 *          EPOCH is the switch's (else dropped, stats[STALE_ACKS]):
 *          paper (Alg. 2)  SEQ > lseq: lseq = SEQ, NumCRep = 1; SEQ == lseq:
 *                          NumCRep += 1; older: dropped; CRep = r; commit
 *                          when NumCRep == num_replica
 *          strict (§3.4)   SEQ == MaxSeq: AckMask |= 1 << r, CRep = r,
 *                          lseq = SEQ; commit when (AckMask & LiveMask) ==
 *                          LiveMask; older: r == CRep raises lseq to SEQ
 *                          (lseq: the newest seq CRep is known to hold);
 *                          then with NL_ACK_SUPERSEDED and SEQ <= lseq
 *                          forwarded flagged SUPERSEDED; else dropped
 *          commit = dset[id] = 0 and this ack forwarded to the client
 *   anything else (R_REPLY, NACK)        forwarded to its destination
 * NL_HARMONIA (Harmonia on CR, netlr_harmonia.c; NOT linearizable, the
 * paper's performance-only baseline): the same dset marks keys with a write
 * in flight, with no seq: a client's WRITE is checked for a collision as
 * above, marks its key and goes to the head (replica 0), stats[WRITES]; a
 * READ of a dirty key goes to the tail (replica n_servers - 1), of a clean
 * one round-robin; a replica's W_REPLY clears the key if dset[id] == oid,
 * whatever its seq (stats[COMMITS]), and is forwarded to the client in any
 * case (stats[ACKS]); the chain's copies between replicas are forwarded by
 * destination.
 * A multicast copy is addressed to the node behind its egress port (as
 * netkv-switch rewrites each copy): replica r is behind port r.
 *
 * Named state (identical names in netlr.c):
 *   table     get_dst_rep_table[idx] -> set_dst_rep(rep)  (live index -> replica)
 *             node_fwd[node] -> set_port(port)            (common/forward.p4)
 *   registers dset lseq CRep NumCRep MaxSeq AckMask (NL_SLOTS cells each)
 *             seq num_replica DstRepIdx LiveMask PIN epoch n_servers (1 cell)
 *             ReqMax ReqWin (NL_PORTS cells, one per ingress port)
 *             stats (NL_STAT_COUNT cells, netlr.c enum netlr_stat)
 *   multicast group 1 (NETLR_GROUP, the artifact's): the live replicas' ports
 *
 * The C params are compile-time here (defaults = netlr.c's; the plug-in's
 * P4Program turns the params into these, netkv/protocols/netlr_p4.py):
 *   -DNL_SLOTS=131072 (slots, a power of two <= 2^20) -DNL_STRICT=1 (mode:
 *   1 strict, 0 paper) -DNL_ACK_SUPERSEDED=0 -DNL_STAMP=0
 *   -DNL_COLLISION_NACK=0 -DNL_CHAIN=0 (replication: 1 = cr or hermes)
 *   -DNL_HARMONIA=0 (replication: 1 = harmonia) -DNL_DEDUP=1 (dedup; strict only)
 * Both modes keep every register, so the controller finds the same names in
 * either (as netlr.c does). netlr.c's boot_empty (no replica live until the
 * controller installs them) is what a P4 switch's zeroed registers are
 * anyway: the driver then writes no num_replica/LiveMask at connect.
 *
 * Tofino (digest §3.4) could not clear dset after reading AckMask in one
 * pass; BMv2 has no such limit, and the commit is done in place here.
 *
 * Compile: p4c-bm2-ss --arch v1model --p4runtime-files netlr.p4info.txtpb \
 *              -o netlr.json netlr.p4
 */
#include <core.p4>
#include <v1model.p4>

#define NETKV_PARSE_NETLR
#include "../common/headers.p4"
#include "../common/types.p4"
#include "../common/parser.p4"
#include "../common/wirecheck.p4"
#include "../common/forward.p4"

#ifndef NL_SLOTS
#define NL_SLOTS 131072
#endif
#ifndef NL_STRICT
#define NL_STRICT 1
#endif
#ifndef NL_ACK_SUPERSEDED
#define NL_ACK_SUPERSEDED 0
#endif
#ifndef NL_STAMP
#define NL_STAMP 0
#endif
#ifndef NL_COLLISION_NACK
#define NL_COLLISION_NACK 0
#endif
#ifndef NL_CHAIN
#define NL_CHAIN 0
#endif
#ifndef NL_HARMONIA
#define NL_HARMONIA 0
#endif
#ifndef NL_DEDUP
#define NL_DEDUP 1
#endif
#if NL_SLOTS < 1 || NL_SLOTS > 1048576 || (NL_SLOTS & (NL_SLOTS - 1)) != 0
#error "NL_SLOTS (slots) must be a power of two in 1..2^20"
#endif
#if (NL_STRICT != 0 && NL_STRICT != 1) || (NL_ACK_SUPERSEDED != 0 && NL_ACK_SUPERSEDED != 1) || \
    (NL_STAMP != 0 && NL_STAMP != 1) || (NL_COLLISION_NACK != 0 && NL_COLLISION_NACK != 1) || \
    (NL_CHAIN != 0 && NL_CHAIN != 1) || (NL_HARMONIA != 0 && NL_HARMONIA != 1) || \
    (NL_DEDUP != 0 && NL_DEDUP != 1)
#error "NL_STRICT, NL_ACK_SUPERSEDED, NL_STAMP, NL_COLLISION_NACK, NL_CHAIN, NL_HARMONIA, NL_DEDUP: 0 or 1"
#endif
#if NL_CHAIN == 1 && NL_HARMONIA == 1
#error "NL_CHAIN and NL_HARMONIA: one replication at a time"
#endif

#define NL_MAX_REPLICAS 8           /* LiveMask / AckMask width (artifact MAX_NUM_REPLICA) */
#define NL_STAT_COUNT 15            /* cells of `stats` */
#define NL_PORTS 4096               /* ReqMax/ReqWin cells, one per ingress port (netlr.c's) */
#define NL_REQ_WINDOW 64            /* ReqWin's width, netlr.h NETLR_REQ_WINDOW */
const bit<16> NETLR_GROUP = 1;      /* the replicas' multicast group (artifact's) */
const bit<8> NL_NO_REPLICA = 0xFF;  /* an empty get_dst_rep_table entry */

/* stats cells, netlr.c enum netlr_stat (tests/test_netlr_p4.py compares) */
const bit<8> NL_STAT_READS = 0;
const bit<8> NL_STAT_DIRTY_READS = 1;
const bit<8> NL_STAT_WRITES = 2;
const bit<8> NL_STAT_COLLISIONS = 3;
const bit<8> NL_STAT_ACKS = 4;
const bit<8> NL_STAT_STALE_ACKS = 5;
const bit<8> NL_STAT_COMMITS = 6;
const bit<8> NL_STAT_SUPERSEDED = 7;
const bit<8> NL_STAT_NO_REPLICA = 8;
const bit<8> NL_STAT_BAD_OID = 9;
const bit<8> NL_STAT_HOST_SERVER_OP = 10;
const bit<8> NL_STAT_NO_ROUTE = 11;
const bit<8> NL_STAT_FORGED_FIELDS = 12;
const bit<8> NL_STAT_DUP_WRITES = 13;
const bit<8> NL_STAT_OLD_WRITES = 14;

control NetlrIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t sm) {
    /* per slot */
    @name(".dset")        register<bit<32>>(NL_SLOTS) dset;
    @name(".lseq")        register<bit<32>>(NL_SLOTS) lseq;
    @name(".CRep")        register<bit<8>>(NL_SLOTS) crep;
    @name(".NumCRep")     register<bit<8>>(NL_SLOTS) numcrep;
    @name(".MaxSeq")      register<bit<32>>(NL_SLOTS) maxseq;
    @name(".AckMask")     register<bit<8>>(NL_SLOTS) ackmask;
    /* global */
    @name(".seq")         register<bit<32>>(1) seq;        /* starts at 1 (initial_registers) */
    @name(".num_replica") register<bit<8>>(1) num_replica;
    @name(".DstRepIdx")   register<bit<8>>(1) dst_rep_idx;
    @name(".LiveMask")    register<bit<8>>(1) live_mask;
    @name(".PIN")         register<bit<8>>(1) pin;
    @name(".epoch")       register<bit<16>>(1) epoch;
    @name(".stats")       register<bit<64>>(NL_STAT_COUNT) stats;
    @name(".n_servers")   register<bit<8>>(1) n_servers;   /* replica r behind port r */
    @name(".ReqMax")      register<bit<32>>(NL_PORTS) req_max;
    @name(".ReqWin")      register<bit<64>>(NL_PORTS) req_win;

    NetkvClassify() classify;
    NetlrWireCheck() wire_check;
    NetkvForward() forward;

    bit<8> rr_idx = 0;
    bit<8> rr_rep = NL_NO_REPLICA;

    @name(".set_dst_rep")
    action set_dst_rep(bit<8> rep) {
        rr_rep = rep;
    }

    @name(".dst_rep_miss")
    action dst_rep_miss() {
        rr_rep = NL_NO_REPLICA;
    }

    /* the round-robin's dense list of live replicas (digest §3.5: stable
     * replica ids, this table instead of renumbering) */
    @name(".get_dst_rep_table")
    table get_dst_rep_table {
        key = {
            rr_idx : exact @name("idx");
        }
        actions = {
            set_dst_rep;
            @defaultonly dst_rep_miss;
        }
        const default_action = dst_rep_miss();
        size = NL_MAX_REPLICAS;
    }

    action stat(bit<8> i) {
        bit<64> v;
        stats.read(v, (bit<32>)i);
        stats.write((bit<32>)i, v + 1);
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

        bool want_route = false;     /* netlr.c forward(): counts NO_ROUTE */
        if (meta.is_proto == 1) {
            bit<8> op = hdr.netlr.op;
            bit<8> n8;
            n_servers.read(n8, 0);
            if (meta.origin == ORIGIN_CLIENT && meta.in_port < (bit<16>)n8) {
                meta.origin = ORIGIN_SERVER;
            }
            bool request = op == NETLR_OP_READ || op == NETLR_OP_WRITE;
            if (meta.origin == ORIGIN_CLIENT && !request) {
                /* a forged W_REPLY would commit a write no replica applied */
                stat(NL_STAT_HOST_SERVER_OP);
                meta.fwd = FWD_DROP;
            } else {
                if (meta.origin == ORIGIN_CLIENT) {
                    /* seq, flags and epoch are the switch's (docs/security.md) */
                    if (hdr.netlr.seq != 0 || hdr.netlr.flags != 0 || hdr.netlr.epoch != 0) {
                        stat(NL_STAT_FORGED_FIELDS);
                        hdr.netlr.seq = 0;
                        hdr.netlr.flags = 0;
                        hdr.netlr.epoch = 0;
                        meta.hdr_changed = 1;
                    }
                }
                bit<32> id = hdr.netlr.id & (bit<32>)(NL_SLOTS - 1);
                bit<32> oid = hdr.netlr.oid;
                if (meta.from_cpu == 1 || NL_CHAIN == 1 ||
                    (NL_HARMONIA == 1 && meta.origin != ORIGIN_CLIENT &&
                     op != NETLR_OP_W_REPLY)) {
                    /* the controller addresses replicas itself; chain
                     * replication's hosts address the head, the next
                     * replica, the tail (Harmonia's chain copies too) */
                    want_route = true;
                } else if (request && oid == 0) {
                    stat(NL_STAT_BAD_OID);
                    meta.fwd = FWD_DROP;
                } else if (op == NETLR_OP_READ) {
                    stat(NL_STAT_READS);
                    bit<8> rep = NL_NO_REPLICA;
                    {
                        /* not @atomic: a racing round-robin pointer only
                         * skews the spread, and the table lookup stays
                         * outside any atomic block */
                        bit<32> d;
                        dset.read(d, id);
                        if (d == oid) {
                            if (NL_HARMONIA == 1) {
                                /* the tail, once membership is installed */
                                bit<8> n;
                                num_replica.read(n, 0);
                                if (n != 0) {
                                    rep = n8 - 1;
                                }
                            } else {
                                crep.read(rep, id);
                            }
                            stat(NL_STAT_DIRTY_READS);
                        } else {
                            bit<8> n;
                            bit<8> i;
                            num_replica.read(n, 0);
                            dst_rep_idx.read(i, 0);
                            if (n != 0) {
                                if (i >= n) {
                                    i = 0;      /* the live set shrank under the pointer */
                                }
                                if (i + 1 >= n) {
                                    dst_rep_idx.write(0, 0);
                                } else {
                                    dst_rep_idx.write(0, i + 1);
                                }
                                rr_idx = i;
                                get_dst_rep_table.apply();
                                rep = rr_rep;
                            }
                        }
                        if (NL_STRICT == 1 && NL_STAMP == 1) {
                            seq.read(hdr.netlr.seq, 0);
                            hdr.netlr.flags = hdr.netlr.flags | NETLR_FLAG_STAMPED;
                            meta.hdr_changed = 1;
                        }
                    }
                    if (rep >= n8) {
                        stat(NL_STAT_NO_REPLICA);
                        meta.fwd = FWD_DROP;
                    } else {
                        meta.dst_node = (bit<16>)rep;
                        meta.fwd = FWD_NODE;
                        want_route = true;
                    }
                } else if (op == NETLR_OP_WRITE) {
                    @atomic {
                        bit<32> d;
                        bit<8> n;
                        dset.read(d, id);
                        num_replica.read(n, 0);
                        /* strict: a req_id this client port had stamped
                         * already (a duplicated copy), or too old to tell */
                        bool dedup = NL_DEDUP == 1 && NL_STRICT == 1 && NL_HARMONIA == 0;
                        bit<32> port = (bit<32>)sm.ingress_port;
                        bit<32> rq = hdr.netlr.req_id;
                        bit<32> rmax = 0;
                        bit<64> rwin = 0;
                        bool seen = false;
                        if (dedup) {
                            req_max.read(rmax, port);
                            req_win.read(rwin, port);
                            if (rq <= rmax) {
                                bit<32> back = rmax - rq;
                                if (back >= NL_REQ_WINDOW) {
                                    stat(NL_STAT_OLD_WRITES);
                                    seen = true;
                                } else if (((rwin >> (bit<8>)back) & 1) == 1) {
                                    stat(NL_STAT_DUP_WRITES);
                                    seen = true;
                                }
                            }
                        }
                        if (seen) {
                            meta.fwd = FWD_DROP;
                        } else if (d != 0 && d != oid) {
                            /* hash collision: the slot tracks another key's write */
                            stat(NL_STAT_COLLISIONS);
                            if (NL_COLLISION_NACK == 1) {
                                hdr.netlr.op = NETLR_OP_NACK;
                                hdr.netlr.value = 0;
                                meta.switch_reply = 1;
                                meta.dst_node = meta.src_node;
                                meta.fwd = FWD_NODE;
                                meta.hdr_changed = 1;
                                want_route = true;
                            } else {
                                meta.fwd = FWD_DROP;
                            }
                        } else if (n == 0) {
                            stat(NL_STAT_NO_REPLICA);
                            meta.fwd = FWD_DROP;
                        } else if (NL_HARMONIA == 1) {
                            /* marked dirty, to the head; no seq: the head orders */
                            dset.write(id, oid);
                            stat(NL_STAT_WRITES);
                            meta.dst_node = 0;
                            meta.fwd = FWD_NODE;
                            want_route = true;
                        } else {
                            if (dedup) {
                                /* stamped: remember its req_id (a collided or
                                 * unserved one may come again) */
                                if (rq > rmax) {
                                    bit<32> dist = rq - rmax;
                                    rwin = dist >= NL_REQ_WINDOW ? (bit<64>)1
                                                                 : (rwin << (bit<8>)dist) | 1;
                                    req_max.write(port, rq);
                                } else {
                                    rwin = rwin | ((bit<64>)1 << (bit<8>)(rmax - rq));
                                }
                                req_win.write(port, rwin);
                            }
                            bit<32> s;
                            seq.read(s, 0);
                            s = s + 1;
                            seq.write(0, s);
                            dset.write(id, oid);
                            hdr.netlr.seq = s;
                            epoch.read(hdr.netlr.epoch, 0);
                            meta.hdr_changed = 1;
                            if (NL_STRICT == 1) {
                                if (d == 0) {
                                    bit<8> p;
                                    pin.read(p, 0);
                                    crep.write(id, p);     /* W4: never a stale CRep */
                                    lseq.write(id, 0);     /* PIN holds no write in flight */
                                }
                                maxseq.write(id, s);
                                ackmask.write(id, 0);
                            }
                            stat(NL_STAT_WRITES);
                            sm.mcast_grp = NETLR_GROUP;
                            meta.fwd = FWD_MCAST;
                        }
                    }
                } else if (NL_HARMONIA == 1 && op == NETLR_OP_W_REPLY &&
                           meta.src_node < (bit<16>)n8) {
                    /* the tail's completion: clears its key whatever its
                     * seq (paper §7.1), the client's reply in any case */
                    stat(NL_STAT_ACKS);
                    @atomic {
                        bit<32> d;
                        dset.read(d, id);
                        if (oid != 0 && d == oid) {
                            dset.write(id, 0);
                            stat(NL_STAT_COMMITS);
                        }
                    }
                    want_route = true;
                } else if (op == NETLR_OP_W_REPLY && meta.src_node < (bit<16>)n8) {
                    /* RepID[src]: a replica's id is its node */
                    bit<8> r = (bit<8>)meta.src_node;
                    bit<32> sq = hdr.netlr.seq;
                    @atomic {
                        bit<32> d;
                        bit<16> e;
                        dset.read(d, id);
                        epoch.read(e, 0);
                        bool commit = false;
                        if (oid == 0 || d != oid || hdr.netlr.epoch != e) {
                            /* an ack of an earlier incarnation's write counts for nothing */
                            stat(NL_STAT_STALE_ACKS);
                            meta.fwd = FWD_DROP;
                        } else if (NL_STRICT == 0) {
                            /* paper Alg. 2 */
                            bit<32> l;
                            bit<8> c;
                            bit<8> n;
                            lseq.read(l, id);
                            numcrep.read(c, id);
                            num_replica.read(n, 0);
                            if (sq < l) {
                                stat(NL_STAT_STALE_ACKS);
                                meta.fwd = FWD_DROP;
                            } else {
                                if (sq > l) {
                                    c = 1;
                                    lseq.write(id, sq);
                                } else {
                                    c = c + 1;
                                }
                                numcrep.write(id, c);
                                crep.write(id, r);
                                stat(NL_STAT_ACKS);
                                if (c == n) {
                                    commit = true;
                                } else {
                                    meta.fwd = FWD_DROP;
                                }
                            }
                        } else {
                            bit<32> ms;
                            bit<8> am;
                            bit<8> lm;
                            bit<8> cr;
                            bit<32> l;
                            maxseq.read(ms, id);
                            ackmask.read(am, id);
                            live_mask.read(lm, 0);
                            crep.read(cr, id);
                            lseq.read(l, id);
                            /* an ack means the replica stored SEQ: CRep's own
                             * raises what it is known to hold */
                            if (sq < ms && r == cr && sq > l) {
                                l = sq;
                                lseq.write(id, l);
                            }
                            if (sq == ms) {
                                am = am | ((bit<8>)1 << r);
                                ackmask.write(id, am);
                                crep.write(id, r);
                                lseq.write(id, sq);
                                stat(NL_STAT_ACKS);
                                if ((am & lm) == lm) {
                                    commit = true;
                                } else {
                                    meta.fwd = FWD_DROP;
                                }
                            } else if (sq < ms && NL_ACK_SUPERSEDED == 1 && sq <= l) {
                                /* CRep, which serves the key's reads, holds
                                 * this write or a newer one */
                                hdr.netlr.flags = hdr.netlr.flags | NETLR_FLAG_SUPERSEDED;
                                meta.hdr_changed = 1;
                                stat(NL_STAT_SUPERSEDED);
                                want_route = true;
                            } else {
                                stat(NL_STAT_STALE_ACKS);
                                meta.fwd = FWD_DROP;
                            }
                        }
                        if (commit) {
                            dset.write(id, 0);
                            stat(NL_STAT_COMMITS);
                            want_route = true;      /* this ack is the client's reply */
                        }
                    }
                } else {
                    want_route = true;      /* R_REPLY, NACK: to the client */
                }
            }
        }

        forward.apply(hdr, meta, sm);

        if (want_route && meta.fwd == FWD_DROP) {
            stat(NL_STAT_NO_ROUTE);
        }
    }
}

control NetlrEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    NetkvEgress() egress_common;
    apply {
        /* a multicast copy of a write: addressed to the replica behind its
         * egress port (replica r behind port r, the rack plan), as
         * netkv-switch rewrites each copy */
        if (sm.instance_type == PKT_INSTANCE_REPLICATION && meta.fwd == FWD_MCAST &&
            hdr.netlr.isValid() && hdr.ipv4.isValid()) {
            bit<32> node = (bit<32>)sm.egress_port;
            hdr.ipv4.dst_addr = NODE_NET + node + 1;
            hdr.ethernet.dst_addr = NODE_MAC_BASE + (bit<48>)node + 1;
            meta.hdr_changed = 1;
        }
        egress_common.apply(hdr, meta, sm);
    }
}

V1Switch(NetkvParser(), NetkvVerifyChecksum(), NetlrIngress(), NetlrEgress(),
         NetkvComputeChecksum(), NetkvDeparser()) main;
