/*
 * kvswitch.p4 - the KVSwitch switch (Shi et al., Electronics 8(9) 2019;
 * docs/kvswitch.md, ../shared/design/kvswitch.md §3) for BMv2 (v1model).
 * The P4 twin of hostapps/src/pipeline/kvswitch.c: same table, register and
 * statistics names and semantics; the controller (netkv/protocols/kvswitch.py)
 * drives both through the SwitchDriver surface.
 *
 * Packets: UDP 8888 (docs/wire.md "KVSwitch"); undecodable ones are dropped
 * (KvswitchWireCheck).
 *
 * Per packet (kvswitch.c ks_process):
 *   server/controller-only op      from a client port: dropped, stats[8]
 *   (not GET/SET/DEL)
 *   UPDATE_ACK from a server        Valid[slot] |= 1 << src iff the key is hot
 *                                   (and, strict, VER == Ver[slot]); consumed
 *   GET/SET/DEL from a client       VER and FLAGS zeroed (they are the switch's), stats[10]
 *   cold GET/SET/DEL                HashPipe (d stages, w slots each), forwarded
 *   hot GET                         RoundRobin[slot] -> ordinal o (1..r, then
 *                                   back to 1); ServermapTable(slot, o) ->
 *                                   server; redirected there iff its Valid bit
 *                                   (strict: and the owner's) is set, with
 *                                   VER = Ver[slot] (strict)
 *   hot SET/DEL                     Valid[slot] = owner bit (strict: 0),
 *                                   Ver[slot]++ stamped into VER, FLAGS =
 *                                   owner + 1, multicast to the (owner, r)
 *                                   group; each copy readdressed at egress
 *   hot, r = 1                      (install_below_t: a predicted-hot key
 *                                   below T) counted in HotkeyCount, not
 *                                   HashPipe; ordinal 1 is the owner, so a GET
 *                                   stays there; a SET/DEL is stamped as
 *                                   above and unicast to the owner (no group),
 *                                   also when the client addressed another
 *                                   server
 *   replies, REPL_*                 plain forwarding
 *   Loadcount[server]++             for every GET/SET/DEL (each multicast
 *                                   copy) leaving toward a server, at egress
 *                                   (the paper's egress LoadcountTable)
 *
 * Named state (identical names in kvswitch.c):
 *   table     HotkeyTable[k0, k1] -> hotkey_hit(r, slot, owner)
 *             ServermapTable[slot, ordinal] -> servermap_hit(server)
 *             node_fwd[node] -> set_port(port)
 *   registers RoundRobin Valid Ver HotkeyCount Loadcount HashPipeKeyHi
 *             HashPipeKeyLo HashPipeCount period_reset stats n_servers
 *
 * What P4 cannot do that kvswitch.c does inside a control call, and the
 * driver (netkv/drivers/bmv2.py) therefore does next to it (KVSwitchP4 in
 * netkv/protocols/kvswitch.py):
 *   - reg_write period_reset != 0: clears HashPipe*, HotkeyCount and
 *     Loadcount (Thrift register_reset); the register itself stays 0.
 * Differences from kvswitch.c: Loadcount counts at egress, so a request
 * dropped for want of a route (stats[7]) is not counted; kvswitch.c counts
 * it before forwarding.
 *
 * The C params are compile-time here (defaults = kvswitch.c's):
 *   -DKVS_HOT_KEYS=10000 (param hot_keys, K) -DKVS_HP_STAGES=4
 *   (hashpipe_stages, d) -DKVS_HP_WIDTH=2500 (hashpipe_width, default
 *   ceil(K / d)) -DKVS_STRICT=1 (strict)
 *
 * Compile: p4c-bm2-ss --arch v1model --p4runtime-files kvswitch.p4info.txtpb \
 *              -o kvswitch.json kvswitch.p4
 */
#include <core.p4>
#include <v1model.p4>

#define NETKV_PARSE_KVSWITCH
#include "../common/headers.p4"
#include "../common/types.p4"
#include "../common/parser.p4"
#include "../common/wirecheck.p4"
#include "../common/forward.p4"

