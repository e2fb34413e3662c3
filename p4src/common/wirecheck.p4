/*
 * wirecheck.p4 - the codec's strict decode checks (docs/wire.md "Strict,
 * canonical decoding"), as far as a switch can make them, so that the P4
 * programs drop what netkv-switch drops (it drops every protocol packet that
 * fails nk_wire_decode).
 *
 * Pegasus / plain (all checks of the codec):
 *   magic, op <= 8, both reserved bytes zero, key_len <= 64, and the UDP
 *   payload length == 30 + 16 + key_len + value_len.
 * NetCache (all but one):
 *   op <= 8, key_len <= 16, rsvd zero, key bytes past key_len zero, a
 *   CACHE_UPDATE value <= 128 B, UDP payload length == 40 + vlen rounded up
 *   to 16; value padding zero when the value was parsed (vlen <= 128). The
 *   padding of larger values is not checked (the switch never parses them).
 *
 * KVSwitch (all checks of the codec):
 *   a known op, UDP payload length == 28 + VLEN.
 *
 * Requires types.p4. Truncated headers are parser errors (NetkvClassify).
 */
#ifndef NETKV_WIRECHECK_P4
#define NETKV_WIRECHECK_P4

control PegasusWireCheck(in headers_t hdr, in bit<16> magic, out bool ok) {
    apply {
        ok = false;
        if (hdr.pegasus.isValid() && hdr.pegasus_pre.isValid()) {
            bit<48> want = 8 + (bit<48>)PEGASUS_HDR_BYTES + (bit<48>)PEGASUS_PRE_BYTES +
                           (bit<48>)hdr.pegasus_pre.key_len + (bit<48>)hdr.pegasus_pre.value_len;
            ok = hdr.pegasus.magic == magic &&
                 hdr.pegasus.op <= PEGASUS_OP_VWRITE &&
                 hdr.pegasus.rsvd == 0 && hdr.pegasus_pre.rsvd == 0 &&
                 hdr.pegasus_pre.key_len <= PEGASUS_MAX_KEY_LEN &&
                 (bit<48>)hdr.udp.length == want;
        }
    }
}

#if defined(NETKV_PARSE_NETCACHE)
const bit<8> NETCACHE_KEY_BYTES = 16;
const bit<16> NETCACHE_HDR_BYTES = 40;
const bit<16> NETCACHE_MAX_CACHED = 128;

control NetcacheWireCheck(in headers_t hdr, in metadata_t meta, out bool ok) {
    /* bytes of the 16 B key slot past key_len must be zero: mask by key_len */
    bit<128> pad_mask = 0;
    /* bytes of the last 16 B value slice past vlen must be zero */
    bit<128> vpad_mask = 0;
    bit<128> last_slice = 0;

    apply {
        ok = false;
        if (hdr.netcache.isValid()) {
            bit<8> kl = hdr.netcache.key_len;
            if (kl < NETCACHE_KEY_BYTES) {
                pad_mask = ((bit<128>)1 << (bit<8>)((NETCACHE_KEY_BYTES - kl) << 3)) - 1;
            }
            bit<32> area = ((bit<32>)hdr.netcache.vlen + 15) & 0xFFFFFFF0;
            ok = hdr.netcache.op <= NETCACHE_OP_HOT_REPORT &&
                 kl <= NETCACHE_KEY_BYTES &&
                 hdr.netcache.rsvd == 0 &&
                 (hdr.netcache.key & pad_mask) == 0 &&
                 !(hdr.netcache.op == NETCACHE_OP_CACHE_UPDATE &&
                   hdr.netcache.vlen > NETCACHE_MAX_CACHED) &&
                 (bit<32>)hdr.udp.length == 8 + (bit<32>)NETCACHE_HDR_BYTES + area;
            /* the padding of the last parsed slice */
            bit<16> used = hdr.netcache.vlen & 15;     /* bytes used in the last slice; 0 = full */
            if (ok && used != 0 && hdr.netcache.vlen <= NETCACHE_MAX_CACHED) {
                vpad_mask = ((bit<128>)1 << (bit<8>)((16 - used) << 3)) - 1;
                bit<16> last = hdr.netcache.vlen >> 4;  /* index of the partial slice */
                if (last == 0) { last_slice = hdr.nc_value[0].slice; }
                else if (last == 1) { last_slice = hdr.nc_value[1].slice; }
                else if (last == 2) { last_slice = hdr.nc_value[2].slice; }
                else if (last == 3) { last_slice = hdr.nc_value[3].slice; }
                else if (last == 4) { last_slice = hdr.nc_value[4].slice; }
                else if (last == 5) { last_slice = hdr.nc_value[5].slice; }
                else if (last == 6) { last_slice = hdr.nc_value[6].slice; }
                else { last_slice = hdr.nc_value[7].slice; }
                ok = (last_slice & vpad_mask) == 0;
            }
        }
    }
}
#endif

