/*
 * wire.c - encode and decode every protocol's UDP payload to and from
 * struct nk_msg. Layouts: wire.h and docs/wire.md.
 *
 * Each protocol has one size function (validates a message and returns its
 * encoded length), one encoder (writes it; the size function has already
 * validated) and one decoder (strict: exact lengths, zero reserved bytes and
 * padding, so a successful decode always re-encodes to the same bytes).
 * Every read of the input is preceded by a length check against `len`.
 */
#include <string.h>

#include "netkv/wire.h"
#include "netkv/bytes.h"

/* ---- big-endian helpers ------------------------------------------------- */

/* Copy n bytes from src, or write n zeros when src is NULL (the simulator
 * carries value lengths without value bytes). */
static inline void put_bytes(uint8_t *p, const uint8_t *src, size_t n)
{
	if (n == 0)
		return;
	if (src)
		memcpy(p, src, n);
	else
		memset(p, 0, n);
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Exact-length check of a self-delimiting message: shorter is truncated,
 * longer has trailing bytes. */
static inline int check_total(size_t len, size_t total)
{
	if (len < total)
		return NK_WIRE_ETRUNC;
	if (len > total)
		return NK_WIRE_ELEN;
	return 0;
}

/* ---- op tables: kind + 1 (0 = unknown op) and name, indexed by op -------- */

struct op_table {
	uint8_t kind1[256];
	const char *name[256];
};

#define OP(code, k, nm) .kind1[code] = (k) + 1, .name[code] = nm

static const struct op_table pegasus_ops = {
	OP(NK_PEGASUS_OP_READ, NK_KIND_READ, "READ"),
	OP(NK_PEGASUS_OP_WRITE, NK_KIND_WRITE, "WRITE"),
	OP(NK_PEGASUS_OP_DEL, NK_KIND_WRITE, "DEL"),
	OP(NK_PEGASUS_OP_READ_REPLY, NK_KIND_READ_REPLY, "READ_REPLY"),
	OP(NK_PEGASUS_OP_WRITE_REPLY, NK_KIND_WRITE_REPLY, "WRITE_REPLY"),
	OP(NK_PEGASUS_OP_RC_REQ, NK_KIND_CONTROL, "RC_REQ"),
	OP(NK_PEGASUS_OP_RC_ACK, NK_KIND_CONTROL, "RC_ACK"),
	OP(NK_PEGASUS_OP_PUT_FWD, NK_KIND_WRITE, "PUT_FWD"),
	OP(NK_PEGASUS_OP_VWRITE, NK_KIND_CONTROL, "VWRITE"),
};

static const struct op_table netcache_ops = {
	OP(NK_NETCACHE_OP_READ, NK_KIND_READ, "READ"),
	OP(NK_NETCACHE_OP_WRITE, NK_KIND_WRITE, "WRITE"),
	OP(NK_NETCACHE_OP_DELETE, NK_KIND_WRITE, "DELETE"),
	OP(NK_NETCACHE_OP_READ_REPLY, NK_KIND_READ_REPLY, "READ_REPLY"),
	OP(NK_NETCACHE_OP_WRITE_REPLY, NK_KIND_WRITE_REPLY, "WRITE_REPLY"),
	OP(NK_NETCACHE_OP_DELETE_REPLY, NK_KIND_WRITE_REPLY, "DELETE_REPLY"),
	OP(NK_NETCACHE_OP_CACHE_UPDATE, NK_KIND_CONTROL, "CACHE_UPDATE"),
	OP(NK_NETCACHE_OP_CACHE_UPDATE_ACK, NK_KIND_CONTROL, "CACHE_UPDATE_ACK"),
	OP(NK_NETCACHE_OP_HOT_REPORT, NK_KIND_CONTROL, "HOT_REPORT"),
};

static const struct op_table kvswitch_ops = {
	OP(NK_KVSWITCH_OP_GET, NK_KIND_READ, "GET"),
	OP(NK_KVSWITCH_OP_SET, NK_KIND_WRITE, "SET"),
	OP(NK_KVSWITCH_OP_DEL, NK_KIND_WRITE, "DEL"),
	OP(NK_KVSWITCH_OP_UPDATE, NK_KIND_CONTROL, "UPDATE"),
	OP(NK_KVSWITCH_OP_UPDATE_DEL, NK_KIND_CONTROL, "UPDATE_DEL"),
	OP(NK_KVSWITCH_OP_UPDATE_ACK, NK_KIND_CONTROL, "UPDATE_ACK"),
	OP(NK_KVSWITCH_OP_REPL_CMD, NK_KIND_CONTROL, "REPL_CMD"),
	OP(NK_KVSWITCH_OP_REPL_PUSH, NK_KIND_CONTROL, "REPL_PUSH"),
	OP(NK_KVSWITCH_OP_REPL_EVICT, NK_KIND_CONTROL, "REPL_EVICT"),
	OP(NK_KVSWITCH_OP_GET_REPLY, NK_KIND_READ_REPLY, "GET_REPLY"),
	OP(NK_KVSWITCH_OP_SET_REPLY, NK_KIND_WRITE_REPLY, "SET_REPLY"),
	OP(NK_KVSWITCH_OP_DEL_REPLY, NK_KIND_WRITE_REPLY, "DEL_REPLY"),
};

static const struct op_table starcache_ops = {
	OP(NK_STARCACHE_OP_R_REQ, NK_KIND_READ, "R_REQ"),
	OP(NK_STARCACHE_OP_W_REQ, NK_KIND_WRITE, "W_REQ"),
	OP(NK_STARCACHE_OP_R_REP, NK_KIND_READ_REPLY, "R_REP"),
	OP(NK_STARCACHE_OP_W_REP, NK_KIND_WRITE_REPLY, "W_REP"),
	OP(NK_STARCACHE_OP_F_REQ, NK_KIND_CONTROL, "F_REQ"),
	OP(NK_STARCACHE_OP_F_REP, NK_KIND_CONTROL, "F_REP"),
	OP(NK_STARCACHE_OP_CRN_REQ, NK_KIND_READ, "CRN_REQ"),
};

static const struct op_table netlr_ops = {
	OP(NK_NETLR_OP_READ, NK_KIND_READ, "READ"),
	OP(NK_NETLR_OP_R_REPLY, NK_KIND_READ_REPLY, "R_REPLY"),
	OP(NK_NETLR_OP_WRITE, NK_KIND_WRITE, "WRITE"),
	OP(NK_NETLR_OP_W_REPLY, NK_KIND_WRITE_REPLY, "W_REPLY"),
	OP(NK_NETLR_OP_NACK, NK_KIND_CONTROL, "NACK"),
	OP(NK_NETLR_OP_INV, NK_KIND_CONTROL, "INV"),
	OP(NK_NETLR_OP_ACK, NK_KIND_CONTROL, "ACK"),
	OP(NK_NETLR_OP_VAL, NK_KIND_CONTROL, "VAL"),
};

static const struct op_table netmc_ops = {
	OP(NK_NETMC_OP_GET, NK_KIND_READ, "GET"),
	OP(NK_NETMC_OP_GET_REPLY, NK_KIND_READ_REPLY, "GET_REPLY"),
	OP(NK_NETMC_OP_PUT, NK_KIND_WRITE, "PUT"),
	OP(NK_NETMC_OP_PUT_REPLY, NK_KIND_WRITE_REPLY, "PUT_REPLY"),
	OP(NK_NETMC_OP_MGET, NK_KIND_MULTIGET, "MGET"),
	OP(NK_NETMC_OP_MGET_REPLY, NK_KIND_MULTIGET_REPLY, "MGET_REPLY"),
};

#undef OP

static const struct op_table *ops_of(enum nk_proto proto)
{
	switch (proto) {
	case NK_PROTO_PLAIN:
	case NK_PROTO_PEGASUS:
		return &pegasus_ops;
	case NK_PROTO_NETCACHE:
		return &netcache_ops;
	case NK_PROTO_KVSWITCH:
		return &kvswitch_ops;
	case NK_PROTO_STARCACHE:
		return &starcache_ops;
	case NK_PROTO_NETLR:
		return &netlr_ops;
	case NK_PROTO_NETMC:
		return &netmc_ops;
	default:
		return NULL;
	}
}

int nk_wire_kind(enum nk_proto proto, uint8_t op)
{
	const struct op_table *t = ops_of(proto);
	if (!t)
		return NK_WIRE_EPROTO;
	if (!t->kind1[op])
		return NK_WIRE_EOP;
	return t->kind1[op] - 1;
}

const char *nk_wire_op_name(enum nk_proto proto, uint8_t op)
{
	const struct op_table *t = ops_of(proto);
	return (t && t->name[op]) ? t->name[op] : "?";
}

const char *nk_wire_proto_name(enum nk_proto proto)
{
	static const char *const names[NK_PROTO_COUNT] = {
		[NK_PROTO_PLAIN] = "plain",
		[NK_PROTO_PEGASUS] = "pegasus",
		[NK_PROTO_NETCACHE] = "netcache",
		[NK_PROTO_KVSWITCH] = "kvswitch",
		[NK_PROTO_STARCACHE] = "starcache",
		[NK_PROTO_NETLR] = "netlr",
		[NK_PROTO_NETMC] = "netmc",
	};
	if ((unsigned)proto >= NK_PROTO_COUNT)
		return "?";
	return names[proto];
}

size_t nk_wire_msg_size(void)
{
	return sizeof(struct nk_msg);
}

const char *nk_wire_strerror(int err)
{
	switch (err) {
	case 0: return "ok";
	case NK_WIRE_ETRUNC: return "truncated";
	case NK_WIRE_EMAGIC: return "bad magic";
	case NK_WIRE_EOP: return "unknown op code";
	case NK_WIRE_EPROTO: return "unknown protocol";
	case NK_WIRE_EKEYLEN: return "key length out of range";
	case NK_WIRE_ELEN: return "length mismatch (trailing bytes or inconsistent lengths)";
	case NK_WIRE_ESPACE: return "output buffer too small";
	case NK_WIRE_EFIELD: return "field out of range";
	case NK_WIRE_EVALUE: return "value length not allowed";
	case NK_WIRE_EINVAL: return "invalid argument";
	default: return err > 0 ? "ok" : "unknown error";
	}
}

/* ==== Pegasus and plain ================================================== */

static uint16_t pegasus_magic(enum nk_proto proto)
{
	return proto == NK_PROTO_PLAIN ? NK_PLAIN_MAGIC : NK_PEGASUS_MAGIC;
}

static int pegasus_decode(enum nk_proto proto, const uint8_t *b, size_t len,
			  struct nk_msg *m)
{
	const size_t fixed = NK_PEGASUS_HDR_LEN + NK_PEGASUS_PAYLOAD_HDR_LEN;
	if (len < fixed)
		return NK_WIRE_ETRUNC;
	if (nk_get16(b) != pegasus_magic(proto))
		return NK_WIRE_EMAGIC;
	if (!pegasus_ops.kind1[b[2]])
		return NK_WIRE_EOP;
	if (b[11] != 0 || b[39] != 0)   /* header rsvd, payload rsvd */
		return NK_WIRE_EFIELD;
	uint16_t key_len = nk_get16(b + 40);
	uint32_t value_len = nk_get32(b + 42);
	if (key_len > NK_MAX_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	int rc = check_total(len, fixed + key_len + (size_t)value_len);
	if (rc)
		return rc;

	m->op = b[2];
	m->flags = b[3];
	m->keyhash = nk_get32(b + 4);
	m->client_id = nk_get16(b + 8);
	m->server_id = b[10];
	m->load = nk_get16(b + 12);
	m->ver = nk_get64(b + 14);
	m->bitmap = nk_get32(b + 22);
	m->req_id = nk_get32(b + 26);
	m->send_ns = nk_get64(b + 30);
	m->result = b[38];
	m->key_len = (uint8_t)key_len;
	memcpy(m->key, b + fixed, key_len);
	m->value_len = value_len;
	m->value = value_len ? b + fixed + key_len : NULL;
	return 0;
}

static int pegasus_size(const struct nk_msg *m)
{
	if (!pegasus_ops.kind1[m->op])
		return NK_WIRE_EOP;
	if (m->key_len > NK_MAX_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	size_t total = (size_t)NK_PEGASUS_HDR_LEN + NK_PEGASUS_PAYLOAD_HDR_LEN +
		       m->key_len + (size_t)m->value_len;
	if (total > INT32_MAX)
		return NK_WIRE_EVALUE;
	return (int)total;
}

static void pegasus_encode(const struct nk_msg *m, uint8_t *b)
{
	nk_put16(b, pegasus_magic((enum nk_proto)m->proto));
	b[2] = m->op;
	b[3] = m->flags;
	nk_put32(b + 4, m->keyhash);
	nk_put16(b + 8, m->client_id);
	b[10] = m->server_id;
	b[11] = 0;
	nk_put16(b + 12, m->load);
	nk_put64(b + 14, m->ver);
	nk_put32(b + 22, m->bitmap);
	nk_put32(b + 26, m->req_id);
	nk_put64(b + 30, m->send_ns);
	b[38] = m->result;
	b[39] = 0;
	nk_put16(b + 40, m->key_len);
	nk_put32(b + 42, m->value_len);
	memcpy(b + 46, m->key, m->key_len);
	put_bytes(b + 46 + m->key_len, m->value, m->value_len);
}

/* ==== NetCache =========================================================== */

static size_t netcache_value_area(size_t vlen)
{
	return (vlen + NK_NETCACHE_VALUE_CHUNK - 1) / NK_NETCACHE_VALUE_CHUNK *
	       NK_NETCACHE_VALUE_CHUNK;
}

static int netcache_decode(const uint8_t *b, size_t len, struct nk_msg *m)
{
	if (len < NK_NETCACHE_HDR_LEN)
		return NK_WIRE_ETRUNC;
	if (!netcache_ops.kind1[b[0]])
		return NK_WIRE_EOP;
	uint8_t key_len = b[3];
	if (key_len > NK_NETCACHE_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	if (b[11] != 0 || !all_zero(b + 24 + key_len, NK_NETCACHE_KEY_LEN - key_len))
		return NK_WIRE_EFIELD;
	uint16_t vlen = nk_get16(b + 12);
	if (b[0] == NK_NETCACHE_OP_CACHE_UPDATE && vlen > NK_NETCACHE_MAX_CACHED_VALUE)
		return NK_WIRE_EVALUE;
	size_t area = netcache_value_area(vlen);
	int rc = check_total(len, NK_NETCACHE_HDR_LEN + area);
	if (rc)
		return rc;
	if (!all_zero(b + NK_NETCACHE_HDR_LEN + vlen, area - vlen))
		return NK_WIRE_EFIELD;

	m->op = b[0];
	m->result = b[1];
	m->flags = b[2];
	m->key_len = key_len;
	m->req_id = nk_get32(b + 4);
	m->client_id = nk_get16(b + 8);
	m->server_id = b[10];
	m->load = nk_get16(b + 14);
	m->send_ns = nk_get64(b + 16);
	memcpy(m->key, b + 24, key_len);
	m->value_len = vlen;
	m->value = vlen ? b + NK_NETCACHE_HDR_LEN : NULL;
	return 0;
}

static int netcache_size(const struct nk_msg *m)
{
	if (!netcache_ops.kind1[m->op])
		return NK_WIRE_EOP;
	if (m->key_len > NK_NETCACHE_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	if (m->value_len > UINT16_MAX)
		return NK_WIRE_EVALUE;
	if (m->op == NK_NETCACHE_OP_CACHE_UPDATE &&
	    m->value_len > NK_NETCACHE_MAX_CACHED_VALUE)
		return NK_WIRE_EVALUE;
	return (int)(NK_NETCACHE_HDR_LEN + netcache_value_area(m->value_len));
}

static void netcache_encode(const struct nk_msg *m, uint8_t *b)
{
	size_t area = netcache_value_area(m->value_len);
	b[0] = m->op;
	b[1] = m->result;
	b[2] = m->flags;
	b[3] = m->key_len;
	nk_put32(b + 4, m->req_id);
	nk_put16(b + 8, m->client_id);
	b[10] = m->server_id;
	b[11] = 0;
	nk_put16(b + 12, (uint16_t)m->value_len);
	nk_put16(b + 14, m->load);
	nk_put64(b + 16, m->send_ns);
	memset(b + 24, 0, NK_NETCACHE_KEY_LEN);
	memcpy(b + 24, m->key, m->key_len);
	put_bytes(b + NK_NETCACHE_HDR_LEN, m->value, m->value_len);
	memset(b + NK_NETCACHE_HDR_LEN + m->value_len, 0, area - m->value_len);
}

/* ==== KVSwitch =========================================================== */

static int kvswitch_decode(const uint8_t *b, size_t len, struct nk_msg *m)
{
	if (len < NK_KVSWITCH_HDR_LEN)
		return NK_WIRE_ETRUNC;
	if (!kvswitch_ops.kind1[b[0]])
		return NK_WIRE_EOP;
	uint16_t vlen = nk_get16(b + 2);
	int rc = check_total(len, (size_t)NK_KVSWITCH_HDR_LEN + vlen);
	if (rc)
		return rc;

	m->op = b[0];
	m->result = b[1];
	m->value_len = vlen;
	m->req_id = nk_get32(b + 4);
	m->ver = nk_get32(b + 8);
	m->key_len = NK_KVSWITCH_KEY_LEN;
	memcpy(m->key, b + 12, NK_KVSWITCH_KEY_LEN);
	m->value = vlen ? b + NK_KVSWITCH_HDR_LEN : NULL;
	return 0;
}

static int kvswitch_size(const struct nk_msg *m)
{
	if (!kvswitch_ops.kind1[m->op])
		return NK_WIRE_EOP;
	if (m->key_len != NK_KVSWITCH_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	if (m->value_len > UINT16_MAX)
		return NK_WIRE_EVALUE;
	if (m->ver > UINT32_MAX)   /* VER is 32 bits: never truncate a version */
		return NK_WIRE_EFIELD;
	return (int)(NK_KVSWITCH_HDR_LEN + m->value_len);
}

static void kvswitch_encode(const struct nk_msg *m, uint8_t *b)
{
	b[0] = m->op;
	b[1] = m->result;
	nk_put16(b + 2, (uint16_t)m->value_len);
	nk_put32(b + 4, m->req_id);
	nk_put32(b + 8, (uint32_t)m->ver);
	memcpy(b + 12, m->key, NK_KVSWITCH_KEY_LEN);
	put_bytes(b + NK_KVSWITCH_HDR_LEN, m->value, m->value_len);
}

/* ==== StarCache ========================================================== */

static int starcache_decode(const uint8_t *b, size_t len, struct nk_msg *m)
{
	const size_t fixed = NK_STARCACHE_HDR_LEN + NK_STARCACHE_PAYLOAD_HDR_LEN;
	if (len < fixed)
		return NK_WIRE_ETRUNC;
	if (!starcache_ops.kind1[b[0]])
		return NK_WIRE_EOP;
	uint16_t klen = nk_get16(b + 28);
	uint16_t vlen = nk_get16(b + 30);
	uint8_t flag = b[21], frag = b[32];
	if (klen > NK_MAX_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	/* FRAG indexes the FLAG packets of an item (FLAG 0 = single packet);
	 * RESULT is OK, NOT_FOUND or RETRY */
	if (b[33] > NK_RESULT_RETRY || frag >= (flag ? flag : 1))
		return NK_WIRE_EFIELD;
	int rc = check_total(len, fixed + klen + vlen);
	if (rc)
		return rc;

	m->op = b[0];
	m->req_id = nk_get32(b + 1);
	m->hkey[0] = nk_get64(b + 5);
	m->hkey[1] = nk_get64(b + 13);
	m->frag_cnt = flag;
	m->flags = b[22];           /* CACHED */
	m->send_ns = nk_get32(b + 23); /* LAT: low 32 bits of the send time */
	m->server_id = b[27];       /* PARID */
	m->frag_idx = frag;
	m->result = b[33];
	m->key_len = (uint8_t)klen;
	memcpy(m->key, b + fixed, klen);
	m->value_len = vlen;
	m->value = vlen ? b + fixed + klen : NULL;
	return 0;
}

static int starcache_size(const struct nk_msg *m)
{
	if (!starcache_ops.kind1[m->op])
		return NK_WIRE_EOP;
	if (m->key_len > NK_MAX_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	if (m->value_len > UINT16_MAX)
		return NK_WIRE_EVALUE;
	if (m->frag_idx >= (m->frag_cnt ? m->frag_cnt : 1) || m->result > NK_RESULT_RETRY)
		return NK_WIRE_EFIELD;
	return (int)(NK_STARCACHE_HDR_LEN + NK_STARCACHE_PAYLOAD_HDR_LEN +
		     m->key_len + m->value_len);
}

static void starcache_encode(const struct nk_msg *m, uint8_t *b)
{
	const size_t fixed = NK_STARCACHE_HDR_LEN + NK_STARCACHE_PAYLOAD_HDR_LEN;
	b[0] = m->op;
	nk_put32(b + 1, m->req_id);
	nk_put64(b + 5, m->hkey[0]);
	nk_put64(b + 13, m->hkey[1]);
	b[21] = m->frag_cnt;
	b[22] = m->flags;
	nk_put32(b + 23, (uint32_t)m->send_ns);   /* LAT wraps every 4.29 s */
	b[27] = m->server_id;
	nk_put16(b + 28, m->key_len);
	nk_put16(b + 30, (uint16_t)m->value_len);
	b[32] = m->frag_idx;
	b[33] = m->result;
	memcpy(b + fixed, m->key, m->key_len);
	put_bytes(b + fixed + m->key_len, m->value, m->value_len);
}

/* ==== NetLR ============================================================== */

static int netlr_has_value(uint8_t op)
{
	/* Hermes' INV carries the written value to every replica */
	return op == NK_NETLR_OP_WRITE || op == NK_NETLR_OP_R_REPLY || op == NK_NETLR_OP_INV;
}

static int netlr_decode(const uint8_t *b, size_t len, struct nk_msg *m)
{
	int rc = check_total(len, NK_NETLR_LEN);
	if (rc)
		return rc;
	if (!netlr_ops.kind1[b[0]])
		return NK_WIRE_EOP;
	int has_value = netlr_has_value(b[0]);
	if (!has_value && !all_zero(b + 20, NK_NETLR_VALUE_LEN))
		return NK_WIRE_EFIELD;

	m->op = b[0];
	m->keyhash = nk_get32(b + 1);
	m->ver = nk_get32(b + 5);
	m->key_len = NK_NETLR_OID_LEN;
	memcpy(m->key, b + 9, NK_NETLR_OID_LEN);   /* oid, big-endian */
	m->req_id = nk_get32(b + 13);
	m->epoch = nk_get16(b + 17);
	m->flags = b[19];
	m->value_len = has_value ? NK_NETLR_VALUE_LEN : 0;
	m->value = has_value ? b + 20 : NULL;
	return 0;
}

static int netlr_size(const struct nk_msg *m)
{
	if (!netlr_ops.kind1[m->op])
		return NK_WIRE_EOP;
	if (m->key_len != NK_NETLR_OID_LEN)
		return NK_WIRE_EKEYLEN;
	if (m->ver > UINT32_MAX)
		return NK_WIRE_EFIELD;
	if (m->value_len != (netlr_has_value(m->op) ? NK_NETLR_VALUE_LEN : 0))
		return NK_WIRE_EVALUE;
	return NK_NETLR_LEN;
}

static void netlr_encode(const struct nk_msg *m, uint8_t *b)
{
	b[0] = m->op;
	nk_put32(b + 1, m->keyhash);
	nk_put32(b + 5, (uint32_t)m->ver);
	memcpy(b + 9, m->key, NK_NETLR_OID_LEN);
	nk_put32(b + 13, m->req_id);
	nk_put16(b + 17, m->epoch);
	b[19] = m->flags;
	memset(b + 20, 0, NK_NETLR_VALUE_LEN);
	put_bytes(b + 20, m->value, m->value_len);
}

/* ==== NetMC ============================================================== */

enum netmc_items { NETMC_ONE_KEY, NETMC_ONE_PAIR, NETMC_KEYS, NETMC_PAIRS };

static enum netmc_items netmc_items_of(uint8_t op)
{
	switch (op) {
	case NK_NETMC_OP_GET:
	case NK_NETMC_OP_PUT_REPLY:
		return NETMC_ONE_KEY;
	case NK_NETMC_OP_PUT:
	case NK_NETMC_OP_GET_REPLY:
		return NETMC_ONE_PAIR;
	case NK_NETMC_OP_MGET:
		return NETMC_KEYS;
	default:
		return NETMC_PAIRS;
	}
}

/* Walk `npairs` pairs key[keylen] | vlen u16 | value over items[0..len)
 * (items NULL = all zeros). 0 if they fill it exactly. */
static int netmc_walk_pairs(const uint8_t *items, size_t len, unsigned keylen,
			    unsigned npairs)
{
	size_t off = 0;
	for (unsigned i = 0; i < npairs; i++) {
		if (len - off < (size_t)keylen + 2)
			return NK_WIRE_ETRUNC;
		uint16_t vlen = items ? nk_get16(items + off + keylen) : 0;
		off += (size_t)keylen + 2;
		if (len - off < vlen)
			return NK_WIRE_ETRUNC;
		off += vlen;
	}
	return off == len ? 0 : NK_WIRE_ELEN;
}

static int netmc_multi_fields_ok(uint8_t op, unsigned nslots, unsigned numkey,
				 unsigned startidx)
{
	if (nslots < 1 || nslots > NK_NETMC_MAX_KEYS)
		return 0;
	if (op == NK_NETMC_OP_MGET)
		return startidx + numkey <= nslots;   /* current group in the list */
	return numkey == nslots;                      /* reply: NUMKEY = pairs */
}

static int netmc_decode(const uint8_t *b, size_t len, struct nk_msg *m)
{
	const size_t fixed = NK_NETMC_HDR_LEN + NK_NETMC_PAYLOAD_HDR_LEN;
	const uint8_t *pre = b + NK_NETMC_HDR_LEN;
	if (len < fixed)
		return NK_WIRE_ETRUNC;
	uint8_t op = b[0];
	if (!netmc_ops.kind1[op])
		return NK_WIRE_EOP;
	uint8_t keylen = pre[0], nslots = pre[1];
	if (keylen < 1 || keylen > NK_MAX_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	if (pre[3] != 0)
		return NK_WIRE_EFIELD;

	const uint8_t *items = b + fixed;
	size_t rest = len - fixed;
	enum netmc_items shape = netmc_items_of(op);
	int rc;
	if (shape == NETMC_ONE_KEY || shape == NETMC_ONE_PAIR) {
		if (nslots != 1)
			return NK_WIRE_EFIELD;
		if (shape == NETMC_ONE_KEY) {
			rc = check_total(rest, keylen);
		} else {
			if (rest < (size_t)keylen + 2)
				return NK_WIRE_ETRUNC;
			rc = check_total(rest, (size_t)keylen + 2 + nk_get16(items + keylen));
		}
		if (rc)
			return rc;
		m->key_len = keylen;
		memcpy(m->key, items, keylen);
		if (shape == NETMC_ONE_PAIR) {
			m->value_len = nk_get16(items + keylen);
			m->value = m->value_len ? items + keylen + 2 : NULL;
		}
	} else {
		if (!netmc_multi_fields_ok(op, nslots, b[6], b[11]))
			return NK_WIRE_EFIELD;
		if (shape == NETMC_KEYS)
			rc = check_total(rest, (size_t)nslots * keylen);
		else
			rc = netmc_walk_pairs(items, rest, keylen, nslots);
		if (rc)
			return rc;
		if (rest > UINT16_MAX)
			return NK_WIRE_ELEN;
		m->items = items;
		m->items_len = (uint16_t)rest;
	}

	m->op = op;
	m->req_id = nk_get32(b + 1);
	m->oid = b[5];
	m->nkeys = b[6];
	m->keyidx = nk_get32(b + 7);
	m->startidx = b[11];
	m->clo = b[12];
	memcpy(m->srv, b + 13, NK_NETMC_N);
	m->key_slot_len = keylen;
	m->key_slots = nslots;
	m->result = pre[2];
	m->send_ns = nk_get64(pre + 4);
	return 0;
}

static int netmc_size(const struct nk_msg *m)
{
	if (!netmc_ops.kind1[m->op])
		return NK_WIRE_EOP;
	if (m->key_slot_len < 1 || m->key_slot_len > NK_MAX_KEY_LEN)
		return NK_WIRE_EKEYLEN;
	size_t total = NK_NETMC_HDR_LEN + NK_NETMC_PAYLOAD_HDR_LEN;
	switch (netmc_items_of(m->op)) {
	case NETMC_ONE_KEY:
	case NETMC_ONE_PAIR:
		if (m->key_len != m->key_slot_len)
			return NK_WIRE_EKEYLEN;
		total += m->key_len;
		if (netmc_items_of(m->op) == NETMC_ONE_PAIR) {
			if (m->value_len > UINT16_MAX)
				return NK_WIRE_EVALUE;
			total += 2 + (size_t)m->value_len;
		}
		return (int)total;
	case NETMC_KEYS:
		if (!netmc_multi_fields_ok(m->op, m->key_slots, m->nkeys, m->startidx))
			return NK_WIRE_EFIELD;
		if (m->items_len != (size_t)m->key_slots * m->key_slot_len)
			return NK_WIRE_ELEN;
		return (int)(total + m->items_len);
	case NETMC_PAIRS:
	default:
		if (!netmc_multi_fields_ok(m->op, m->key_slots, m->nkeys, m->startidx))
			return NK_WIRE_EFIELD;
		if (!m->items) {
			/* lengths only (the simulator): room for every pair's key
			 * and vlen; netmc_encode puts the value bytes on the last */
			if (m->items_len < (size_t)m->key_slots * ((size_t)m->key_slot_len + 2))
				return NK_WIRE_ELEN;
		} else if (netmc_walk_pairs(m->items, m->items_len, m->key_slot_len,
					    m->key_slots)) {
			return NK_WIRE_ELEN;
		}
		return (int)(total + m->items_len);
	}
}

static void netmc_encode(const struct nk_msg *m, uint8_t *b)
{
	uint8_t *pre = b + NK_NETMC_HDR_LEN;
	uint8_t *items = pre + NK_NETMC_PAYLOAD_HDR_LEN;
	enum netmc_items shape = netmc_items_of(m->op);
	b[0] = m->op;
	nk_put32(b + 1, m->req_id);
	b[5] = m->oid;
	b[6] = m->nkeys;
	nk_put32(b + 7, m->keyidx);
	b[11] = m->startidx;
	b[12] = m->clo;
	memcpy(b + 13, m->srv, NK_NETMC_N);
	pre[0] = m->key_slot_len;
	pre[1] = (shape == NETMC_KEYS || shape == NETMC_PAIRS) ? m->key_slots : 1;
	pre[2] = m->result;
	pre[3] = 0;
	nk_put64(pre + 4, m->send_ns);
	if (shape == NETMC_PAIRS && !m->items) {
		/* a lengths-only pair list: zero keys, every value byte on the
		 * last pair, so the packet decodes with its stated length */
		size_t fixed = (size_t)m->key_slots * ((size_t)m->key_slot_len + 2);
		memset(items, 0, m->items_len);
		nk_put16(items + fixed - 2, (uint16_t)(m->items_len - fixed));
		return;
	}
	if (shape == NETMC_KEYS || shape == NETMC_PAIRS) {
		put_bytes(items, m->items, m->items_len);
		return;
	}
	memcpy(items, m->key, m->key_len);
	if (shape == NETMC_ONE_PAIR) {
		nk_put16(items + m->key_len, (uint16_t)m->value_len);
		put_bytes(items + m->key_len + 2, m->value, m->value_len);
	}
}

int nk_wire_netmc_next_pair(const struct nk_msg *m, size_t *off,
			    const uint8_t **key, const uint8_t **value,
			    uint16_t *vlen)
{
	if (!m || !off || !key || !value || !vlen || !m->items ||
	    m->proto != NK_PROTO_NETMC || m->op != NK_NETMC_OP_MGET_REPLY)
		return NK_WIRE_EINVAL;
	size_t len = m->items_len, keylen = m->key_slot_len;
	if (*off >= len)
		return *off == len ? 0 : NK_WIRE_EINVAL;
	if (len - *off < keylen + 2)
		return NK_WIRE_ETRUNC;
	uint16_t n = nk_get16(m->items + *off + keylen);
	if (len - *off - keylen - 2 < n)
		return NK_WIRE_ETRUNC;
	*key = m->items + *off;
	*vlen = n;
	*value = m->items + *off + keylen + 2;
	*off += keylen + 2 + n;
	return 1;
}

/* ==== dispatch =========================================================== */

unsigned nk_wire_has(enum nk_proto proto)
{
	switch (proto) {
	case NK_PROTO_PLAIN:
	case NK_PROTO_PEGASUS:
		return NK_WIRE_HAS_KEYHASH | NK_WIRE_HAS_REPLIER;
	case NK_PROTO_NETLR:
		return NK_WIRE_HAS_KEYHASH;
	case NK_PROTO_NETCACHE:
	case NK_PROTO_STARCACHE:        /* HKEY instead of a keyhash; PARID */
		return NK_WIRE_HAS_REPLIER;
	default:        /* KVSwitch, NetMC */
		return 0;
	}
}

uint32_t nk_wire_store_keyhash(const struct nk_msg *m)
{
	if (nk_wire_has((enum nk_proto)m->proto) & NK_WIRE_HAS_KEYHASH)
		return m->keyhash;
	return nk_djb2(m->key, m->key_len < NK_MAX_KEY_LEN ? m->key_len : NK_MAX_KEY_LEN);
}

int nk_wire_decode(enum nk_proto proto, const uint8_t *buf, size_t len,
		   struct nk_msg *out)
{
	if (!out || (!buf && len))
		return NK_WIRE_EINVAL;
	if ((unsigned)proto >= NK_PROTO_COUNT)
		return NK_WIRE_EPROTO;
	memset(out, 0, sizeof *out);
	out->proto = (uint8_t)proto;
	out->server_id = NK_SERVER_NONE;   /* defaults for fields not carried */
	out->frag_cnt = 1;
	if (!buf)
		return NK_WIRE_ETRUNC;

	int rc;
	switch (proto) {
	case NK_PROTO_PLAIN:
	case NK_PROTO_PEGASUS:
		rc = pegasus_decode(proto, buf, len, out);
		break;
	case NK_PROTO_NETCACHE:
		rc = netcache_decode(buf, len, out);
		break;
	case NK_PROTO_KVSWITCH:
		rc = kvswitch_decode(buf, len, out);
		break;
	case NK_PROTO_STARCACHE:
		rc = starcache_decode(buf, len, out);
		break;
	case NK_PROTO_NETLR:
		rc = netlr_decode(buf, len, out);
		break;
	case NK_PROTO_NETMC:
		rc = netmc_decode(buf, len, out);
		break;
	default:
		return NK_WIRE_EPROTO;
	}
	if (rc)
		return rc;
	out->kind = (uint8_t)nk_wire_kind(proto, out->op);
	return 0;
}

nk_wire_size_fn nk_wire_size_of(uint8_t proto)
{
	switch ((enum nk_proto)proto) {
	case NK_PROTO_PLAIN:
	case NK_PROTO_PEGASUS:
		return pegasus_size;
	case NK_PROTO_NETCACHE:
		return netcache_size;
	case NK_PROTO_KVSWITCH:
		return kvswitch_size;
	case NK_PROTO_STARCACHE:
		return starcache_size;
	case NK_PROTO_NETLR:
		return netlr_size;
	case NK_PROTO_NETMC:
		return netmc_size;
	default:
		return NULL;
	}
}

int nk_wire_encoded_len(const struct nk_msg *m)
{
	if (!m)
		return NK_WIRE_EINVAL;
	nk_wire_size_fn f = nk_wire_size_of(m->proto);
	return f ? f(m) : NK_WIRE_EPROTO;
}

int nk_wire_encode(const struct nk_msg *m, uint8_t *buf, size_t cap)
{
	int size = nk_wire_encoded_len(m);
	if (size < 0)
		return size;
	if (!buf)
		return NK_WIRE_EINVAL;
	if ((size_t)size > cap)
		return NK_WIRE_ESPACE;
	switch ((enum nk_proto)m->proto) {
	case NK_PROTO_PLAIN:
	case NK_PROTO_PEGASUS:
		pegasus_encode(m, buf);
		break;
	case NK_PROTO_NETCACHE:
		netcache_encode(m, buf);
		break;
	case NK_PROTO_KVSWITCH:
		kvswitch_encode(m, buf);
		break;
	case NK_PROTO_STARCACHE:
		starcache_encode(m, buf);
		break;
	case NK_PROTO_NETLR:
		netlr_encode(m, buf);
		break;
	case NK_PROTO_NETMC:
		netmc_encode(m, buf);
		break;
	default:
		return NK_WIRE_EPROTO;
	}
	return size;
}
