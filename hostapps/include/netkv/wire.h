/*
 * wire.h - the on-the-wire formats of every netkv protocol, and the key
 * hashes every layer shares.
 *
 * Each protocol's UDP payload (its header plus its payload) decodes into one
 * `struct nk_msg` (msg.h) and encodes back from one. The byte layouts, op
 * codes and every "our choice" are tabled in docs/wire.md; the golden vectors
 * in tests/vectors/<protocol>.json pin them, and the Python codec (netkv/wire) and the
 * P4 headers (p4src/common/headers.p4) must agree with this file.
 *
 * Rules the codecs keep:
 *  - All multi-byte fields are big-endian (network byte order).
 *  - Decoding is strict and canonical: lengths must match the buffer exactly,
 *    reserved bytes and padding must be zero. Hence, whenever decode succeeds,
 *    encode(decode(bytes)) == bytes. Bad input never crashes and never reads
 *    outside [buf, buf+len): it returns a negative NK_WIRE_E* code, and the
 *    caller counts and drops the packet.
 *  - Decode sets every field of `out`; fields a protocol does not carry get
 *    their defaults (0, except server_id = NK_SERVER_NONE, frag_cnt = 1).
 *    `kind` is derived from `op`; encode ignores `kind`.
 *  - Value bytes are never copied on decode: `value` (and NetMC's `items`)
 *    point into the decoded buffer. On encode a NULL `value`/`items` writes
 *    zero bytes of the stated length.
 *  - No allocation, no global mutable state: safe from any thread.
 */
#ifndef NETKV_WIRE_H
#define NETKV_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "netkv/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ports, magics, flags, result codes and op codes (enum nk_<proto>_op):
 * netkv/constants.h, generated from spec/constants.toml. */

/* ---- errors (all negative) ------------------------------------------- */
enum nk_wire_error {
	NK_WIRE_ETRUNC = -1,   /* buffer shorter than the header or a length field says */
	NK_WIRE_EMAGIC = -2,   /* Pegasus/plain magic mismatch */
	NK_WIRE_EOP = -3,      /* op code unknown to the protocol */
	NK_WIRE_EPROTO = -4,   /* enum nk_proto out of range */
	NK_WIRE_EKEYLEN = -5,  /* key length out of range for the format */
	NK_WIRE_ELEN = -6,     /* trailing bytes, or length fields inconsistent */
	NK_WIRE_ESPACE = -7,   /* encode: output buffer too small */
	NK_WIRE_EFIELD = -8,   /* a field out of range (reserved byte != 0, index, count) */
	NK_WIRE_EVALUE = -9,   /* value length not allowed for this op/format */
	NK_WIRE_EINVAL = -10,  /* NULL pointer argument */
};

/* ---- Pegasus and the static consistent-hashing baseline ("plain") -----
 * 30 B header (pegasus.md §2, netkv header):
 *   magic u16 | op u8 | flags u8 | keyhash u32 | client_id u16 | server_id u8
 *   | rsvd u8 | load u16 | ver u64 | bitmap u32 | req_id u32
 * then a 16 B payload preamble (our choice; the switch never parses it):
 *   send_ns u64 | result u8 | rsvd u8 | key_len u16 | value_len u32
 * then key[key_len], value[value_len]. "plain" is the same layout with magic
 * 0x1573 (the artifact's static-baseline magic). */
#define NK_PEGASUS_HDR_LEN 30
#define NK_PEGASUS_PAYLOAD_HDR_LEN 16

/* ---- NetCache baseline (our design; docs/wire.md) ----------------------
 * 40 B header:
 *   op u8 | result u8 | flags u8 | key_len u8 | seq u32 | client_id u16
 *   | server_id u8 | rsvd u8 | vlen u16 | load u16 | send_ns u64 | key[16]
 * then the value, zero-padded to a multiple of 16 B (the switch stores values
 * as 16 B register slices, one per stage, NetCache-style; <= 128 B cached). */
#define NK_NETCACHE_HDR_LEN 40
#define NK_NETCACHE_KEY_LEN 16
#define NK_NETCACHE_VALUE_CHUNK 16
#define NK_NETCACHE_MAX_CACHED_VALUE 128

/* ---- KVSwitch (kvswitch.md §2) -----------------------------------------
 * 28 B header: op u8 | flags u8 (reply status) | vlen u16 | seq u32 | ver u32
 * | key[16]; then value[vlen]. */
#define NK_KVSWITCH_HDR_LEN 28
#define NK_KVSWITCH_KEY_LEN 16

/* ---- StarCache (starcache.md §2) ----------------------------------------
 * 28 B header: op u8 | seq u32 | hkey u128 | flag u8 | cached u8 | lat u32
 * | parid u8; then a 6 B payload preamble klen u16 | vlen u16 | frag u8
 * | rsvd u8, then key[klen], value[vlen]. */
#define NK_STARCACHE_HDR_LEN 28
#define NK_STARCACHE_PAYLOAD_HDR_LEN 6

/* ---- NetLR (netlr.md §2) -------------------------------------------------
 * fixed 36 B: op u8 | id u32 | seq u32 | oid u32 | req_id u32 | epoch u16
 * | flags u8 | value[16]. */
#define NK_NETLR_LEN 36
#define NK_NETLR_VALUE_LEN 16
#define NK_NETLR_OID_LEN 4

/* ---- NetMC (netmc.md §2) ---------------------------------------------------
 * fixed 13 + N B: op u8 | id u32 | oid u8 | numkey u8 | keyidx u32
 * | startidx u8 | clo u8 | srv[N] (KEYIDX is the thesis' 16 bits widened to
 * 32, our choice: W = 16 or 32 is the rack's, its bits the low W, MSB-aligned
 * within W); then a 12 B payload preamble (our choice,
 * not parsed by the switch): keylen u8 | nslots u8 | result u8 | rsvd u8
 * | send_ns u64; then nslots items: bare keys key[keylen] (GET, PUT_REPLY,
 * MGET) or pairs key[keylen] | vlen u16 | value[vlen] (PUT, GET_REPLY,
 * MGET_REPLY). */
