/*
 * pegasus.p4 - the Pegasus switch (OSDI'20) for BMv2 (v1model): the in-network
 * coherence directory. The P4 twin of hostapps/src/pipeline/pegasus.c; the
 * register, table and statistics names and semantics are those of the C
 * pipeline (docs/pegasus.md), so one controller drives both.
 *
 * Packets: UDP 5047, magic 0x5047 (docs/wire.md). Undecodable ones are
 * dropped (PegasusWireCheck), as netkv-switch drops them.
 *
 * Per packet (pegasus.c peg_process):
 *   READ/WRITE/DEL, not BYPASS   Algorithm 1: stamp every write from ver_next;
 *                                rkeys hit -> pick the destination (reads: one
 *                                rset member; writes: fan-out r consecutive
 *                                targets, r > 1 by multicast group
 *                                start*32 + r-1, each copy readdressed in
 *                                the egress; AMO: the detector, the others
 *                                in `bitmap` with flag MULTI);
 *                                miss -> forward as addressed, sample to CPU
 *   READ_REPLY/WRITE_REPLY/RC_ACK, not BYPASS
 *                                srv_load[server_id] = load; Algorithm 2 on
 *                                the directory. RC_ACK is then dropped; a
 *                                reply addressed outside the rack (to the
 *                                controller) is cloned to the CPU and dropped
 *   VWRITE                       stamped and sent to an rset member iff no
 *                                write to the key is outstanding (§9.1)
 *   PUT_FWD, not BYPASS          Algorithm 2 if it leaves a local server;
 *                                ver_next = max(ver_next, ver + 1)
 *   BYPASS, RC_REQ               forwarded as addressed
 *
 * Named state (identical names in pegasus.c):
 *   table    rkeys[keyhash] -> rkeys_hit(idx)       node_fwd[node] -> set_port(port)
 *   registers ver_next ver_completed ver_last_write rset_size rset_bitmap
 *             rset_list rr_key rr_all n_servers rate rd_cnt wr_cnt fanout
 *             draining paused wrr_sched wrr_cursor wrr_len srv_load
 *             srv_inflight sample_cnt stats
 * The C pipeline's params (pegasus.c peg_init) are compile-time here:
 *   -DPEG_MAX_RKEYS=64 -DPEG_SELECTION=2 (0 random, 1 rr, 2 wrr, 3 least_loaded)
 *   -DPEG_AMO=0 -DPEG_SAMPLE=128 -DPEG_FANOUT_AUTO=0 -DPEG_FANOUT_DIV16=16
 *   -DPEG_WRITE_MCAST=1 (param write_mcast)
 * and the registers the C init sets (ver_next, n_servers, wrr_sched,
 * wrr_len, fanout) are written by the driver after loading the program
 * (netkv/drivers/bmv2.py initial_register_writes). BMv2 registers start at 0.
 *
 * Compile: p4c-bm2-ss --arch v1model --p4runtime-files pegasus.p4info.txtpb \
 *              -o pegasus.json pegasus.p4
 */
#include <core.p4>
#include <v1model.p4>

#define NETKV_PARSE_PEGASUS
#include "../common/headers.p4"
#include "../common/types.p4"
#include "../common/parser.p4"
#include "../common/wirecheck.p4"
#include "../common/forward.p4"

/* ---- compile-time parameters (pegasus.c params) ------------------------- */
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
#ifndef PEG_FANOUT_DIV16            /* fanout_div in sixteenths (PEG_FANOUT_DIV_UNIT) */
#define PEG_FANOUT_DIV16 16
#endif
#ifndef PEG_WRITE_MCAST
#define PEG_WRITE_MCAST 1
#endif

#define PEG_MAX_NODES 4096
const bit<32> PEG_RATE_MAX = 0xFFFFFFFF;

/* cells of register `stats` (pegasus.c enum peg_stat) */
const bit<32> ST_READS = 0;
const bit<32> ST_WRITES = 1;
const bit<32> ST_MISS = 2;
const bit<32> ST_SAMPLED = 3;
const bit<32> ST_BYPASS = 4;
const bit<32> ST_RESET = 5;
const bit<32> ST_EXTEND = 6;
const bit<32> ST_STALE = 7;
const bit<32> ST_VWRITE_FWD = 8;
const bit<32> ST_VWRITE_DROP = 9;
const bit<32> ST_PAUSED_DROP = 10;
const bit<32> ST_NO_ROUTE = 11;
const bit<32> ST_TO_CPU = 12;
const bit<32> ST_BAD_SERVER = 13;
const bit<32> ST_FORGED_VER = 14;       /* the trust boundary (docs/security.md) */
const bit<32> ST_FORGED_FLAGS = 15;
const bit<32> ST_HOST_SERVER_OP = 16;
const bit<32> ST_VER_EXHAUSTED = 17;
#define ST_COUNT 18
const bit<64> VER_TOP = 0xFFFFFFFFFFFFFFFF;   /* versions never wrap */