#ifndef KVS_HOT_KEYS
#define KVS_HOT_KEYS 10000
#endif
#ifndef KVS_HP_STAGES
#define KVS_HP_STAGES 4
#endif
#ifndef KVS_HP_WIDTH
#define KVS_HP_WIDTH ((KVS_HOT_KEYS + KVS_HP_STAGES - 1) / KVS_HP_STAGES)
#endif
#ifndef KVS_STRICT
#define KVS_STRICT 1
#endif
#if KVS_HP_STAGES < 1 || KVS_HP_STAGES > 8
#error "KVS_HP_STAGES (hashpipe_stages) must be in 1..8"
#endif
#if KVS_HOT_KEYS < 1 || KVS_HOT_KEYS > 65535
#error "KVS_HOT_KEYS (hot_keys) must be in 1..65535"
#endif

/* cells of register `stats` (kvswitch.c enum ks_stat) */
const bit<32> KS_HOT_GETS = 0;
const bit<32> KS_REDIRECTS = 1;
const bit<32> KS_INVALID_FALLBACK = 2;
const bit<32> KS_HOT_WRITES = 3;
const bit<32> KS_COLD = 4;
const bit<32> KS_ACKS = 5;
const bit<32> KS_STALE_ACKS = 6;
const bit<32> KS_NO_ROUTE = 7;
const bit<32> KS_HOST_SERVER_OP = 8;   /* the trust boundary (docs/security.md) */
const bit<32> KS_VER_SATURATED = 9;
const bit<32> KS_FORGED = 10;          /* client VER/FLAGS zeroed (docs/security.md) */
#define KS_COUNT 11

/* HashPipe's per-stage hash salt (kvswitch.c hp_index: CRC-32 over salt ^ stage, KEY) */
const bit<8> KS_HP_SALT = 0xA5;

