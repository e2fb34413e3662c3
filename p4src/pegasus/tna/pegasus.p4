/*
 * tna/pegasus.p4 - the Pegasus switch (OSDI'20) for Tofino (TNA): the twin of
 * ../pegasus.p4 (v1model) and hostapps/src/pipeline/pegasus.c, with the same
 * table, register and statistics names (docs/pegasus.md), so one controller
 * drives all three. Written for TNA, NOT compiled here (no bf-p4c on this
 * project's machines; docs/testbed.md "Tofino"): expect bf-p4c to ask for
 * stage or exclusivity rework before it fits a pipe.
 *
 * Every register is reached through RegisterActions (one stateful ALU run
 * per register per packet); every table, the small const lookup tables
 * included, is applied at one place. Algorithm 1 (stamp, pick from the rset,
 * write fan-out by multicast group start*32 + r-1) and Algorithm 2 (the
 * directory update on replies) are those of ../pegasus.p4.
 *
 * Implemented variants: PEG_SELECTION 1 (round robin) and 2 (weighted round
 * robin, the default), PEG_WRITE_MCAST 0/1, PEG_SAMPLE, PEG_MAX_RKEYS.
 * Random and least-loaded selection, PEG_AMO and PEG_FANOUT_AUTO stop the
 * build with #error (v1model only).
 *
 * Differences from ../pegasus.p4 (docs/pegasus.md "TNA"), each for a Tofino
 * limit:
 *   - versions are 32 bits in the switch (ver_next, ver_completed,
 *     ver_last_write: one stateful ALU word); VER on the wire stays 64 bits;
 *     a trusted VER above 32 bits is refused (ST_VER_EXHAUSTED);
 *   - `stats` cells are 32 bits, and one cell is counted per packet: a
 *     forged field first, then no-route, then the packet's outcome
 *     (ST_SAMPLED is not counted: the controller sees the sample itself);
 *   - srv_inflight is not counted for multicast writes (one register cell
 *     per packet); it only steers least-loaded selection, which is v1model
 *     only;
 *   - a weighted round-robin entry >= n_servers is reduced by one
 *     subtraction (exact for entries < 2n; the controller writes entries < n);
 *   - a VWRITE refused because a write is outstanding still takes a version
 *     (versions stay increasing, one is skipped);
 *   - wrr_len is 16 bits (Tofino registers are 1, 8, 16 or 32 bits).
 *
 * Compile (with an SDE): bf-p4c --target tofino --arch tna \
 *     --p4runtime-files pegasus.p4info.txtpb -o <out> pegasus.p4
 */
#include <core.p4>
#include <tna.p4>

#define NETKV_TNA
#define NETKV_PARSE_PEGASUS
#include "../../common/headers.p4"
#include "../../common/types.p4"
#include "../../common/wirecheck.p4"
#include "../../common/tna/shell.p4"

/* ---- compile-time parameters (pegasus.c params, as ../pegasus.p4) ---- */
#ifndef PEG_MAX_RKEYS
#define PEG_MAX_RKEYS 64
#endif
#define SEL_RANDOM 0
#define SEL_RR 1
#define SEL_WRR 2
#define SEL_LEAST_LOADED 3
#ifndef PEG_SELECTION
#define PEG_SELECTION SEL_WRR
#endif
#ifndef PEG_AMO
#define PEG_AMO 0
#endif
#ifndef PEG_SAMPLE
#define PEG_SAMPLE 128
#endif
#ifndef PEG_FANOUT_AUTO
#define PEG_FANOUT_AUTO 0
#endif
#ifndef PEG_WRITE_MCAST
#define PEG_WRITE_MCAST 1
#endif
#if PEG_SELECTION != SEL_RR && PEG_SELECTION != SEL_WRR
#error "PEG_SELECTION random (0) and least_loaded (3) are not written for TNA (v1model only: p4src/pegasus/pegasus.p4)"
#endif
#if PEG_AMO || PEG_FANOUT_AUTO
#error "PEG_AMO and PEG_FANOUT_AUTO are not written for TNA (v1model only: p4src/pegasus/pegasus.p4)"
#endif

#define PEG_MAX_NODES 4096
const bit<32> PEG_RATE_MAX = 0xFFFFFFFF;
const bit<32> VER_TOP32 = 0xFFFFFFFF;    /* versions never wrap */