/* x mod m for a runtime m >= 1: the identity hash reduced by its `max`
 * (BMv2 computes base + hash % max) - P4 has no runtime `%`. */
#define MOD32(res, x, m) hash(res, HashAlgorithm.identity, 32w0, { x }, m)

control PegasusIngress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t sm) {
    /* ---- registers (pegasus.c add_reg: same names, widths, sizes) ---- */
    @name(".ver_next")       register<bit<64>>(1) ver_next;
    @name(".ver_completed")  register<bit<64>>(PEG_MAX_RKEYS) ver_completed;
    @name(".ver_last_write") register<bit<64>>(PEG_MAX_RKEYS) ver_last_write;
    @name(".rset_size")      register<bit<8>>(PEG_MAX_RKEYS) rset_size;
    @name(".rset_bitmap")    register<bit<32>>(PEG_MAX_RKEYS) rset_bitmap;
    @name(".rset_list")      register<bit<8>>(PEG_MAX_RKEYS * PEG_N) rset_list;
    @name(".rr_key")         register<bit<8>>(PEG_MAX_RKEYS) rr_key;
    @name(".rr_all")         register<bit<8>>(1) rr_all;
    @name(".n_servers")      register<bit<8>>(1) n_servers;
    @name(".rate")           register<bit<32>>(PEG_MAX_RKEYS) rate;
    @name(".rd_cnt")         register<bit<32>>(PEG_MAX_RKEYS) rd_cnt;
    @name(".wr_cnt")         register<bit<32>>(PEG_MAX_RKEYS) wr_cnt;
    @name(".fanout")         register<bit<8>>(PEG_MAX_RKEYS) fanout;
    @name(".draining")       register<bit<1>>(PEG_MAX_RKEYS) draining;
    @name(".paused")         register<bit<1>>(PEG_MAX_RKEYS) paused;
    @name(".wrr_sched")      register<bit<8>>(PEG_WRR_SLOTS) wrr_sched;
    @name(".wrr_cursor")     register<bit<8>>(1) wrr_cursor;
    @name(".wrr_len")        register<bit<9>>(1) wrr_len;
    @name(".srv_load")       register<bit<32>>(PEG_N) srv_load;
    @name(".srv_inflight")   register<bit<32>>(PEG_N) srv_inflight;
    @name(".sample_cnt")     register<bit<32>>(1) sample_cnt;
    @name(".stats")          register<bit<64>>(ST_COUNT) stats;

    NetkvClassify() classify;
    PegasusWireCheck() wire_check;
    NetkvForward() forward;

    /* per-packet scratch */
    bit<1>  rk_hit = 0;
    bit<32> rk_idx = 0;
    bit<32> nsrv = 1;          /* n_servers, never 0 (BMv2 would divide by 0) */
    bit<32> sel = 0;           /* a selected server */
    bit<32> fo_r = 1;          /* write fan-out r */
    bit<32> wr_start = 0;      /* the first write target */
    bit<32> mc_targets = 0;    /* servers of a multicast write (0: none) */
    bool stamp_refused = false; /* STAMP(): no version left (ST_VER_EXHAUSTED) */

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

    action stat(bit<32> i) {
        bit<64> v;
        stats.read(v, i);
        stats.write(i, v + 1);
    }

    /* The helpers below are macros that expand into the apply block, not
     * actions: p4c 1.2.4 rejects extern calls (register read/write, hash,
     * random) under an `if` inside an action on BMv2 ("Conditional execution
     * in actions unsupported on this target"); in a control's apply block
     * they are ordinary conditionals. Each expands to one block, so its
     * locals are scoped. Only C comments inside them (line splicing). */

/* 32-bit saturating counter += 1 (rate, rd_cnt, wr_cnt) */
#define SAT_INC(REG, I)                                                      \
    {                                                                        \
        bit<32> v_;                                                          \
        REG.read(v_, I);                                                     \
        if (v_ < PEG_RATE_MAX) { REG.write(I, v_ + 1); }                     \
    }

/* Algorithm 1 stamp (pegasus.c stamp): a fresh version, unless VER is
 * already set and the packet came from a trusted port (multi-rack: keep it,
 * ver_next = max(ver_next, VER + 1)). Never wraps: stamp_refused at the top. */
#define STAMP()                                                              \
    {                                                                        \
        bit<64> vn_;                                                         \
        ver_next.read(vn_, 0);                                               \
        if (hdr.pegasus.ver != 0 && meta.origin == ORIGIN_TRUSTED) {         \
            if (hdr.pegasus.ver == VER_TOP) {                                \
                stamp_refused = true;                                        \
            } else if (hdr.pegasus.ver >= vn_) {                             \
                ver_next.write(0, hdr.pegasus.ver + 1);                      \
            }                                                                \
        } else if (vn_ == VER_TOP) {                                         \
            stamp_refused = true;                                            \
        } else {                                                             \
            hdr.pegasus.ver = vn_;                                           \
            ver_next.write(0, vn_ + 1);                                      \
            meta.hdr_changed = 1;                                            \
        }                                                                    \
        if (stamp_refused) { stat(ST_VER_EXHAUSTED); }                       \
    }

/* rr_in_rset: the per-key round-robin cursor over rset_list -> sel */
#define RR_IN_RSET(IDX, SIZE)                                                \
    {                                                                        \
        bit<8> c_;                                                           \
        rr_key.read(c_, IDX);                                                \
        if (c_ >= SIZE) { c_ = 0; }                                          \
        rr_key.write(IDX, c_ + 1);                                           \
        bit<8> s_;                                                           \
        rset_list.read(s_, IDX * PEG_N + (bit<32>)c_);                       \
        sel = (bit<32>)s_;                                                   \
    }

/* wrr_next: walk the 256-slot schedule with the global cursor -> sel
 * (the raw schedule entry; callers reduce it mod n) */
#define WRR_NEXT()                                                           \
    {                                                                        \
        bit<8> c_;                                                           \
        bit<9> len_;                                                         \
        wrr_cursor.read(c_, 0);                                              \
        wrr_len.read(len_, 0);                                               \
        if ((bit<9>)c_ >= len_) { c_ = 0; }                                  \
        if ((bit<9>)c_ + 1 >= len_) {                                        \
            wrr_cursor.write(0, 0);                                          \
        } else {                                                             \
            wrr_cursor.write(0, c_ + 1);                                     \
        }                                                                    \
        bit<8> s_;                                                           \
        wrr_sched.read(s_, (bit<32>)c_);                                     \
        sel = (bit<32>)s_;                                                   \
    }

/* Algorithm 2 (pegasus.c directory_update), for an rkeys hit (rk_idx) */
#define DIRECTORY_UPDATE()                                                   \
    {                                                                        \
        bit<32> sid_ = (bit<32>)hdr.pegasus.server_id;                       \
        if (sid_ >= nsrv) {                                                  \
            stat(ST_BAD_SERVER);                                             \
        } else {                                                             \
            bit<32> b_ = (bit<32>)1 << (bit<8>)sid_;                         \
            bit<32> base_ = rk_idx * PEG_N;                                  \
            bit<64> vc_;                                                     \
            ver_completed.read(vc_, rk_idx);                                 \
            if (hdr.pegasus.ver > vc_) {                                     \
                ver_completed.write(rk_idx, hdr.pegasus.ver);                \
                rset_size.write(rk_idx, 1);                                  \
                rset_bitmap.write(rk_idx, b_);                               \
                rset_list.write(base_, (bit<8>)sid_);                        \
                stat(ST_RESET);                                              \
            } else if (hdr.pegasus.ver == vc_) {                             \
                bit<32> bm_;                                                 \
                rset_bitmap.read(bm_, rk_idx);                               \
                if ((bm_ & b_) == 0) {                                       \
                    bit<8> size_;                                            \
                    rset_size.read(size_, rk_idx);                           \
                    if (size_ < PEG_N) {                                     \
                        rset_bitmap.write(rk_idx, bm_ | b_);                 \
                        rset_list.write(base_ + (bit<32>)size_, (bit<8>)sid_); \
                        rset_size.write(rk_idx, size_ + 1);                  \
                        stat(ST_EXTEND);                                     \
                    }                                                        \
                }                                                            \
            } else {                                                         \
                stat(ST_STALE);                                              \
            }                                                                \
        }                                                                    \
    }

    /* ---- selection (pegasus.c select_read / select_write / write_fanout) ---- */

#if PEG_SELECTION == SEL_LEAST_LOADED
/* one candidate of the least-loaded (fewest in flight) scan over rset[idx] */
#define LL_READ_STEP(k)                                                      \
        if (k < size32_) {                                                   \
            bit<32> pos_ = start_ + k;                                       \
            if (pos_ >= size32_) { pos_ = pos_ - size32_; }                  \
            bit<8> cand_;                                                    \
            rset_list.read(cand_, base_ + pos_);                             \
            bit<32> cl_;                                                     \
            srv_inflight.read(cl_, (bit<32>)cand_);                          \
            if (cl_ < bl_) { best_ = (bit<32>)cand_; bl_ = cl_; }            \
        }
/* one candidate of the least-loaded scan over all servers */
#define LL_WRITE_STEP(j)                                                     \
        if (j < nsrv) {                                                      \
            bit<32> c_ = off_ + j;                                           \
            if (c_ >= nsrv) { c_ = c_ - nsrv; }                              \
            bit<32> cl_;                                                     \
            srv_inflight.read(cl_, c_);                                      \
            if (cl_ < bl_) { best_ = c_; bl_ = cl_; }                        \
        }
#define LL_STEPS_1_31(STEP)                                                  \
        STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)              \
        STEP(8) STEP(9) STEP(10) STEP(11) STEP(12) STEP(13) STEP(14)         \
        STEP(15) STEP(16) STEP(17) STEP(18) STEP(19) STEP(20)                \
        STEP(21) STEP(22) STEP(23) STEP(24) STEP(25) STEP(26)                \
        STEP(27) STEP(28) STEP(29) STEP(30) STEP(31)
