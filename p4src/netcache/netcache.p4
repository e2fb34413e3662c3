/*
 * netcache.p4 - the NetCache switch (SOSP'17), the Pegasus paper's baseline,
 * for BMv2 (v1model). The P4 twin of hostapps/src/pipeline/netcache.c: same
 * table, register and statistics names and semantics.
 *
 * Packets: UDP 5050 (docs/wire.md "NetCache"); undecodable ones are dropped
 * (NetcacheWireCheck).
 *
 * Per packet (netcache.c nc_process):
 *   READ, cached and valid      answered by the switch: READ_REPLY with flag
 *                               CACHED and the cached value, sent back to the
 *                               sender's node; cache_hits[idx]++
 *   READ, cached but invalid    forwarded
 *   READ, not cached            count-min sketch (4 rows) + Bloom filter (3
 *                               hashes): a key that crosses hot_threshold for
 *                               the first time is copied to the controller
 *   WRITE / DELETE, cached      invalidate (cache_valid = 0), remember the
 *                               writer (cache_wcli, cache_wreq); a WRITE gets
 *                               flag REFRESH (the server answers with the value)
 *   WRITE_REPLY with REFRESH    refresh the slot iff it answers the last write
 *                               (and result OK, vlen <= max); the client gets
 *                               it without the value
 *   CACHE_UPDATE from the CPU   a controller fetch: remembered, client_id =
 *                               0xFFFF, value stripped, sent to the server
 *   CACHE_UPDATE from a server  fill the slot iff it answers the last fetch;
 *                               it goes to the controller as CACHE_UPDATE_ACK
 *                               (result OK, or RETRY when refused), value
 *                               stripped, and is not forwarded
 *
 * Named state (identical names in netcache.c):
 *   table     cache[k0, k1, key_len] -> cache_hit(idx)   (the 16 B key as two
 *             64-bit words, and the key's length)
 *             node_fwd[node] -> set_port(port)
 *   registers cache_valid cache_vlen cache_value cache_wcli cache_wreq
 *             cache_hits cm_sketch bloom sketch_clear stats
 *
 * What P4 cannot do that netcache.c does inside a control call, and the
 * driver (netkv/drivers/bmv2.py) therefore does next to it:
 *   - table_add cache: netcache.c also sets cache_valid = 0 (and, for a new
 *     entry, cache_wcli = 0xFFFF, cache_wreq = 0xFFFFFFFF); table_delete sets
 *     cache_valid = 0;
 *   - reg_write sketch_clear != 0: clears cm_sketch and bloom (Thrift
 *     register_reset); the register itself stays 0.
 *
 * The C params are compile-time here (defaults = netcache.c's):
 *   -DNC_CACHE_ITEMS=10000 -DNC_MAX_VALUE=128 (a multiple of 16, <= 128)
 *   -DNC_HOT_THRESHOLD=128 -DNC_CM_WIDTH=65536 -DNC_BF_BITS=262144
 *
 * Compile: p4c-bm2-ss --arch v1model --p4runtime-files netcache.p4info.txtpb \
 *              -o netcache.json netcache.p4
 */
#include <core.p4>
#include <v1model.p4>

#define NETKV_PARSE_NETCACHE
#include "../common/headers.p4"
#include "../common/types.p4"
#include "../common/parser.p4"
#include "../common/wirecheck.p4"
#include "../common/forward.p4"

#ifndef NC_CACHE_ITEMS
#define NC_CACHE_ITEMS 10000
#endif
#ifndef NC_MAX_VALUE
#define NC_MAX_VALUE 128
#endif
#ifndef NC_HOT_THRESHOLD
#define NC_HOT_THRESHOLD 128
#endif
#ifndef NC_CM_WIDTH
#define NC_CM_WIDTH 65536
#endif
#ifndef NC_BF_BITS
#define NC_BF_BITS 262144
#endif
#if (NC_MAX_VALUE % 16) != 0 || NC_MAX_VALUE > 128 || NC_MAX_VALUE < 16
#error "NC_MAX_VALUE must be a multiple of 16 in 16..128"
#endif
#define NC_WORDS (NC_MAX_VALUE / 8)     /* 64-bit cells of cache_value per slot */

/* request: the key is cached, answer with the new value; reply: carries it
 * (netcache.c NK_NETCACHE_FLAG_REFRESH) */