/* cells of register `stats` (pegasus.c enum peg_stat) */
const bit<8> ST_READS = 0;
const bit<8> ST_WRITES = 1;
const bit<8> ST_MISS = 2;
const bit<8> ST_BYPASS = 4;
const bit<8> ST_RESET = 5;
const bit<8> ST_EXTEND = 6;
const bit<8> ST_STALE = 7;
const bit<8> ST_VWRITE_FWD = 8;
const bit<8> ST_VWRITE_DROP = 9;
const bit<8> ST_PAUSED_DROP = 10;
const bit<8> ST_NO_ROUTE = 11;
const bit<8> ST_TO_CPU = 12;
const bit<8> ST_BAD_SERVER = 13;
const bit<8> ST_FORGED_VER = 14;
const bit<8> ST_FORGED_FLAGS = 15;
const bit<8> ST_HOST_SERVER_OP = 16;
const bit<8> ST_VER_EXHAUSTED = 17;
#define ST_COUNT 18
const bit<8> ST_NONE = 0xFF;

/* srv_inflight's one access per packet */
const bit<2> INFL_NONE = 0;
const bit<2> INFL_INC = 1;
const bit<2> INFL_DEC = 2;

/* directory compare (ver_completed_cmp) */
const bit<8> DIR_STALE = 0;
const bit<8> DIR_SAME = 1;
const bit<8> DIR_NEWER = 2;

/* 1 << k for k < 32: Tofino shifts by constants only */
control Pow2(in bit<8> k, out bit<32> bits) {
    action set_bits(bit<32> v) { bits = v; }
    table pow2 {
        key = { k : exact; }
        actions = { set_bits; }
        const default_action = set_bits(0);
        size = 32;
        const entries = {
            0 : set_bits(32w0x00000001);
            1 : set_bits(32w0x00000002);
            2 : set_bits(32w0x00000004);
            3 : set_bits(32w0x00000008);
            4 : set_bits(32w0x00000010);
            5 : set_bits(32w0x00000020);
            6 : set_bits(32w0x00000040);
            7 : set_bits(32w0x00000080);
            8 : set_bits(32w0x00000100);
            9 : set_bits(32w0x00000200);
            10 : set_bits(32w0x00000400);
            11 : set_bits(32w0x00000800);
            12 : set_bits(32w0x00001000);
            13 : set_bits(32w0x00002000);
            14 : set_bits(32w0x00004000);
            15 : set_bits(32w0x00008000);
            16 : set_bits(32w0x00010000);
            17 : set_bits(32w0x00020000);
            18 : set_bits(32w0x00040000);
            19 : set_bits(32w0x00080000);
            20 : set_bits(32w0x00100000);
            21 : set_bits(32w0x00200000);
            22 : set_bits(32w0x00400000);
            23 : set_bits(32w0x00800000);
            24 : set_bits(32w0x01000000);
            25 : set_bits(32w0x02000000);
            26 : set_bits(32w0x04000000);
            27 : set_bits(32w0x08000000);
            28 : set_bits(32w0x10000000);
            29 : set_bits(32w0x20000000);
            30 : set_bits(32w0x40000000);
            31 : set_bits(32w0x80000000);
        }
    }
    apply { pow2.apply(); }
}

/* (1 << k) - 1 for k <= 32 */
control LowMask(in bit<8> k, out bit<32> bits) {
    action set_bits(bit<32> v) { bits = v; }
    table lowmask {
        key = { k : exact; }
        actions = { set_bits; }
        const default_action = set_bits(0xFFFFFFFF);
        size = 33;
        const entries = {
            0 : set_bits(32w0x00000000);
            1 : set_bits(32w0x00000001);
            2 : set_bits(32w0x00000003);
            3 : set_bits(32w0x00000007);
            4 : set_bits(32w0x0000000F);
            5 : set_bits(32w0x0000001F);
            6 : set_bits(32w0x0000003F);
            7 : set_bits(32w0x0000007F);
            8 : set_bits(32w0x000000FF);
            9 : set_bits(32w0x000001FF);
            10 : set_bits(32w0x000003FF);
            11 : set_bits(32w0x000007FF);
            12 : set_bits(32w0x00000FFF);
            13 : set_bits(32w0x00001FFF);
            14 : set_bits(32w0x00003FFF);
            15 : set_bits(32w0x00007FFF);
            16 : set_bits(32w0x0000FFFF);
            17 : set_bits(32w0x0001FFFF);
            18 : set_bits(32w0x0003FFFF);
            19 : set_bits(32w0x0007FFFF);
            20 : set_bits(32w0x000FFFFF);
            21 : set_bits(32w0x001FFFFF);
            22 : set_bits(32w0x003FFFFF);
            23 : set_bits(32w0x007FFFFF);
            24 : set_bits(32w0x00FFFFFF);
            25 : set_bits(32w0x01FFFFFF);
            26 : set_bits(32w0x03FFFFFF);
            27 : set_bits(32w0x07FFFFFF);
            28 : set_bits(32w0x0FFFFFFF);
            29 : set_bits(32w0x1FFFFFFF);
            30 : set_bits(32w0x3FFFFFFF);
            31 : set_bits(32w0x7FFFFFFF);
            32 : set_bits(32w0xFFFFFFFF);
        }
    }
    apply { lowmask.apply(); }
}