#endif

/* A READ's (and a VWRITE's) destination: one member of rset[IDX] -> sel */
#if PEG_SELECTION == SEL_RANDOM
#define SELECT_READ(IDX, SIZE)                                               \
    {                                                                        \
        bit<32> r_;                                                          \
        random(r_, 32w0, 32w0xFFFFFFFF);                                     \
        bit<32> off_;                                                        \
        MOD32(off_, r_, (bit<32>)SIZE);                                      \
        bit<8> s_;                                                           \
        rset_list.read(s_, IDX * PEG_N + off_);                              \
        sel = (bit<32>)s_;                                                   \
    }
#elif PEG_SELECTION == SEL_WRR
#define SELECT_READ(IDX, SIZE)                                               \
    {                                                                        \
        WRR_NEXT()                                                           \
        bit<32> srv_ = sel;                                                  \
        if (srv_ >= nsrv) { MOD32(srv_, srv_, nsrv); }                       \
        bit<32> bm_;                                                         \
        rset_bitmap.read(bm_, IDX);                                          \
        if ((bm_ & ((bit<32>)1 << (bit<8>)srv_)) != 0) {                     \
            sel = srv_;                                                      \
        } else {                                                             \
            RR_IN_RSET(IDX, SIZE)                                            \
        }                                                                    \
    }