/* cells of register `stats` (netcache.c enum nc_stat) */
const bit<32> NS_HITS = 0;
const bit<32> NS_MISSES = 1;
const bit<32> NS_INVALID_READS = 2;
const bit<32> NS_INVALIDATIONS = 3;
const bit<32> NS_REFRESHES = 4;
const bit<32> NS_STALE_REFRESH = 5;
const bit<32> NS_FETCHES = 6;
const bit<32> NS_UPDATES = 7;
const bit<32> NS_HOT_REPORTS = 8;
const bit<32> NS_NO_ROUTE = 9;
const bit<32> NS_HOST_SERVER_OP = 10;   /* the trust boundary (docs/security.md) */
#define NS_COUNT 11

control NetcacheIngress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t sm) {
    @name(".cache_valid")  register<bit<1>>(NC_CACHE_ITEMS) cache_valid;
    @name(".cache_vlen")   register<bit<8>>(NC_CACHE_ITEMS) cache_vlen;
    @name(".cache_value")  register<bit<64>>(NC_CACHE_ITEMS * NC_WORDS) cache_value;
    @name(".cache_wcli")   register<bit<16>>(NC_CACHE_ITEMS) cache_wcli;
    @name(".cache_wreq")   register<bit<32>>(NC_CACHE_ITEMS) cache_wreq;
    @name(".cache_hits")   register<bit<32>>(NC_CACHE_ITEMS) cache_hits;
    @name(".cm_sketch")    register<bit<16>>(NC_CM_ROWS * NC_CM_WIDTH) cm_sketch;
    @name(".bloom")        register<bit<1>>(NC_BF_BITS) bloom;
    @name(".sketch_clear") register<bit<1>>(1) sketch_clear;   /* driver: register_reset */
    @name(".stats")        register<bit<64>>(NS_COUNT) stats;
    @name(".n_servers")    register<bit<8>>(1) n_servers;  /* server s behind port s */

    NetkvClassify() classify;
    NetcacheWireCheck() wire_check;
    NetkvForward() forward;

    bit<1>  c_hit = 0;
    bit<32> c_idx = 0;
    bit<64> k0 = 0;     /* the key's two 64-bit words: the cache table's key */
    bit<64> k1 = 0;

    @name(".cache_hit")
    action cache_hit(bit<32> idx) {
        c_hit = 1;
        c_idx = idx;
    }

    @name(".cache_miss")
    action cache_miss() {
        c_hit = 0;
    }

    @name(".cache")
    table cache {
        key = {
            k0 : exact @name("k0");
            k1 : exact @name("k1");
            /* K and K||0x00 fill the same 16 B: the length tells them apart */
            hdr.netcache.key_len : exact @name("key_len");
        }
        actions = {
            cache_hit;
            @defaultonly cache_miss;
        }
        const default_action = cache_miss();
        size = NC_CACHE_ITEMS;
    }

    action stat(bit<32> i) {
        bit<64> v;
        stats.read(v, i);
        stats.write(i, v + 1);
    }

    /* the value area now holds `slices` 16 B slices: fix the lengths (only
     * called when nothing of the value is left unparsed) */
    action set_value_area(bit<16> vlen) {
        bit<16> area = (vlen + 15) & 0xFFF0;
        hdr.netcache.vlen = vlen;
        hdr.udp.length = 8 + 40 + area;
        hdr.ipv4.total_len = 20 + 8 + 40 + area;
        meta.hdr_changed = 1;
    }

    /* The helpers below are macros that expand into the apply block, not
     * actions: p4c 1.2.4 rejects extern calls (register access, hash,
     * setValid, truncate) under an `if` inside an action on BMv2. Each
     * expands to one block; only C comments inside them. */

/* drop the value from the packet (netcache.c: value_len = 0). A value BMv2
 * did not parse (> 128 B) is cut off by truncate() at egress, after the
 * checksum is computed: such a datagram leaves without a UDP checksum (0 =
 * none, valid for IPv4) rather than with a wrong one. */
#define STRIP_VALUE()                                                        \
    {                                                                        \
        bool unparsed_ = hdr.netcache.vlen > 128;                            \
        hdr.nc_value[0].setInvalid();                                        \
        hdr.nc_value[1].setInvalid();                                        \
        hdr.nc_value[2].setInvalid();                                        \
        hdr.nc_value[3].setInvalid();                                        \
        hdr.nc_value[4].setInvalid();                                        \
        hdr.nc_value[5].setInvalid();                                        \
        hdr.nc_value[6].setInvalid();                                        \
        hdr.nc_value[7].setInvalid();                                        \
        set_value_area(0);                                                   \
        if (unparsed_) {                                                     \
            truncate(14 + 20 + 8 + 40);                                      \
            hdr.udp.checksum = 0;                                            \
        }                                                                    \
    }

/* store the parsed value (vlen <= NC_MAX_VALUE) in slot c_idx (netcache.c
 * store_value); cache_value cell c_idx * NC_WORDS + w holds value bytes
 * 8w..8w+7, big-endian. Whole slices are written (their padding is zero:
 * NetcacheWireCheck). */
#define NC_STORE_SLICE(j)                                                    \
        if (hdr.nc_value[j].isValid() && j * 16 < NC_MAX_VALUE) {            \
            cache_value.write(base_ + 2 * j, hdr.nc_value[j].slice[127:64]); \
            cache_value.write(base_ + 2 * j + 1, hdr.nc_value[j].slice[63:0]); \
        }
#define STORE_VALUE()                                                        \
    {                                                                        \
        bit<32> base_ = c_idx * NC_WORDS;                                    \
        NC_STORE_SLICE(0) NC_STORE_SLICE(1) NC_STORE_SLICE(2) NC_STORE_SLICE(3) \
        NC_STORE_SLICE(4) NC_STORE_SLICE(5) NC_STORE_SLICE(6) NC_STORE_SLICE(7) \
        cache_vlen.write(c_idx, (bit<8>)hdr.netcache.vlen);                  \
        cache_valid.write(c_idx, 1);                                         \
    }

/* the cached value of slot c_idx into the packet's value slices (READ hit);
 * the unused bytes of the last slice are cleared (the codec demands zero
 * padding, whatever the controller wrote into cache_value) */
#define NC_LOAD_SLICE(j)                                                     \
        if (j < nslices_ && j * 16 < NC_MAX_VALUE) {                         \
            bit<64> hi_;                                                     \
            bit<64> lo_;                                                     \
            cache_value.read(hi_, base_ + 2 * j);                            \
            cache_value.read(lo_, base_ + 2 * j + 1);                        \
            hdr.nc_value[j].setValid();                                      \
            if (j + 1 == nslices_) {                                         \
                hdr.nc_value[j].slice = (hi_ ++ lo_) & lastmask_;            \
            } else {                                                         \
                hdr.nc_value[j].slice = hi_ ++ lo_;                          \
            }                                                                \
        } else {                                                             \
            hdr.nc_value[j].setInvalid();                                    \
        }
#define LOAD_VALUE(VLEN)                                                     \
    {                                                                        \
        bit<32> base_ = c_idx * NC_WORDS;                                    \
        bit<32> nslices_ = ((bit<32>)(VLEN) + 15) >> 4;                      \
        bit<32> used_ = (bit<32>)(VLEN) & 15;                                \
        bit<128> lastmask_ = ~(bit<128>)0;                                   \
        if (used_ != 0) {                                                    \
            lastmask_ = ~(((bit<128>)1 << (bit<8>)((16 - used_) << 3)) - 1); \
        }                                                                    \
        NC_LOAD_SLICE(0) NC_LOAD_SLICE(1) NC_LOAD_SLICE(2) NC_LOAD_SLICE(3)  \
        NC_LOAD_SLICE(4) NC_LOAD_SLICE(5) NC_LOAD_SLICE(6) NC_LOAD_SLICE(7)  \
        set_value_area((bit<16>)(VLEN));                                     \
    }

/* count-min update + estimate; Bloom test-and-set when hot (netcache.c
 * hot_detect). Row r hashes CRC-32(r, NC_HASH_SEED0, NC_HASH_SEED1,
 * r * NC_HASH_ROW_MUL mod 256, key) mod width (constants.p4). */
#define NC_CM_ROW(r)                                                         \
        {                                                                    \
            bit<32> h_;                                                      \
            hash(h_, HashAlgorithm.crc32, 32w0,                              \
                 { (bit<8>)(r), NC_HASH_SEED0, NC_HASH_SEED1, (bit<8>)(r) * NC_HASH_ROW_MUL, hdr.netcache.key }, \
                 (bit<32>)NC_CM_WIDTH);                                      \
            bit<32> i_ = (r) * NC_CM_WIDTH + h_;                             \
            bit<16> c_;                                                      \
            cm_sketch.read(c_, i_);                                          \
            if (c_ < 0xFFFF) { c_ = c_ + 1; cm_sketch.write(i_, c_); }       \
            if (c_ < est_) { est_ = c_; }                                    \
        }
#define NC_BF_HASH(r)                                                        \
        {                                                                    \
            bit<32> h_;                                                      \
            hash(h_, HashAlgorithm.crc32, 32w0,                              \
                 { (bit<8>)(r), NC_HASH_SEED0, NC_HASH_SEED1, (bit<8>)(r) * NC_HASH_ROW_MUL, hdr.netcache.key }, \
                 (bit<32>)NC_BF_BITS);                                       \
            bit<1> b_;                                                       \
            bloom.read(b_, h_);                                              \
            if (b_ == 0) { seen_ = false; }                                  \
            bloom.write(h_, 1);                                              \
        }
#define HOT_DETECT()                                                         \
    {                                                                        \
        bit<16> est_ = 0xFFFF;                                               \
        NC_CM_ROW(0) NC_CM_ROW(1) NC_CM_ROW(2) NC_CM_ROW(3)                  \
        if (est_ >= NC_HOT_THRESHOLD) {                                      \
            bool seen_ = true;                                               \
            NC_BF_HASH(4) NC_BF_HASH(5) NC_BF_HASH(6)                        \
            if (!seen_) {                                                    \
                meta.to_cpu = 1;        /* the copy is the hot report */     \
                stat(NS_HOT_REPORTS);                                        \
            }                                                                \
        }                                                                    \
    }

    apply {
        classify.apply(hdr, meta, sm);
        if (meta.is_proto == 1 && meta.fwd != FWD_DROP) {
            bool ok;
            wire_check.apply(hdr, meta, ok);
            if (!ok) {
                meta.fwd = FWD_DROP;
                meta.is_proto = 0;
            }
        } else {
            meta.is_proto = 0;
        }

        bool want_route = false;     /* netcache.c forward(): counts NS_NO_ROUTE */
        if (meta.is_proto == 1) {
            k0 = hdr.netcache.key[127:64];
            k1 = hdr.netcache.key[63:0];
            cache.apply();
            bit<8> op = hdr.netcache.op;
            want_route = true;
            /* the trust boundary (netcache.c nc_process, docs/security.md):
             * a client port sends requests only */
            bit<8> n8;
            n_servers.read(n8, 0);
            if (meta.origin == ORIGIN_CLIENT && meta.in_port < (bit<16>)n8) {
                meta.origin = ORIGIN_SERVER;
            }
            /* enforced once the controller has written n_servers (BMv2) */
            if (meta.origin == ORIGIN_CLIENT && n8 != 0 && op != NETCACHE_OP_READ &&
                op != NETCACHE_OP_WRITE && op != NETCACHE_OP_DELETE) {
                stat(NS_HOST_SERVER_OP);
                meta.fwd = FWD_DROP;
                want_route = false;
                op = 0xFF;                  /* no op: nothing below applies */
            }

            if (op == NETCACHE_OP_READ) {
                bit<1> valid = 0;
                if (c_hit == 1) {
                    cache_valid.read(valid, c_idx);
                }
                if (c_hit == 1 && valid == 1 && hdr.netcache.vlen == 0) {
                    /* answered by the switch */
                    @atomic {
                        bit<8> vl;
                        cache_vlen.read(vl, c_idx);
                        hdr.netcache.op = NETCACHE_OP_READ_REPLY;
                        hdr.netcache.result = RESULT_OK;
                        hdr.netcache.flags = hdr.netcache.flags | NETCACHE_FLAG_CACHED;
                        hdr.netcache.server_id = SERVER_NONE;   /* served by the switch */
                        LOAD_VALUE(vl)
                        meta.dst_node = meta.src_node;
                        meta.switch_reply = 1;
                        bit<32> hc;
                        cache_hits.read(hc, c_idx);
                        if (hc < 0xFFFFFFFF) { cache_hits.write(c_idx, hc + 1); }
                        stat(NS_HITS);
                    }
                } else if (c_hit == 1) {
                    stat(NS_INVALID_READS);
                } else {
                    @atomic {
                        stat(NS_MISSES);
                        HOT_DETECT()
                    }
                }
            } else if (op == NETCACHE_OP_WRITE || op == NETCACHE_OP_DELETE) {
                if ((hdr.netcache.flags & NETCACHE_FLAG_REFRESH) != 0) {
                    hdr.netcache.flags = hdr.netcache.flags & ~NETCACHE_FLAG_REFRESH;
                    meta.hdr_changed = 1;
                }
                if (c_hit == 1) {
                    @atomic {
                        cache_valid.write(c_idx, 0);
                        cache_wcli.write(c_idx, hdr.netcache.client_id);
                        cache_wreq.write(c_idx, hdr.netcache.seq);
                    }
                    if (op == NETCACHE_OP_WRITE) {
                        hdr.netcache.flags = hdr.netcache.flags | NETCACHE_FLAG_REFRESH;
                        meta.hdr_changed = 1;
                    }
                    stat(NS_INVALIDATIONS);
                }
            } else if (op == NETCACHE_OP_WRITE_REPLY) {
                if ((hdr.netcache.flags & NETCACHE_FLAG_REFRESH) != 0) {
                    @atomic {
                        bit<16> wcli = 0;
                        bit<32> wreq = 0;
                        if (c_hit == 1) {
                            cache_wcli.read(wcli, c_idx);
                            cache_wreq.read(wreq, c_idx);
                        }
                        if (c_hit == 1 && hdr.netcache.result == RESULT_OK &&
                            wcli == hdr.netcache.client_id && wreq == hdr.netcache.seq &&
                            hdr.netcache.vlen <= NC_MAX_VALUE) {
                            STORE_VALUE()
                            stat(NS_REFRESHES);
                        } else {
                            stat(NS_STALE_REFRESH);
                        }
                    }
                    /* the client gets a plain reply */
                    hdr.netcache.flags = hdr.netcache.flags & ~NETCACHE_FLAG_REFRESH;
                    STRIP_VALUE()
                }
            } else if (op == NETCACHE_OP_CACHE_UPDATE) {
                if (meta.origin == ORIGIN_TRUSTED) {
                    /* controller fetch: remember it, ask the server */
                    if (c_hit == 0) {
                        meta.fwd = FWD_DROP;
                        want_route = false;
                    } else {
                        @atomic {
                            cache_wcli.write(c_idx, NC_FETCH_CLIENT);
                            cache_wreq.write(c_idx, hdr.netcache.seq);
                        }
                        hdr.netcache.client_id = NC_FETCH_CLIENT;
                        STRIP_VALUE()
                        stat(NS_FETCHES);
                    }
                } else {
                    /* the server's answer: fill the slot if no write intervened */
                    bit<8> ack_result = RESULT_RETRY;
                    @atomic {
                        bit<16> wcli = 0;
                        bit<32> wreq = 0;
                        if (c_hit == 1) {
                            cache_wcli.read(wcli, c_idx);
                            cache_wreq.read(wreq, c_idx);
                        }
                        if (c_hit == 1 && hdr.netcache.result == RESULT_OK &&
                            wcli == NC_FETCH_CLIENT && wreq == hdr.netcache.seq &&
                            hdr.netcache.vlen <= NC_MAX_VALUE) {
                            STORE_VALUE()
                            stat(NS_UPDATES);
                            ack_result = RESULT_OK;
                        } else {
                            stat(NS_STALE_REFRESH);
                        }
                    }
                    /* it becomes a CACHE_UPDATE_ACK for the controller and is
                     * not forwarded (docs/netcache.md) */
                    hdr.netcache.op = NETCACHE_OP_CACHE_UPDATE_ACK;
                    hdr.netcache.result = ack_result;
                    STRIP_VALUE()
                    meta.fwd = FWD_PORT;
                    meta.out_port = CPU_PORT;
                    meta.cpu_reason = PKTIN_TO_CPU;
                    want_route = false;
                }
            }
            /* the rest: L2/L3 only */
        }

        forward.apply(hdr, meta, sm);

        if (want_route && meta.node_hit == 0) {
            stat(NS_NO_ROUTE);
        }
    }
}

control NetcacheEgress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t sm) {
    NetkvEgress() egress_common;
    apply {
        egress_common.apply(hdr, meta, sm);
    }
}

V1Switch(NetkvParser(), NetkvVerifyChecksum(), NetcacheIngress(), NetcacheEgress(),
         NetkvComputeChecksum(), NetkvDeparser()) main;