control KvswitchIngress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t sm) {
    @name(".RoundRobin")    register<bit<8>>(KVS_HOT_KEYS) RoundRobin;
    @name(".Valid")         register<bit<32>>(KVS_HOT_KEYS) Valid;   /* bit s: server s */
    @name(".Ver")           register<bit<32>>(KVS_HOT_KEYS) Ver;
    @name(".HotkeyCount")   register<bit<32>>(KVS_HOT_KEYS) HotkeyCount;
    @name(".HashPipeKeyHi") register<bit<64>>(KVS_HP_STAGES * KVS_HP_WIDTH) HashPipeKeyHi;
    @name(".HashPipeKeyLo") register<bit<64>>(KVS_HP_STAGES * KVS_HP_WIDTH) HashPipeKeyLo;
    @name(".HashPipeCount") register<bit<32>>(KVS_HP_STAGES * KVS_HP_WIDTH) HashPipeCount;
    @name(".period_reset")  register<bit<1>>(1) period_reset;   /* driver: register_reset */
    @name(".stats")         register<bit<64>>(KS_COUNT) stats;
    @name(".n_servers")     register<bit<8>>(1) n_servers;  /* server s behind port s */

    NetkvClassify() classify;
    KvswitchWireCheck() wire_check;
    NetkvForward() forward;

    bit<1>  h_hit = 0;
    bit<8>  h_r = 0;
    bit<16> h_slot = 0;
    bit<8>  h_owner = 0;
    bit<1>  m_hit = 0;
    bit<8>  m_server = 0;
    bit<64> ks_k0 = 0;     /* the key's two 64-bit words: HotkeyTable's key */
    bit<64> ks_k1 = 0;
    bit<16> ks_slot = 0;   /* ServermapTable's key */
    bit<8>  ks_ord = 0;

    @name(".hotkey_hit")
    action hotkey_hit(bit<8> r, bit<16> slot, bit<8> owner) {
        h_hit = 1;
        h_r = r;
        h_slot = slot;
        h_owner = owner;
    }

    @name(".hotkey_miss")
    action hotkey_miss() {
        h_hit = 0;
    }

    /* HotkeyTable with the paper's KeyindexTable (slot) and MultigroupTable
     * (owner, r) merged into its action (digest §3 "Implementation notes") */
    @name(".HotkeyTable")
    table HotkeyTable {
        key = {
            ks_k0 : exact @name("k0");
            ks_k1 : exact @name("k1");
        }
        actions = {
            hotkey_hit;
            @defaultonly hotkey_miss;
        }
        const default_action = hotkey_miss();
        size = KVS_HOT_KEYS;
    }

    @name(".servermap_hit")
    action servermap_hit(bit<8> server) {
        m_hit = 1;
        m_server = server;
    }

    @name(".servermap_miss")
    action servermap_miss() {
        m_hit = 0;
    }

    /* (slot, ordinal) -> server; ordinal 1 is the owner */
    @name(".ServermapTable")
    table ServermapTable {
        key = {
            ks_slot : exact @name("slot");
            ks_ord  : exact @name("ordinal");
        }
        actions = {
            servermap_hit;
            @defaultonly servermap_miss;
        }
        const default_action = servermap_miss();
        size = KVS_HOT_KEYS * KVS_M;
    }

    action stat(bit<32> i) {
        bit<64> v;
        stats.read(v, i);
        stats.write(i, v + 1);
    }

    /* The helpers below are macros that expand into the apply block, not
     * actions: p4c rejects extern calls (register access, hash) under an
     * `if` inside an action on BMv2. Only C comments inside them. */

/* One HashPipe stage (Sivaraman et al., SOSR'17; kvswitch.c hashpipe):
 * stage 0 always inserts, later stages keep the larger count and carry the
 * smaller; whatever is carried past the last stage is dropped. Cell
 * j * KVS_HP_WIDTH + CRC-32(0xA5 ^ j, KEY) mod KVS_HP_WIDTH. */
#define KS_HP_STAGE(j)                                                       \
        if (!hp_done_ && (j) < KVS_HP_STAGES) {                              \
            bit<32> h_;                                                      \
            hash(h_, HashAlgorithm.crc32, 32w0,                              \
                 { KS_HP_SALT ^ (bit<8>)(j), ck0_, ck1_ },                   \
                 (bit<32>)KVS_HP_WIDTH);                                     \
            bit<32> i_ = (j) * KVS_HP_WIDTH + h_;                            \
            bit<64> hi_;                                                     \
            bit<64> lo_;                                                     \
            bit<32> c_;                                                      \
            HashPipeKeyHi.read(hi_, i_);                                     \
            HashPipeKeyLo.read(lo_, i_);                                     \
            HashPipeCount.read(c_, i_);                                      \
            if (c_ != 0 && hi_ == ck0_ && lo_ == ck1_) {                     \
                HashPipeCount.write(i_, c_ + cc_);                           \
                hp_done_ = true;                                             \
            } else if (c_ == 0) {                                            \
                HashPipeKeyHi.write(i_, ck0_);                               \
                HashPipeKeyLo.write(i_, ck1_);                               \
                HashPipeCount.write(i_, cc_);                                \
                hp_done_ = true;                                             \
            } else if ((j) == 0 || c_ < cc_) {                               \
                HashPipeKeyHi.write(i_, ck0_);                               \
                HashPipeKeyLo.write(i_, ck1_);                               \
                HashPipeCount.write(i_, cc_);                                \
                ck0_ = hi_;                                                  \
                ck1_ = lo_;                                                  \
                cc_ = c_;                                                    \
            }                                                                \
        }
#define HASHPIPE()                                                           \
    {                                                                        \
        bit<64> ck0_ = ks_k0;                                                \
        bit<64> ck1_ = ks_k1;                                                \
        bit<32> cc_ = 1;                                                     \
        bool hp_done_ = false;                                               \
        KS_HP_STAGE(0) KS_HP_STAGE(1) KS_HP_STAGE(2) KS_HP_STAGE(3)          \
        KS_HP_STAGE(4) KS_HP_STAGE(5) KS_HP_STAGE(6) KS_HP_STAGE(7)          \
    }

    apply {
        classify.apply(hdr, meta, sm);
        meta.count_load = 0;
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

        bool want_route = false;     /* kvswitch.c forward(): counts KS_NO_ROUTE */
        if (meta.is_proto == 1) {
            bit<8> op = hdr.kvswitch.op;
            bool request = op == KVSWITCH_OP_GET || op == KVSWITCH_OP_SET ||
                           op == KVSWITCH_OP_DEL;
            want_route = true;
            /* the trust boundary (kvswitch.c ks_process, docs/security.md):
             * a client port sends requests only */
            bit<8> n8;
            n_servers.read(n8, 0);
            if (meta.origin == ORIGIN_CLIENT && meta.in_port < (bit<16>)n8) {
                meta.origin = ORIGIN_SERVER;
            }
            ks_k0 = hdr.kvswitch.key[127:64];
            ks_k1 = hdr.kvswitch.key[63:0];
            HotkeyTable.apply();      /* once: every branch below reads it */
            if (meta.origin == ORIGIN_CLIENT && !request) {
                /* a forged ACK would validate a stale replica; forged
                 * pushes, updates and replies would plant values */
                stat(KS_HOST_SERVER_OP);
                meta.fwd = FWD_DROP;
                want_route = false;
            } else if (op == KVSWITCH_OP_UPDATE_ACK) {
                /* "confirm" from a replica: valid again if it applied the
                 * latest write (strict) or any write (paper); consumed */
                @atomic {
                    bit<32> cur = 0;
                    if (h_hit == 1) {
                        Ver.read(cur, (bit<32>)h_slot);
                    }
                    if (h_hit == 1 && meta.src_node < (bit<16>)n8 &&
                        (KVS_STRICT == 0 || hdr.kvswitch.ver == cur)) {
                        bit<32> v;
                        Valid.read(v, (bit<32>)h_slot);
                        Valid.write((bit<32>)h_slot, v | ((bit<32>)1 << (bit<8>)meta.src_node));
                        stat(KS_ACKS);
                    } else {
                        stat(KS_STALE_ACKS);
                    }
                }
                meta.fwd = FWD_DROP;
                want_route = false;
            } else if (request) {
                if (meta.origin == ORIGIN_CLIENT) {
                    /* VER and FLAGS are the switch's (docs/security.md) */
                    if (hdr.kvswitch.ver != 0 || hdr.kvswitch.flags != 0) {
                        stat(KS_FORGED);
                        hdr.kvswitch.ver = 0;
                        hdr.kvswitch.flags = 0;
                        meta.hdr_changed = 1;
                    }
                }
                if (h_hit == 0) {
                    @atomic {
                        stat(KS_COLD);
                        HASHPIPE()
                    }
                    meta.count_load = 1;
                } else {
                    @atomic {
                        bit<32> hc;
                        HotkeyCount.read(hc, (bit<32>)h_slot);
                        if (hc < 0xFFFFFFFF) {
                            HotkeyCount.write((bit<32>)h_slot, hc + 1);
                        }
                    }
                    if (op == KVSWITCH_OP_GET) {
                        /* round robin over the r copies (digest §3 step
                         * 3): o + 1, or 1 once o >= r; a stale cell (0, or
                         * > r after a shrink) is a ServermapTable miss: the
                         * read stays at the owner */
                        bit<8> o;
                        @atomic {
                            RoundRobin.read(o, (bit<32>)h_slot);
                            if (o >= h_r) {
                                RoundRobin.write((bit<32>)h_slot, 1);
                            } else {
                                RoundRobin.write((bit<32>)h_slot, o + 1);
                            }
                        }
                        stat(KS_HOT_GETS);
                        ks_slot = h_slot;
                        ks_ord = o;
                        m_hit = 0;
                        if (o >= 1 && o <= h_r) {
                            ServermapTable.apply();
                        }
                        if (m_hit == 1 && (bit<16>)m_server != meta.dst_node) {
                            /* strict: a replica is read only once the owner
                             * has confirmed the same write */
                            bit<32> need = (bit<32>)1 << m_server;
                            if (KVS_STRICT != 0) {
                                need = need | ((bit<32>)1 << h_owner);
                            }
                            bit<32> v;
                            Valid.read(v, (bit<32>)h_slot);
                            if ((v & need) == need) {
                                meta.dst_node = (bit<16>)m_server;
                                stat(KS_REDIRECTS);
                                if (KVS_STRICT != 0) {
                                    /* the version the replica must not exceed */
                                    Ver.read(hdr.kvswitch.ver, (bit<32>)h_slot);
                                    meta.hdr_changed = 1;
                                }
                            } else {
                                stat(KS_INVALID_FALLBACK);
                            }
                        }
                        meta.count_load = 1;
                    } else {
                        /* a hot SET/DEL: every copy but (paper) the owner's
                         * is invalid until it acknowledges this write */
                        stat(KS_HOT_WRITES);
                        @atomic {
                            if (KVS_STRICT != 0) {
                                Valid.write((bit<32>)h_slot, 0);
                            } else {
                                Valid.write((bit<32>)h_slot, (bit<32>)1 << h_owner);
                            }
                            bit<32> ver;
                            Ver.read(ver, (bit<32>)h_slot);
                            if (ver < 0xFFFFFFFF) {
                                ver = ver + 1;
                                Ver.write((bit<32>)h_slot, ver);
                            } else {
                                stat(KS_VER_SATURATED);
                            }
                            hdr.kvswitch.ver = ver;
                        }
                        /* FLAGS names the owner's copy (its index + 1) */
                        hdr.kvswitch.flags = h_owner + 1;
                        meta.hdr_changed = 1;
                        meta.count_load = 1;
                        if (h_r >= 2) {
                            /* MultigroupTable: the (owner, r) group */
                            sm.mcast_grp = (bit<16>)KVS_MCAST_GROUP((bit<16>)h_owner,
                                                                    (bit<16>)h_r);
                            meta.fwd = FWD_MCAST;
                            want_route = false;
                        } else {
                            /* r = 1: the owner, whatever server the
                             * client addressed */
                            meta.dst_node = (bit<16>)h_owner;
                        }
                    }
                }
                /* Loadcount counts requests to servers only */
                if (meta.fwd != FWD_MCAST && meta.dst_node >= (bit<16>)n8) {
                    meta.count_load = 0;
                }
            }
            /* the rest (replies, REPL_*): L2/L3 only */
        }

        forward.apply(hdr, meta, sm);

        if (want_route && meta.node_hit == 0) {
            stat(KS_NO_ROUTE);
        }
    }
}