#elif PEG_SELECTION == SEL_LEAST_LOADED
/* scan from the per-key RR offset so ties rotate */
#define SELECT_READ(IDX, SIZE)                                               \
    {                                                                        \
        bit<32> base_ = IDX * PEG_N;                                         \
        bit<32> size32_ = (bit<32>)SIZE;                                     \
        bit<8> c8_;                                                          \
        rr_key.read(c8_, IDX);                                               \
        bit<32> start_ = (bit<32>)c8_;                                       \
        if (start_ >= size32_) { start_ = 0; }                               \
        if (start_ + 1 >= size32_) {                                         \
            rr_key.write(IDX, 0);                                            \
        } else {                                                             \
            rr_key.write(IDX, (bit<8>)(start_ + 1));                         \
        }                                                                    \
        bit<8> b8_;                                                          \
        rset_list.read(b8_, base_ + start_);                                 \
        bit<32> best_ = (bit<32>)b8_;                                        \
        bit<32> bl_;                                                         \
        srv_inflight.read(bl_, best_);                                       \
        LL_STEPS_1_31(LL_READ_STEP)                                          \
        sel = best_;                                                         \
    }
#else
#define SELECT_READ(IDX, SIZE) RR_IN_RSET(IDX, SIZE)
#endif

/* r = write_fanout(IDX) -> fo_r */
#if PEG_FANOUT_AUTO
/* r = round(16 rd / ((wr + 1) * div16)) = #{k >= 1 : 2k*den <= 32rd + den}
 * (nk_peg_fanout_round, spec/constants.toml) */
#define FO_STEP(k) if (2 * k * den_ <= num_) { fo_r = k; }
#define WRITE_FANOUT(IDX)                                                    \
    {                                                                        \
        bit<32> rd_;                                                         \
        bit<32> wr_;                                                         \
        rd_cnt.read(rd_, IDX);                                               \
        wr_cnt.read(wr_, IDX);                                               \
        bit<64> den_ = ((bit<64>)wr_ + 1) * PEG_FANOUT_DIV16;                \
        bit<64> num_ = 2 * PEG_FANOUT_DIV_UNIT * (bit<64>)rd_ + den_;        \
        fo_r = 0;                                                            \
        FO_STEP(1) FO_STEP(2) FO_STEP(3) FO_STEP(4) FO_STEP(5) FO_STEP(6)    \
        FO_STEP(7) FO_STEP(8) FO_STEP(9) FO_STEP(10) FO_STEP(11) FO_STEP(12) \
        FO_STEP(13) FO_STEP(14) FO_STEP(15) FO_STEP(16) FO_STEP(17)          \
        FO_STEP(18) FO_STEP(19) FO_STEP(20) FO_STEP(21) FO_STEP(22)          \
        FO_STEP(23) FO_STEP(24) FO_STEP(25) FO_STEP(26) FO_STEP(27)          \
        FO_STEP(28) FO_STEP(29) FO_STEP(30) FO_STEP(31) FO_STEP(32)          \
        if (fo_r < 1) { fo_r = 1; }                                          \
        if (fo_r > nsrv) { fo_r = nsrv; }                                    \
    }