#if defined(NETKV_PARSE_KVSWITCH)
const bit<16> KVSWITCH_HDR_BYTES = 28;

/* KVSwitch (all checks of the codec): a known op, and the UDP payload
 * length == 28 + VLEN. The key is a fixed 16 B (no padding to check);
 * FLAGS and VER are any value. */
control KvswitchWireCheck(in headers_t hdr, out bool ok) {
    apply {
        ok = false;
        if (hdr.kvswitch.isValid()) {
            bit<8> op = hdr.kvswitch.op;
            ok = (op == KVSWITCH_OP_GET || op == KVSWITCH_OP_SET || op == KVSWITCH_OP_DEL ||
                  op == KVSWITCH_OP_UPDATE || op == KVSWITCH_OP_UPDATE_DEL ||
                  op == KVSWITCH_OP_UPDATE_ACK || op == KVSWITCH_OP_REPL_CMD ||
                  op == KVSWITCH_OP_REPL_PUSH || op == KVSWITCH_OP_REPL_EVICT ||
                  op == KVSWITCH_OP_GET_REPLY || op == KVSWITCH_OP_SET_REPLY ||
                  op == KVSWITCH_OP_DEL_REPLY) &&
                 (bit<32>)hdr.udp.length == 8 + (bit<32>)KVSWITCH_HDR_BYTES +
                                            (bit<32>)hdr.kvswitch.vlen;
        }
    }
}
#endif

#if defined(NETKV_PARSE_STARCACHE)
const bit<16> STARCACHE_HDR_BYTES = 28;     /* NK_STARCACHE_HDR_LEN */
const bit<16> STARCACHE_PRE_BYTES = 6;      /* NK_STARCACHE_PAYLOAD_HDR_LEN */
const bit<16> STARCACHE_MAX_KEY_LEN = 64;   /* NK_MAX_KEY_LEN */

/* StarCache (all checks of the codec, starcache_decode): a known op, KLEN
 * <= 64, RSVD zero, FRAG < max(FLAG, 1), UDP payload length == 28 + 6 +
 * KLEN + VLEN. */
control StarcacheWireCheck(in headers_t hdr, out bool ok) {
    apply {
        ok = false;
        if (hdr.starcache.isValid() && hdr.starcache_pre.isValid()) {
            bit<8> op = hdr.starcache.op;
            bit<8> flag = hdr.starcache.flag;
            if (flag == 0) {
                flag = 1;
            }
            ok = op >= STARCACHE_OP_R_REQ && op <= STARCACHE_OP_CRN_REQ &&
                 hdr.starcache_pre.klen <= STARCACHE_MAX_KEY_LEN &&
                 hdr.starcache_pre.result <= RESULT_RETRY && hdr.starcache_pre.frag < flag &&
                 (bit<32>)hdr.udp.length == 8 + (bit<32>)STARCACHE_HDR_BYTES +
                                            (bit<32>)STARCACHE_PRE_BYTES +
                                            (bit<32>)hdr.starcache_pre.klen +
                                            (bit<32>)hdr.starcache_pre.vlen;
        }
    }
}
#endif

#if defined(NETKV_PARSE_NETLR)
const bit<16> NETLR_HDR_BYTES = 36;         /* NK_NETLR_LEN: fixed size */

/* NetLR (all checks of the codec, netlr_decode): a known op, UDP payload
 * length == 36, the value bytes zero unless the op carries a value (WRITE,
 * R_REPLY, and Hermes' INV: the written value goes to every replica). */
control NetlrWireCheck(in headers_t hdr, out bool ok) {
    apply {
        ok = false;
        if (hdr.netlr.isValid()) {
            bit<8> op = hdr.netlr.op;
            bool has_value = op == NETLR_OP_WRITE || op == NETLR_OP_R_REPLY ||
                             op == NETLR_OP_INV;
            ok = op <= NETLR_OP_VAL && (has_value || hdr.netlr.value == 0) &&
                 hdr.udp.length == 8 + NETLR_HDR_BYTES;
        }
    }
}
#endif

#endif /* NETKV_WIRECHECK_P4 */