#define NK_NETMC_N 32                /* SRV entries: servers per rack */
#define NK_NETMC_KEYIDX_BITS 32      /* KEYIDX on the wire: W <= 32 keys per request */
#define NK_NETMC_HDR_LEN (13 + NK_NETMC_N)
#define NK_NETMC_PAYLOAD_HDR_LEN 12
#define NK_NETMC_MAX_KEYS NK_NETMC_KEYIDX_BITS

/* ---- API ---------------------------------------------------------------- */

/* Decode one UDP payload of protocol `proto` into `out`. Returns 0 or a
 * negative NK_WIRE_E* code (then `out` is unspecified). */
int nk_wire_decode(enum nk_proto proto, const uint8_t *buf, size_t len,
		   struct nk_msg *out);

/* Encode `m` (protocol m->proto) into buf[0..cap). Returns the number of
 * bytes written, or a negative NK_WIRE_E* code. */
int nk_wire_encode(const struct nk_msg *m, uint8_t *buf, size_t cap);

/* Bytes nk_wire_encode would write for `m`, or a negative error code. */
int nk_wire_encoded_len(const struct nk_msg *m);
/* The size function nk_wire_encoded_len dispatches to for messages of
 * `proto` (NULL if none): an embedder sizing many messages of one protocol
 * calls it directly (the simulator, four times a request). */
typedef int (*nk_wire_size_fn)(const struct nk_msg *m);
nk_wire_size_fn nk_wire_size_of(uint8_t proto);

/* sizeof(struct nk_msg): lets FFI users (tests/test_wire.py) check that their
 * copy of the struct layout is current. */
size_t nk_wire_msg_size(void);

/* What a format carries of the fields every layer may ask about
 * (NK_WIRE_HAS_*); a field it does not carry decodes to its default (see
 * the rules above). 0 for an unknown protocol. */
enum nk_wire_has {
	/* keyhash (Pegasus, plain; NetLR's ID); else decoded as 0 */
	NK_WIRE_HAS_KEYHASH = 1u << 0,
	/* server_id in every message: a reply names the server that answered,
	 * and a switch's own reply names none, NK_SERVER_NONE (Pegasus, plain,
	 * NetCache, StarCache's PARID); else decoded as NK_SERVER_NONE */
	NK_WIRE_HAS_REPLIER = 1u << 1,
};
unsigned nk_wire_has(enum nk_proto proto);

/* The hash a store files m's key under: m->keyhash where m's format carries
 * one, else nk_djb2 of the key bytes m carries (NetCache, KVSwitch, NetMC,
 * StarCache, whose messages decode with keyhash 0). That is the workload's
 * keyhash where the wire carries the whole workload key (NetMC, StarCache);
 * NetCache's and KVSwitch's 16 B keys hash to their own. kvserver's store
 * and the host logic that recomputes a key's hash call this one. */
uint32_t nk_wire_store_keyhash(const struct nk_msg *m);

/* One-line description of an error code ("truncated", ...). */
const char *nk_wire_strerror(int err);

/* enum nk_kind for a protocol's op code, or a negative NK_WIRE_EOP. */
int nk_wire_kind(enum nk_proto proto, uint8_t op);

/* Name of a protocol ("pegasus") and of an op ("READ"); "?" if unknown. */
const char *nk_wire_proto_name(enum nk_proto proto);
const char *nk_wire_op_name(enum nk_proto proto, uint8_t op);

/* NetMC pair walker over m->items of a decoded (or to-be-encoded) MGET_REPLY:
 * call with *off = 0; each call yields one pair and returns 1, returns 0 at
 * the end, negative if the list is malformed. */
int nk_wire_netmc_next_pair(const struct nk_msg *m, size_t *off,
			    const uint8_t **key, const uint8_t **value,
			    uint16_t *vlen);

/* ---- key hashes (hash.c) ------------------------------------------------- */

/* Pegasus keyhash: djb2 (h = h*33 + c, h0 = 5381, 32-bit wrap) & 0x7FFFFFFF. */
uint32_t nk_djb2(const uint8_t *key, size_t len);

/* MurmurHash3_x64_128 (Appleby's reference): out[0] = h1, out[1] = h2, i.e.
 * the reference's 16 output bytes are out[0] then out[1], little-endian. */
void nk_murmur3_128(const void *key, size_t len, uint32_t seed, uint64_t out[2]);

/* StarCache HKEY of a key: the 128-bit integer mmh3.hash128(key, 0,
 * signed=False) = h2 << 64 | h1, so hkey[0] (high, first on the wire) = h2
 * and hkey[1] = h1. */
void nk_starcache_hkey(const uint8_t *key, size_t len, uint64_t hkey[2]);

/* CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320), equal to zlib.crc32. */
uint32_t nk_crc32(const uint8_t *buf, size_t len);

/* nk_crc32 of the 17 bytes b0, k0 big-endian, k1 big-endian (a salted
 * 128-bit key: KVSwitch's HashPipe), from the words themselves: no buffer
 * built byte by byte, no length loop. */
uint32_t nk_crc32_b_k128(uint8_t b0, uint64_t k0, uint64_t k1);

/* NetLR slot id: CRC32 of the 4 big-endian bytes of oid, masked to `slots`
 * (a power of two). */
uint32_t nk_netlr_slot(uint32_t oid, uint32_t slots);

#ifdef __cplusplus
}
#endif

#endif /* NETKV_WIRE_H */