control PegasusIngress(inout headers_t hdr, inout metadata_t meta,
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* ---- registers (pegasus.c add_reg: same names and sizes) ---- */
    @name(".ver_next")       Register<bit<32>, bit<32>>(1) ver_next;
    @name(".ver_completed")  Register<bit<32>, bit<32>>(PEG_MAX_RKEYS) ver_completed;
    @name(".ver_last_write") Register<bit<32>, bit<32>>(PEG_MAX_RKEYS) ver_last_write;
    @name(".rset_size")      Register<bit<8>, bit<32>>(PEG_MAX_RKEYS) rset_size;
    @name(".rset_bitmap")    Register<bit<32>, bit<32>>(PEG_MAX_RKEYS) rset_bitmap;
    @name(".rset_list")      Register<bit<8>, bit<32>>(PEG_MAX_RKEYS * PEG_N) rset_list;
    @name(".rr_key")         Register<bit<8>, bit<32>>(PEG_MAX_RKEYS) rr_key;
    @name(".rr_all")         Register<bit<8>, bit<32>>(1) rr_all;
    @name(".n_servers")      Register<bit<8>, bit<32>>(1) n_servers;
    @name(".rate")           Register<bit<32>, bit<32>>(PEG_MAX_RKEYS) rate;
    @name(".rd_cnt")         Register<bit<32>, bit<32>>(PEG_MAX_RKEYS) rd_cnt;
    @name(".wr_cnt")         Register<bit<32>, bit<32>>(PEG_MAX_RKEYS) wr_cnt;
    @name(".fanout")         Register<bit<8>, bit<32>>(PEG_MAX_RKEYS) fanout;
    @name(".draining")       Register<bit<1>, bit<32>>(PEG_MAX_RKEYS) draining;
    @name(".paused")         Register<bit<1>, bit<32>>(PEG_MAX_RKEYS) paused;
    @name(".wrr_sched")      Register<bit<8>, bit<32>>(PEG_WRR_SLOTS) wrr_sched;
    @name(".wrr_cursor")     Register<bit<8>, bit<32>>(1) wrr_cursor;
    @name(".wrr_len")        Register<bit<16>, bit<32>>(1) wrr_len;
    @name(".srv_load")       Register<bit<32>, bit<32>>(PEG_N) srv_load;
    @name(".srv_inflight")   Register<bit<32>, bit<32>>(PEG_N) srv_inflight;
    @name(".sample_cnt")     Register<bit<32>, bit<32>>(1) sample_cnt;
    @name(".stats")          Register<bit<32>, bit<32>>(ST_COUNT) stats;

    NetkvTnaClassify() classify;
    PegasusWireCheck() wire_check;
    NetkvTnaForward() forward;
    Pow2() sid_bit;          /* 1 << server_id (Algorithm 2) */
    Pow2() member_bit;       /* 1 << the WRR pick (membership in the rset) */
    Pow2() start_bit;        /* 1 << the first write target */
    LowMask() mask_start;
    LowMask() mask_end;
    LowMask() mask_wrap;

    /* per-packet scratch */
    bit<1>  rk_hit = 0;
    bit<32> rk_idx = 0;
    bit<32> base = 0;         /* rk_idx * PEG_N: rset_list row */
    bit<8>  nsrv = 1;         /* n_servers, never 0 */
    bit<8>  size = 0;         /* rset_size[rk_idx] */
    bit<8>  last = 0;         /* wrr_len - 1, capped to the cursor's 8 bits */
    bit<32> ver32 = 0;        /* VER's low 32 bits (versions are 32-bit here) */
    bit<32> vc = 0;           /* ver_completed[rk_idx] (VWRITE) */
    bit<32> bm = 0;           /* rset_bitmap[rk_idx] */
    bit<32> sbit = 0;         /* 1 << server_id */
    bit<8>  sel = 0;          /* a selected server */
    bit<8>  fo_r = 1;         /* write fan-out r */
    bit<8>  wr_start = 0;     /* the first write target */
    bit<8>  st = ST_NONE;     /* the packet's `stats` cell */
    bit<8>  st_forged = ST_NONE;
    bit<2>  infl = INFL_NONE; /* srv_inflight's access */
    bit<32> infl_idx = 0;
    bool stamp_refused = false;
    bool do_select_read = false;  /* SELECT_READ once, for a READ or a VWRITE */
    bool do_dir = false;          /* Algorithm 2 once, for a reply or a PUT_FWD */

    /* ---- rkeys: keyhash -> idx (control plane only) ---- */
    @name(".rkeys_hit")
    action rkeys_hit(bit<32> idx) {
        rk_hit = 1;
        rk_idx = idx;
    }

    @name(".rkeys_miss")
    action rkeys_miss() {
        rk_hit = 0;
    }

    @name(".rkeys")
    table rkeys {
        key = {
            hdr.pegasus.keyhash : exact @name("keyhash");
        }
        actions = {
            rkeys_hit;
            @defaultonly rkeys_miss;
        }
        const default_action = rkeys_miss();
        size = PEG_MAX_RKEYS;
    }

    /* ---- register actions ---- */
    RegisterAction<bit<8>, bit<32>, bit<8>>(n_servers) n_servers_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };
    /* Algorithm 1's stamp: the next version, unless none is left */
    RegisterAction<bit<32>, bit<32>, bit<32>>(ver_next) ver_next_stamp = {
        void apply(inout bit<32> v, out bit<32> rv) {
            rv = v;
            if (v != VER_TOP32) { v = v + 1; }
        }
    };
    /* a trusted VER (multi-rack) or a PUT_FWD: ver_next = max(ver_next, VER + 1) */
    RegisterAction<bit<32>, bit<32>, bit<32>>(ver_next) ver_next_max = {
        void apply(inout bit<32> v) {
            if (v <= ver32) { v = ver32 + 1; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<8>>(ver_completed) ver_completed_cmp = {
        void apply(inout bit<32> v, out bit<8> rv) {
            if (ver32 > v) { v = ver32; rv = DIR_NEWER; }
            else if (ver32 == v) { rv = DIR_SAME; }
            else { rv = DIR_STALE; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(ver_completed) ver_completed_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(ver_last_write) ver_last_write_set = {
        void apply(inout bit<32> v) { v = ver32; }
    };
    /* VWRITE: forward iff no write is outstanding (last write == completed) */
    RegisterAction<bit<32>, bit<32>, bit<1>>(ver_last_write) ver_last_write_claim = {
        void apply(inout bit<32> v, out bit<1> rv) {
            rv = 0;
            if (v == vc) { v = ver32; rv = 1; }
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(rset_size) rset_size_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(rset_size) rset_size_one = {
        void apply(inout bit<8> v) { v = 1; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(rset_size) rset_size_inc = {
        void apply(inout bit<8> v, out bit<8> rv) {
            rv = v;
            if (v < PEG_N) { v = v + 1; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(rset_bitmap) rset_bitmap_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(rset_bitmap) rset_bitmap_reset = {
        void apply(inout bit<32> v) { v = sbit; }
    };
    /* add server_id's bit; 1 if it was not there */
    RegisterAction<bit<32>, bit<32>, bit<1>>(rset_bitmap) rset_bitmap_add = {
        void apply(inout bit<32> v, out bit<1> rv) {
            rv = 0;
            if ((v & sbit) == 0) { v = v | sbit; rv = 1; }
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(rset_list) rset_list_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(rset_list) rset_list_set = {
        void apply(inout bit<8> v) { v = hdr.pegasus.server_id; }
    };
    /* the per-key round-robin cursor over rset_list (rr_in_rset) */
    RegisterAction<bit<8>, bit<32>, bit<8>>(rr_key) rr_key_next = {
        void apply(inout bit<8> v, out bit<8> rv) {
            if (v >= size) { rv = 0; v = 1; }
            else { rv = v; v = v + 1; }
        }
    };
    /* the rotating first write target over all servers (select_write_start) */
    RegisterAction<bit<8>, bit<32>, bit<8>>(rr_all) rr_all_next = {
        void apply(inout bit<8> v, out bit<8> rv) {
            if (v >= nsrv) { rv = 0; v = 1; }
            else { rv = v; v = v + 1; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(rate) rate_inc = {
        void apply(inout bit<32> v) { if (v < PEG_RATE_MAX) { v = v + 1; } }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(rd_cnt) rd_cnt_inc = {
        void apply(inout bit<32> v) { if (v < PEG_RATE_MAX) { v = v + 1; } }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(wr_cnt) wr_cnt_inc = {
        void apply(inout bit<32> v) { if (v < PEG_RATE_MAX) { v = v + 1; } }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(fanout) fanout_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };
    RegisterAction<bit<1>, bit<32>, bit<1>>(draining) draining_read = {
        void apply(inout bit<1> v, out bit<1> rv) { rv = v; }
    };
    RegisterAction<bit<1>, bit<32>, bit<1>>(paused) paused_read = {
        void apply(inout bit<1> v, out bit<1> rv) { rv = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(wrr_sched) wrr_sched_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };
    /* wrr_next's cursor: the slot now, the next one stored (wraps at wrr_len) */
    RegisterAction<bit<8>, bit<32>, bit<8>>(wrr_cursor) wrr_cursor_next = {
        void apply(inout bit<8> v, out bit<8> rv) {
            rv = v;
            if (v >= last) { v = 0; } else { v = v + 1; }
        }
    };
    RegisterAction<bit<16>, bit<32>, bit<16>>(wrr_len) wrr_len_read = {
        void apply(inout bit<16> v, out bit<16> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(srv_load) srv_load_set = {
        void apply(inout bit<32> v) { v = (bit<32>)hdr.pegasus.load; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(srv_inflight) srv_inflight_inc = {
        void apply(inout bit<32> v) { if (v < PEG_RATE_MAX) { v = v + 1; } }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(srv_inflight) srv_inflight_dec = {
        void apply(inout bit<32> v) { if (v > 0) { v = v - 1; } }
    };
    /* 1 every PEG_SAMPLE-th miss */
    RegisterAction<bit<32>, bit<32>, bit<1>>(sample_cnt) sample_tick = {
        void apply(inout bit<32> v, out bit<1> rv) {
            if (v >= PEG_SAMPLE - 1) { v = 0; rv = 1; } else { v = v + 1; rv = 0; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(stats) stats_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };

/* Algorithm 1 stamp (pegasus.c stamp), on 32-bit versions */
#define STAMP()                                                              \
    if (hdr.pegasus.ver != 0 && meta.origin == ORIGIN_TRUSTED) {             \
        if (hdr.pegasus.ver[63:32] != 0 || hdr.pegasus.ver[31:0] == VER_TOP32) { \
            stamp_refused = true;                                            \
        } else {                                                             \
            ver_next_max.execute(0);                                         \
        }                                                                    \
    } else {                                                                 \
        bit<32> vn_ = ver_next_stamp.execute(0);                             \
        if (vn_ == VER_TOP32) {                                              \
            stamp_refused = true;                                            \
        } else {                                                             \
            hdr.pegasus.ver = (bit<64>)vn_;                                  \
            ver32 = vn_;                                                     \
            meta.hdr_changed = 1;                                            \
        }                                                                    \
    }

    apply {
        classify.apply(hdr, meta, ig_intr_md, ig_prsr_md);
        if (meta.is_proto == 1 && meta.fwd != FWD_DROP) {
            bool ok;
            wire_check.apply(hdr, PEGASUS_MAGIC, ok);
            if (!ok) {
                meta.fwd = FWD_DROP;
                meta.is_proto = 0;
            }
        } else {
            meta.is_proto = 0;
        }

        bool want_route = false;     /* pegasus.c forward(): counts ST_NO_ROUTE */
        bool is_req = false;         /* pegasus.c forward_request(): srv_inflight++ */
        if (meta.is_proto == 1) {
            bit<8> n8 = n_servers_read.execute(0);
            nsrv = n8 == 0 ? 8w1 : n8;
            rkeys.apply();
            base = rk_idx << 5;                          /* * PEG_N (32) */
            ver32 = hdr.pegasus.ver[31:0];
            sid_bit.apply(hdr.pegasus.server_id, sbit);

            bit<8> op = hdr.pegasus.op;
            want_route = true;
            /* the trust boundary (pegasus.c peg_process, docs/security.md) */
            bool req_op = op == PEGASUS_OP_READ || op == PEGASUS_OP_WRITE ||
                          op == PEGASUS_OP_DEL;
            if (meta.origin == ORIGIN_CLIENT && meta.in_port < (bit<16>)nsrv) {
                meta.origin = ORIGIN_SERVER;     /* server s is behind rack port s */
            }
            if (meta.origin == ORIGIN_CLIENT) {
                if (!req_op) {
                    st_forged = ST_HOST_SERVER_OP;
                    meta.fwd = FWD_DROP;
                    want_route = false;
                    op = 0xFF;                   /* no op: nothing below applies */
                } else {
                    if (hdr.pegasus.ver != 0) {
                        hdr.pegasus.ver = 0;
                        ver32 = 0;
                        st_forged = ST_FORGED_VER;
                        meta.hdr_changed = 1;
                    }
                    if ((hdr.pegasus.flags & (PEGASUS_FLAG_BYPASS | PEGASUS_FLAG_MULTI)) != 0 ||
                        hdr.pegasus.bitmap != 0) {
                        hdr.pegasus.flags = hdr.pegasus.flags &
                                            ~(PEGASUS_FLAG_BYPASS | PEGASUS_FLAG_MULTI);
                        hdr.pegasus.bitmap = 0;
                        st_forged = ST_FORGED_FLAGS;
                        meta.hdr_changed = 1;
                    }
                }
            } else if (meta.origin == ORIGIN_SERVER && req_op && hdr.pegasus.ver != 0 &&
                       (hdr.pegasus.flags & PEGASUS_FLAG_BYPASS) == 0) {
                hdr.pegasus.ver = 0;
                ver32 = 0;
                st_forged = ST_FORGED_VER;
                meta.hdr_changed = 1;
            }
            bool bypass = (hdr.pegasus.flags & PEGASUS_FLAG_BYPASS) != 0;

            if (op == PEGASUS_OP_READ || op == PEGASUS_OP_WRITE || op == PEGASUS_OP_DEL) {
                is_req = true;
                bool is_write = op != PEGASUS_OP_READ;
                if (bypass) {
                    st = ST_BYPASS;
                } else if (rk_hit == 0) {
                    /* unreplicated: stamp, forward as addressed, sample */
                    if (is_write) { STAMP() }
                    st = ST_MISS;
#if PEG_SAMPLE != 0
                    if (sample_tick.execute(0) == 1) {
                        meta.to_cpu = 1;
                    }
#endif
                } else {
                    size = rset_size_read.execute(rk_idx);
                    bit<1> pz = 0;
                    if (is_write) {
                        pz = paused_read.execute(rk_idx);
                    }
                    if (size == 0) {
                        /* entry without registers (controller bug): unreplicated */
                        if (is_write) { STAMP() }
                    } else if (is_write && pz == 1) {
                        st = ST_PAUSED_DROP;
                        meta.fwd = FWD_DROP;
                        want_route = false;
                        is_req = false;
                    } else if (!is_write) {
                        /* ---- a READ: one member of rset[idx] (below) ---- */
                        rate_inc.execute(rk_idx);
                        rd_cnt_inc.execute(rk_idx);
                        do_select_read = true;
                        st = ST_READS;
                    } else {
                        /* ---- a WRITE/DEL to a replicated key ---- */
                        STAMP()
                        if (!stamp_refused) {
                            rate_inc.execute(rk_idx);
                            wr_cnt_inc.execute(rk_idx);
                            ver_last_write_set.execute(rk_idx);
                            st = ST_WRITES;
                            hdr.pegasus.flags = hdr.pegasus.flags & ~PEGASUS_FLAG_MULTI;
                            hdr.pegasus.bitmap = 0;
                            meta.hdr_changed = 1;
                            if (draining_read.execute(rk_idx) == 0) {
                                /* r = fanout[idx] in [1, n] */
                                fo_r = fanout_read.execute(rk_idx);
                                if (fo_r < 1) { fo_r = 1; }
                                if (fo_r > nsrv) { fo_r = nsrv; }
#if PEG_SELECTION == SEL_WRR
                                bit<16> len = wrr_len_read.execute(0);
                                last = len == 0 ? 8w0 : (len > 256 ? 8w255 : (bit<8>)(len - 1));
                                bit<8> c = wrr_cursor_next.execute(0);
                                if (c > last) { c = 0; }
                                wr_start = wrr_sched_read.execute((bit<32>)c);
                                if (wr_start >= nsrv) { wr_start = wr_start - nsrv; }
#else
                                wr_start = rr_all_next.execute(0);
#endif
                                /* the targets: r consecutive ids from wr_start, mod n */
                                bit<32> lo;
                                bit<32> hi;
                                bit<32> wrap = 0;
                                mask_start.apply(wr_start, lo);
                                bit<8> end = wr_start + fo_r;
                                if (end <= nsrv) {
                                    mask_end.apply(end, hi);
                                } else {
                                    mask_end.apply(nsrv, hi);
                                    mask_wrap.apply(end - nsrv, wrap);
                                }
                                bit<32> targets = (hi & ~lo) | wrap;
#if PEG_WRITE_MCAST
                                if (fo_r > 1) {
                                    hdr.pegasus.bitmap = targets;
                                    ig_tm_md.mcast_grp_a = ((bit<16>)wr_start << 5) +
                                                           (bit<16>)fo_r - 1;
                                    meta.fwd = FWD_MCAST;
                                    want_route = false;
                                    is_req = false;
                                }
#else
                                /* write_mcast=0: the RC_REQ path for every write */
                                bit<32> first;
                                start_bit.apply(wr_start, first);
                                bit<32> others = targets & ~first;
                                if (others != 0) {
                                    hdr.pegasus.flags = hdr.pegasus.flags | PEGASUS_FLAG_MULTI;
                                    hdr.pegasus.bitmap = others;
                                }
#endif
                                meta.dst_node = (bit<16>)wr_start;
                            }
                            /* draining: the home server only, as addressed */
                        }
                    }
                }
                if (stamp_refused) {
                    st = ST_VER_EXHAUSTED;
                    meta.fwd = FWD_DROP;
                    want_route = false;
                    is_req = false;
                }
            } else if (op == PEGASUS_OP_READ_REPLY || op == PEGASUS_OP_WRITE_REPLY ||
                       op == PEGASUS_OP_RC_ACK) {
                if (op != PEGASUS_OP_RC_ACK && hdr.pegasus.server_id < PEG_N) {
                    infl = INFL_DEC;             /* a request answered */
                    infl_idx = (bit<32>)hdr.pegasus.server_id;
                }
                if (bypass) {
                    st = ST_BYPASS;
                } else {
                    if (hdr.pegasus.server_id < PEG_N) {
                        srv_load_set.execute((bit<32>)hdr.pegasus.server_id);
                    }
                    if (rk_hit == 1) {
                        do_dir = true;
                    }
                }
                if (op == PEGASUS_OP_RC_ACK) {
                    meta.fwd = FWD_DROP;         /* consumed by the switch */
                    want_route = false;
                } else if (meta.dst_node == NODE_NONE || meta.dst_node >= PEG_MAX_NODES) {
                    /* the reply to a controller-issued VWRITE */
                    st = ST_TO_CPU;
                    meta.to_cpu = 1;
                    meta.cpu_reason = PKTIN_TO_CPU;
                    meta.fwd = FWD_DROP;
                    want_route = false;
                }
            } else if (op == PEGASUS_OP_VWRITE) {
                /* ---- §9.1: forward iff no write to the key is outstanding ---- */
                meta.fwd = FWD_DROP;
                want_route = false;
                if (rk_hit == 1) {
                    size = rset_size_read.execute(rk_idx);
                }
                if (meta.origin != ORIGIN_TRUSTED) {
                    st = ST_HOST_SERVER_OP;      /* the controller's alone */
                } else if (rk_hit == 0 || size == 0) {
                    st = ST_VWRITE_DROP;
                } else {
                    vc = ver_completed_read.execute(rk_idx);
                    bit<32> vn = ver_next_stamp.execute(0);   /* taken even if refused */
                    if (vn == VER_TOP32) {
                        st = ST_VER_EXHAUSTED;
                    } else {
                        ver32 = vn;
                        if (ver_last_write_claim.execute(rk_idx) == 0) {
                            st = ST_VWRITE_DROP;
                        } else {
                            hdr.pegasus.ver = (bit<64>)vn;
                            meta.hdr_changed = 1;
                            do_select_read = true;
                            st = ST_VWRITE_FWD;
                            meta.fwd = FWD_NODE;
                            want_route = true;
                            is_req = true;
                        }
                    }
                }
            } else if (op == PEGASUS_OP_PUT_FWD) {
                /* multi-rack (§9.6): a chain-forwarded write leaving a local
                 * server counts as its WRITE-REPLY; keep VER everywhere */
                if (!bypass && (hdr.pegasus.ver[63:32] != 0 || ver32 == VER_TOP32)) {
                    st = ST_VER_EXHAUSTED;
                    meta.fwd = FWD_DROP;
                    want_route = false;
                } else if (!bypass) {
                    if (rk_hit == 1 && meta.origin == ORIGIN_SERVER) {
                        do_dir = true;
                    }
                    ver_next_max.execute(0);
                }
            }
            /* RC_REQ and the rest: L2/L3 only */
        }

        /* ---- Algorithm 2 (pegasus.c directory_update), once ---- */
        if (do_dir) {
            if (hdr.pegasus.server_id >= nsrv) {
                st = ST_BAD_SERVER;
            } else {
                bit<8> cmp = DIR_STALE;
                if (hdr.pegasus.ver[63:32] == 0) {
                    cmp = ver_completed_cmp.execute(rk_idx);
                }
                if (cmp == DIR_NEWER) {
                    rset_size_one.execute(rk_idx);
                    rset_bitmap_reset.execute(rk_idx);
                    rset_list_set.execute(base);
                    st = ST_RESET;
                } else if (cmp == DIR_SAME) {
                    if (rset_bitmap_add.execute(rk_idx) == 1) {
                        bit<8> old = rset_size_inc.execute(rk_idx);
                        if (old < PEG_N) {
                            rset_list_set.execute(base + (bit<32>)old);
                            st = ST_EXTEND;
                        }
                    }
                } else {
                    st = ST_STALE;
                }
            }
        }

        /* ---- a READ's (or VWRITE's) destination: one rset member, once ---- */
        if (do_select_read) {
#if PEG_SELECTION == SEL_WRR
            bit<16> len = wrr_len_read.execute(0);
            last = len == 0 ? 8w0 : (len > 256 ? 8w255 : (bit<8>)(len - 1));
            bit<8> c = wrr_cursor_next.execute(0);
            if (c > last) { c = 0; }
            bit<8> srv = wrr_sched_read.execute((bit<32>)c);
            if (srv >= nsrv) { srv = srv - nsrv; }
            bm = rset_bitmap_read.execute(rk_idx);
            bit<32> b;
            member_bit.apply(srv, b);
            if ((bm & b) != 0) {
                sel = srv;
            } else {
                bit<8> k = rr_key_next.execute(rk_idx);
                sel = rset_list_read.execute(base + (bit<32>)k);
            }
#else
            bit<8> k = rr_key_next.execute(rk_idx);
            sel = rset_list_read.execute(base + (bit<32>)k);
#endif
            meta.dst_node = (bit<16>)sel;
        }

        forward.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);

        if (want_route && meta.node_hit == 0) {
            st = ST_NO_ROUTE;
        }
        if (is_req && meta.fwd == FWD_NODE && meta.node_hit == 1 && meta.dst_node < PEG_N) {
            infl = INFL_INC;
            infl_idx = (bit<32>)meta.dst_node;
        }
        /* srv_inflight and stats: one access each per packet */
        if (infl == INFL_INC) {
            srv_inflight_inc.execute(infl_idx);
        } else if (infl == INFL_DEC) {
            srv_inflight_dec.execute(infl_idx);
        }
        if (st_forged != ST_NONE) {
            stats_inc.execute((bit<32>)st_forged);
        } else if (st != ST_NONE) {
            stats_inc.execute((bit<32>)st);
        }
    }
}

/* a copy of a multicast write: addressed to the node it goes to (the replica
 * id the driver gives each copy is its node), as netkv-switch rewrites each
 * copy; the ingress addressed the packet to the first target */
control PegasusEgress(inout headers_t hdr, inout metadata_t meta,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                      inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    NetkvTnaEgress() egress_common;
    apply {
        if (hdr.bridge.fwd == FWD_MCAST && hdr.pegasus.isValid() && hdr.ipv4.isValid()) {
            bit<32> node = (bit<32>)eg_intr_md.egress_rid;
            hdr.ipv4.dst_addr = NODE_NET + node + 1;
            hdr.ethernet.dst_addr = NODE_MAC_BASE + (bit<48>)node + 1;
            if (hdr.udp.isValid()) {
                hdr.udp.checksum = 0;
            }
        }
        egress_common.apply(hdr, meta, eg_intr_md, eg_dprsr_md);
    }
}

Pipeline(NetkvTnaIngressParser(), PegasusIngress(), NetkvTnaIngressDeparser(),
         NetkvTnaEgressParser(), PegasusEgress(), NetkvTnaEgressDeparser()) pipe;

Switch(pipe) main;
