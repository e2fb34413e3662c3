/*
 * headers.p4 - P4_16 header types for every netkv wire format.
 *
 * The same fields, widths and order as hostapps/include/netkv/wire.h and
 * docs/wire.md (the golden vectors tests/vectors/<protocol>.json pin them).
 * Only what a switch parses is here: each protocol's fixed header, plus the
 * NetCache value slices the switch reads and writes, and the Pegasus payload
 * preamble (parsed only for length checks). Payloads the switch never parses
 * (StarCache payload preambles, keys, values, NetMC key lists) are not
 * declared. All fields are network byte order, as P4
 * extracts them.
 *
 * Architecture-neutral: no v1model or TNA include, so both the BMv2 and the
 * Tofino programs can include it.
 */
#ifndef NETKV_HEADERS_P4
#define NETKV_HEADERS_P4

/* ports, magic numbers, flags and op codes: generated from spec/constants.toml */
#include "constants.p4"

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> IPPROTO_UDP = 17;

/* ---- standard L2-L4 ------------------------------------------------------ */
header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* ---- Pegasus and the static baseline (30 B) ------------------------------ */
/* op codes */

header pegasus_t {
    bit<16> magic;      /* 0x5047 Pegasus, 0x1573 static baseline */
    bit<8>  op;
    bit<8>  flags;      /* bit0 BYPASS, bit1 MULTI */
    bit<32> keyhash;    /* djb2(key) & 0x7FFFFFFF */
    bit<16> client_id;
    bit<8>  server_id;  /* request: home server; reply: replier; 0xFF none */
    bit<8>  rsvd;
    bit<16> load;
    bit<64> ver;        /* 0 = not stamped */
    bit<32> bitmap;     /* 1 << server_id in replies and RC_ACK */
    bit<32> req_id;
}

/* The Pegasus/plain payload preamble (16 B, docs/wire.md "Payload"). The
 * switch never acts on it; the BMv2 programs extract it only to apply the
 * codec's strict length checks (key_len <= 64, rsvd == 0, UDP length ==
 * 8 + 30 + 16 + key_len + value_len), so that they drop exactly what the C
 * switch drops. */
const bit<16> PEGASUS_MAX_KEY_LEN = 64;
const bit<16> PEGASUS_HDR_BYTES = 30;
const bit<16> PEGASUS_PRE_BYTES = 16;

header pegasus_pre_t {
    bit<64> send_ns;
    bit<8>  result;     /* 0 OK, 1 NOT_FOUND, 2 RETRY */
    bit<8>  rsvd;       /* must be 0 */
    bit<16> key_len;    /* <= 64 */
    bit<32> value_len;
}

/* ---- NetCache baseline (40 B + value slices) ------------------------------ */
#define NETCACHE_VALUE_SLICES 8   /* 8 x 16 B = 128 B, the largest cached value */

header netcache_t {
    bit<8>   op;
    bit<8>   result;
    bit<8>   flags;     /* bit0 CACHED: served by the switch */
    bit<8>   key_len;   /* meaningful bytes of key, <= 16 */
    bit<32>  seq;
    bit<16>  client_id;
    bit<8>   server_id;
    bit<8>   rsvd;
    bit<16>  vlen;      /* value bytes; the value area is vlen rounded up to 16 */
    bit<16>  load;
    bit<64>  send_ns;
    bit<128> key;       /* zero-padded: the cache's exact-match key */
}

/* One 16 B slice of the value area; the parser extracts ceil(vlen/16) of
 * them (<= NETCACHE_VALUE_SLICES) for READ_REPLY and CACHE_UPDATE, and a hit
 * sets them valid to answer a READ. */
header netcache_value_t {
    bit<128> slice;
}

/* ---- KVSwitch (28 B) -------------------------------------------------------- */

header kvswitch_t {
    bit<8>   op;
    bit<8>   flags;     /* reply status: 0 OK, 1 NOT_FOUND, 2 ERROR; owner
                         * + 1 on a hot write (the switch) and a REPL_EVICT
                         * (the controller) */
    bit<16>  vlen;
    bit<32>  seq;
    bit<32>  ver;       /* stamped by the switch on hot writes */
    bit<128> key;
}

/* ---- StarCache (22 B core + 6 B extension) ------------------------------------- */

header starcache_t {
    bit<8>   op;
    bit<32>  seq;
    bit<128> hkey;      /* mmh3.hash128(key, 0) as a big-endian integer */
    bit<8>   flag;      /* W_REQ/W_REP: cached; cache packets/F_REP: packets per item */
    bit<8>   cached;    /* set to 1 when a cache packet served the reply */
    bit<32>  lat;       /* client send time, low 32 bits of ns */
    bit<8>   parid;
}

/* the payload preamble (our choice, docs/wire.md): the switch reads VLEN (a
 * reply without value bytes never loops) and checks the rest as the codec */
header starcache_pre_t {
    bit<16>  klen;
    bit<16>  vlen;
    bit<8>   frag;      /* 0-based fragment index, < max(FLAG, 1) */
    bit<8>   result;    /* RESULT_OK, RESULT_NOT_FOUND or RESULT_RETRY (replies) */
}

/* ---- NetLR (36 B) ------------------------------------------------------------------ */

header netlr_t {
    bit<8>   op;
    bit<32>  id;        /* slot = CRC32(oid as 4 big-endian bytes) mod SLOTS */
    bit<32>  seq;
    bit<32>  oid;       /* 0 reserved (empty slot) */
    bit<32>  req_id;
    bit<16>  epoch;
    bit<8>   flags;     /* bit0 SUPERSEDED, bit1 STAMPED */
    bit<128> value;     /* WRITE and R_REPLY; zero otherwise */
}

/* ---- NetMC (13 B + N B, N = 32) --------------------------------------------------- */
#define NETMC_N 32              /* SRV entries = max servers per rack */
#define NETMC_KEYIDX_BITS 32    /* KEYIDX on the wire; W = 16 or 32 keys (MC_KEYIDX_W) */

header netmc_t {
    bit<8>  op;
    bit<32> id;
    bit<8>  oid;        /* current key group; indexes srv */
    bit<8>  numkey;
    bit<32> keyidx;     /* group-boundary bitmap, MSB-aligned within W bits */
    bit<8>  startidx;
    bit<8>  clo;        /* 1 = recirculated continuation */
}

/* SRV[0..N-1] follows netmc_t; declare it as a stack
 * `netmc_srv_t[NETMC_N] netmc_srv;` in the program's headers struct. */
header netmc_srv_t {
    bit<8> id;
}

/* the payload preamble (our choice, docs/wire.md): the switch reads NSLOTS
 * only, to keep a group inside the packet's key list */
header netmc_pre_t {
    bit<8>  keylen;
    bit<8>  nslots;
    bit<8>  result;
    bit<8>  rsvd;
    bit<64> send_ns;
}

#endif /* NETKV_HEADERS_P4 */