control KvswitchEgress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t sm) {
    /* the paper's egress LoadcountTable: requests sent to server j this period */
    @name(".Loadcount")     register<bit<32>>(KVS_M) Loadcount;

    NetkvEgress() egress_common;
    apply {
        bit<16> node = meta.dst_node;
        /* a copy of a multicast write: address it to the node behind its
         * egress port (the rack plan puts server s behind port s, as the
         * controller's groups assume), as netkv-switch rewrites each copy;
         * the UDP checksum is recomputed after the egress (hdr_changed) */
        if (sm.instance_type == PKT_INSTANCE_REPLICATION && meta.fwd == FWD_MCAST &&
            hdr.kvswitch.isValid() && hdr.ipv4.isValid()) {
            node = (bit<16>)sm.egress_port;
            hdr.ipv4.dst_addr = NODE_NET + (bit<32>)node + 1;
            hdr.ethernet.dst_addr = NODE_MAC_BASE + (bit<48>)node + 1;
            meta.hdr_changed = 1;
        }
        if (meta.count_load == 1 && sm.egress_port != CPU_PORT && node < (bit<16>)KVS_M) {
            @atomic {
                bit<32> c;
                Loadcount.read(c, (bit<32>)node);
                if (c < 0xFFFFFFFF) {
                    Loadcount.write((bit<32>)node, c + 1);
                }
            }
        }
        egress_common.apply(hdr, meta, sm);
    }
}

V1Switch(NetkvParser(), NetkvVerifyChecksum(), KvswitchIngress(), KvswitchEgress(),
         NetkvComputeChecksum(), NetkvDeparser()) main;