#else
#define WRITE_FANOUT(IDX)                                                    \
    {                                                                        \
        bit<8> f8_;                                                          \
        fanout.read(f8_, IDX);                                               \
        fo_r = (bit<32>)f8_;                                                 \
        if (fo_r < 1) { fo_r = 1; }                                          \
        if (fo_r > nsrv) { fo_r = nsrv; }                                    \
    }
#endif

/* the first write target -> wr_start */
#if PEG_SELECTION == SEL_RANDOM
#define WRITE_START()                                                        \
    {                                                                        \
        bit<32> rnd_;                                                        \
        random(rnd_, 32w0, 32w0xFFFFFFFF);                                   \
        MOD32(wr_start, rnd_, nsrv);                                         \
    }
#elif PEG_SELECTION == SEL_WRR
#define WRITE_START()                                                        \
    {                                                                        \
        WRR_NEXT()                                                           \
        wr_start = sel;                                                      \
        if (wr_start >= nsrv) { MOD32(wr_start, wr_start, nsrv); }           \
    }
#elif PEG_SELECTION == SEL_LEAST_LOADED
/* the server with the fewest requests in flight, scanning from the rotating
 * offset rr_all (ties: the first in scan order); the other targets are the
 * r - 1 ids after it, as in pegasus.c select_write_start (one multicast
 * group per (start, r)) */
#define WRITE_START()                                                        \
    {                                                                        \
        bit<8> ra_;                                                          \
        rr_all.read(ra_, 0);                                                 \
        bit<32> off_;                                                        \
        MOD32(off_, (bit<32>)ra_, nsrv);                                     \
        bit<32> nxt_ = off_ + 1;                                             \
        if (nxt_ >= nsrv) { nxt_ = 0; }                                      \
        rr_all.write(0, (bit<8>)nxt_);                                       \
        bit<32> best_ = off_;                                                \
        bit<32> bl_;                                                         \
        srv_inflight.read(bl_, off_);                                        \
        LL_STEPS_1_31(LL_WRITE_STEP)                                         \
        wr_start = best_;                                                    \
    }
#else
#define WRITE_START()                                                        \
    {                                                                        \
        bit<8> ra_;                                                          \
        rr_all.read(ra_, 0);                                                 \
        MOD32(wr_start, (bit<32>)ra_, nsrv);                                 \
        bit<32> nxt_ = wr_start + 1;                                         \
        if (nxt_ >= nsrv) { nxt_ = 0; }                                      \
        rr_all.write(0, (bit<8>)nxt_);                                       \
    }
#endif

/* Pegasus-AMO: the detector CRC-32(client_id, req_id) mod n goes first; it
 * replaces itself in the pick, or else the last pick */
#if PEG_AMO
#define AMO_DETECTOR()                                                       \
    {                                                                        \
        bit<32> det_;                                                        \
        hash(det_, HashAlgorithm.crc32, 32w0,                                \
             { hdr.pegasus.client_id, hdr.pegasus.req_id }, nsrv);           \
        bit<32> detb_ = (bit<32>)1 << (bit<8>)det_;                          \
        if ((all_ & detb_) != 0) {                                           \
            others_ = all_ & ~detb_;                                         \
        } else {                                                             \
            bit<32> last_ = wr_start + fo_r - 1;                             \
            if (last_ >= nsrv) { last_ = last_ - nsrv; }                     \
            others_ = all_ & ~((bit<32>)1 << (bit<8>)last_);                 \
        }                                                                    \
        primary_ = det_;                                                     \
    }
#else
#define AMO_DETECTOR()
#endif

/* Write fan-out (pegasus.c handle_request): r targets over all servers, the
 * r consecutive ids from the first (wr_start). r = 1: unicast to it.
 * r > 1: multicast to the precomputed group wr_start * 32 + (r - 1)
 * (docs/pegasus.md "Write fan-out"; the controller installs the groups), each
 * copy a plain WRITE with `bitmap` = the targets, readdressed per egress
 * port in PegasusEgress. AMO: the detector gets the write with MULTI and
 * `bitmap` = the other targets (it copies them with RC_REQ). */
#if PEG_AMO
#define WRITE_TO_TARGETS()                                                   \
        if (others_ != 0) {                                                  \
            hdr.pegasus.flags = hdr.pegasus.flags | PEGASUS_FLAG_MULTI;      \
            hdr.pegasus.bitmap = others_;                                    \
        }
#elif PEG_WRITE_MCAST
#define WRITE_TO_TARGETS()                                                   \
        if (fo_r > 1) {                                                      \
            hdr.pegasus.bitmap = all_;                                       \
            sm.mcast_grp = (bit<16>)PEG_MCAST_GROUP(wr_start, fo_r);            \
            meta.fwd = FWD_MCAST;                                            \
            mc_targets = all_;                                               \
        }
#else
/* write_mcast=0 (pegasus.c): the RC_REQ path for every write */
#define WRITE_TO_TARGETS()                                                   \
        if (others_ != 0) {                                                  \
            hdr.pegasus.flags = hdr.pegasus.flags | PEGASUS_FLAG_MULTI;      \
            hdr.pegasus.bitmap = others_;                                    \
        }
#endif

#define SELECT_WRITE(IDX)                                                    \
    {                                                                        \
        WRITE_FANOUT(IDX)                                                    \
        WRITE_START()                                                        \
        bit<64> bits_ = (((bit<64>)1 << (bit<8>)fo_r) - 1) << (bit<8>)wr_start; \
        bit<64> nmask_ = ((bit<64>)1 << (bit<8>)nsrv) - 1;                   \
        bit<32> all_ = (bit<32>)((bits_ & nmask_) | (bits_ >> (bit<8>)nsrv)); \
        bit<32> primary_ = wr_start;                                         \
        bit<32> others_ = all_ & ~((bit<32>)1 << (bit<8>)wr_start);          \
        AMO_DETECTOR()                                                       \
        WRITE_TO_TARGETS()                                                   \
        meta.dst_node = (bit<16>)primary_;                                   \
    }

/* srv_inflight += 1 at every server of a multicast write (mc_targets) */
#define MC_INFLIGHT_STEP(t)                                                  \
        if ((mc_targets & ((bit<32>)1 << t)) != 0) {                         \
            bit<32> inf_;                                                    \
            srv_inflight.read(inf_, t);                                      \
            if (inf_ < PEG_RATE_MAX) { srv_inflight.write(t, inf_ + 1); }    \
        }

    apply {
        classify.apply(hdr, meta, sm);
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
            bit<8> n8;
            n_servers.read(n8, 0);
            nsrv = n8 == 0 ? 32w1 : (bit<32>)n8;
            rkeys.apply();

            bit<8> op = hdr.pegasus.op;
            want_route = true;
            /* the trust boundary (pegasus.c peg_process, docs/security.md) */
            bool req_op = op == PEGASUS_OP_READ || op == PEGASUS_OP_WRITE ||
                          op == PEGASUS_OP_DEL;
            if (meta.origin == ORIGIN_CLIENT && (bit<32>)meta.in_port < nsrv) {
                meta.origin = ORIGIN_SERVER;     /* server s is behind port s */
            }
            if (meta.origin == ORIGIN_CLIENT) {
                if (!req_op) {
                    stat(ST_HOST_SERVER_OP);
                    meta.fwd = FWD_DROP;
                    want_route = false;
                    op = 0xFF;                  /* no op: nothing below applies */
                } else {
                    if (hdr.pegasus.ver != 0) {
                        hdr.pegasus.ver = 0;
                        stat(ST_FORGED_VER);
                        meta.hdr_changed = 1;
                    }
                    if ((hdr.pegasus.flags & (PEGASUS_FLAG_BYPASS | PEGASUS_FLAG_MULTI)) != 0 ||
                        hdr.pegasus.bitmap != 0) {
                        hdr.pegasus.flags = hdr.pegasus.flags &
                                            ~(PEGASUS_FLAG_BYPASS | PEGASUS_FLAG_MULTI);
                        hdr.pegasus.bitmap = 0;
                        stat(ST_FORGED_FLAGS);
                        meta.hdr_changed = 1;
                    }
                }
            } else if (meta.origin == ORIGIN_SERVER && req_op && hdr.pegasus.ver != 0 &&
                       (hdr.pegasus.flags & PEGASUS_FLAG_BYPASS) == 0) {
                hdr.pegasus.ver = 0;          /* VER is the switch's; servers echo it */
                stat(ST_FORGED_VER);
                meta.hdr_changed = 1;
            }
            bool bypass = (hdr.pegasus.flags & PEGASUS_FLAG_BYPASS) != 0;

            if (op == PEGASUS_OP_READ || op == PEGASUS_OP_WRITE || op == PEGASUS_OP_DEL) {
                is_req = true;
                if (bypass) {
                    stat(ST_BYPASS);
                } else {
                    /* ---- Algorithm 1 (pegasus.c handle_request) ---- */
                    bool is_write = op != PEGASUS_OP_READ;
                    bit<8> size = 0;
                    if (rk_hit == 1) {
                        rset_size.read(size, rk_idx);
                    }
                    bit<1> pz = 0;
                    if (rk_hit == 1 && is_write) {
                        paused.read(pz, rk_idx);
                    }
                    if (rk_hit == 0) {
                        /* unreplicated: stamp, forward as addressed, sample */
                        @atomic {
                            if (is_write) STAMP()
                            stat(ST_MISS);
#if PEG_SAMPLE != 0
                            bit<32> sc;
                            sample_cnt.read(sc, 0);
                            sc = sc + 1;
                            if (sc >= PEG_SAMPLE) {
                                sc = 0;
                                meta.to_cpu = 1;
                                stat(ST_SAMPLED);
                            }
                            sample_cnt.write(0, sc);
#endif
                        }
                    } else if (size == 0) {
                        /* entry without registers (controller bug): unreplicated */
                        @atomic {
                            if (is_write) STAMP()
                        }
                    } else if (is_write && pz == 1) {
                        stat(ST_PAUSED_DROP);
                        meta.fwd = FWD_DROP;
                        want_route = false;
                        is_req = false;
                    } else if (!is_write) {
                        /* ---- a READ: one member of rset[idx] ---- */
                        @atomic {
                            SAT_INC(rate, rk_idx)
                            SAT_INC(rd_cnt, rk_idx)
                            SELECT_READ(rk_idx, size)
                            meta.dst_node = (bit<16>)sel;
                            stat(ST_READS);
                        }
                    } else {
                        /* ---- a WRITE/DEL to a replicated key ---- */
                        @atomic {
                            STAMP()
                            if (!stamp_refused) {
                            SAT_INC(rate, rk_idx)
                            SAT_INC(wr_cnt, rk_idx)
                            ver_last_write.write(rk_idx, hdr.pegasus.ver);
                            stat(ST_WRITES);
                            hdr.pegasus.flags = hdr.pegasus.flags & ~PEGASUS_FLAG_MULTI;
                            hdr.pegasus.bitmap = 0;
                            meta.hdr_changed = 1;
                            bit<1> dr;
                            draining.read(dr, rk_idx);
                            if (dr == 0) {
                                SELECT_WRITE(rk_idx)
                            }
                            /* draining: the home server only, as addressed */
                            }
                        }
                        if (meta.fwd == FWD_MCAST) {
                            /* no node_fwd lookup: the group's ports */
                            want_route = false;
                            is_req = false;
                            @atomic {
                                MC_INFLIGHT_STEP(0) MC_INFLIGHT_STEP(1) MC_INFLIGHT_STEP(2)
                                MC_INFLIGHT_STEP(3) MC_INFLIGHT_STEP(4) MC_INFLIGHT_STEP(5)
                                MC_INFLIGHT_STEP(6) MC_INFLIGHT_STEP(7) MC_INFLIGHT_STEP(8)
                                MC_INFLIGHT_STEP(9) MC_INFLIGHT_STEP(10) MC_INFLIGHT_STEP(11)
                                MC_INFLIGHT_STEP(12) MC_INFLIGHT_STEP(13) MC_INFLIGHT_STEP(14)
                                MC_INFLIGHT_STEP(15) MC_INFLIGHT_STEP(16) MC_INFLIGHT_STEP(17)
                                MC_INFLIGHT_STEP(18) MC_INFLIGHT_STEP(19) MC_INFLIGHT_STEP(20)
                                MC_INFLIGHT_STEP(21) MC_INFLIGHT_STEP(22) MC_INFLIGHT_STEP(23)
                                MC_INFLIGHT_STEP(24) MC_INFLIGHT_STEP(25) MC_INFLIGHT_STEP(26)
                                MC_INFLIGHT_STEP(27) MC_INFLIGHT_STEP(28) MC_INFLIGHT_STEP(29)
                                MC_INFLIGHT_STEP(30) MC_INFLIGHT_STEP(31)
                            }
                        }
                    }
                }
                if (stamp_refused) {
                    meta.fwd = FWD_DROP;
                    want_route = false;
                    is_req = false;
                }
            } else if (op == PEGASUS_OP_READ_REPLY || op == PEGASUS_OP_WRITE_REPLY ||
                       op == PEGASUS_OP_RC_ACK) {
                if (op != PEGASUS_OP_RC_ACK && hdr.pegasus.server_id < PEG_N) {
                    /* a request answered */
                    @atomic {
                        bit<32> inf;
                        srv_inflight.read(inf, (bit<32>)hdr.pegasus.server_id);
                        if (inf > 0) {
                            srv_inflight.write((bit<32>)hdr.pegasus.server_id, inf - 1);
                        }
                    }
                }
                if (bypass) {
                    stat(ST_BYPASS);
                } else {
                    @atomic {
                        if (hdr.pegasus.server_id < PEG_N) {
                            srv_load.write((bit<32>)hdr.pegasus.server_id,
                                           (bit<32>)hdr.pegasus.load);
                        }
                        if (rk_hit == 1) {
                            DIRECTORY_UPDATE()
                        }
                    }
                }
                if (op == PEGASUS_OP_RC_ACK) {
                    meta.fwd = FWD_DROP;     /* consumed by the switch */
                    want_route = false;
                } else if (meta.dst_node == NODE_NONE || meta.dst_node >= PEG_MAX_NODES) {
                    /* the reply to a controller-issued VWRITE */
                    stat(ST_TO_CPU);
                    meta.to_cpu = 1;
                    meta.cpu_reason = PKTIN_TO_CPU;
                    meta.fwd = FWD_DROP;
                    want_route = false;
                }
            } else if (op == PEGASUS_OP_VWRITE) {
                /* ---- §9.1: forward iff no write to the key is outstanding ---- */
                meta.fwd = FWD_DROP;
                want_route = false;
                bit<8> size = 0;
                if (rk_hit == 1) {
                    rset_size.read(size, rk_idx);
                }
                if (meta.origin != ORIGIN_TRUSTED) {
                    stat(ST_HOST_SERVER_OP);     /* the controller's alone */
                } else if (rk_hit == 0 || size == 0) {
                    stat(ST_VWRITE_DROP);
                } else {
                    @atomic {
                        bit<64> lw;
                        bit<64> vc;
                        bit<64> vn;
                        ver_last_write.read(lw, rk_idx);
                        ver_completed.read(vc, rk_idx);
                        ver_next.read(vn, 0);
                        if (lw != vc) {
                            stat(ST_VWRITE_DROP);
                        } else if (vn == VER_TOP) {
                            stat(ST_VER_EXHAUSTED);      /* versions never wrap */
                        } else {
                            hdr.pegasus.ver = vn;
                            ver_next.write(0, vn + 1);
                            ver_last_write.write(rk_idx, vn);
                            meta.hdr_changed = 1;
                            SELECT_READ(rk_idx, size)
                            meta.dst_node = (bit<16>)sel;
                            stat(ST_VWRITE_FWD);
                            meta.fwd = FWD_NODE;
                            want_route = true;
                            is_req = true;
                        }
                    }
                }
            } else if (op == PEGASUS_OP_PUT_FWD) {
                /* multi-rack (§9.6): a chain-forwarded write leaving a local
                 * server counts as its WRITE-REPLY; keep VER everywhere */
                if (!bypass && hdr.pegasus.ver == VER_TOP) {
                    stat(ST_VER_EXHAUSTED);       /* ver + 1 would wrap */
                    meta.fwd = FWD_DROP;
                    want_route = false;
                } else if (!bypass) {
                    @atomic {
                        if (rk_hit == 1 && meta.origin == ORIGIN_SERVER) {
                            DIRECTORY_UPDATE()
                        }
                        bit<64> vn;
                        ver_next.read(vn, 0);
                        if (hdr.pegasus.ver >= vn) {
                            ver_next.write(0, hdr.pegasus.ver + 1);
                        }
                    }
                }
            }
            /* RC_REQ and the rest: L2/L3 only */
        }

        forward.apply(hdr, meta, sm);

        if (want_route && meta.node_hit == 0) {
            stat(ST_NO_ROUTE);
        }
        if (is_req && meta.fwd == FWD_NODE && meta.node_hit == 1 && meta.dst_node < PEG_N) {
            @atomic {
                bit<32> inf;
                srv_inflight.read(inf, (bit<32>)meta.dst_node);
                if (inf < PEG_RATE_MAX) {
                    srv_inflight.write((bit<32>)meta.dst_node, inf + 1);
                }
            }
        }
    }
}

control PegasusEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t sm) {
    NetkvEgress() egress_common;
    apply {
        /* a copy of a multicast write: address it to the node behind its
         * egress port (the rack plan puts server s behind port s, as the
         * controller's groups assume), as netkv-switch rewrites each copy.
         * The ingress addressed the packet to the first target; every
         * multicast replica (first included) has instance_type REPLICATION.
         * The UDP checksum is recomputed after the egress (hdr_changed is
         * set: the write was stamped). */
        if (sm.instance_type == PKT_INSTANCE_REPLICATION && meta.fwd == FWD_MCAST &&
            hdr.pegasus.isValid() && hdr.ipv4.isValid()) {
            bit<32> node = (bit<32>)sm.egress_port;
            hdr.ipv4.dst_addr = NODE_NET + node + 1;
            hdr.ethernet.dst_addr = NODE_MAC_BASE + (bit<48>)node + 1;
            meta.hdr_changed = 1;
        }
        egress_common.apply(hdr, meta, sm);
    }
}

V1Switch(NetkvParser(), NetkvVerifyChecksum(), PegasusIngress(), PegasusEgress(),
         NetkvComputeChecksum(), NetkvDeparser()) main;
