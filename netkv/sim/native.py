"""cffi (ABI mode) declarations of libnetkv's simulator API.

The declarations mirror ``hostapps/include/netkv/{msg,workload,sim}.h``; at
load time every struct's size is checked against the library's own
``nk_sim_abi_sizeof`` so that a header change without a matching change here
fails loudly instead of corrupting memory.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import cffi

from netkv.native import library_path

CDEF = """
struct nk_msg {
    uint8_t proto; uint8_t op; uint8_t kind; uint8_t flags; uint8_t result;
    uint8_t server_id; uint16_t client_id; uint16_t load; uint16_t epoch;
    uint32_t req_id; uint32_t keyhash; uint64_t hkey[2]; uint64_t ver;
    uint32_t bitmap; uint64_t send_ns;
    uint8_t key_len; uint8_t key[64]; uint32_t value_len;
    uint8_t frag_idx; uint8_t frag_cnt;
    uint8_t nkeys; uint8_t oid; uint8_t startidx; uint8_t clo; uint32_t keyidx;
    uint8_t srv[32];
    const uint8_t *value;
    uint8_t key_slot_len; uint8_t key_slots; uint16_t items_len; const uint8_t *items;
    uint64_t cookie;
};

struct nk_workload_cfg {
    uint32_t kind; uint32_t n_keys; double alpha; uint64_t seed; uint32_t key_size;
    uint32_t n_servers; uint32_t vnodes; uint32_t ring_mode; uint32_t n_value_classes;
    uint32_t value_sizes[16]; double value_weights[16];
    const uint32_t *trace_keys; const uint8_t *trace_ops; uint64_t trace_len;
};

struct nk_rank_info {
    uint32_t key; uint32_t keyhash; uint16_t home; uint16_t vclass; uint32_t value_len;
};

struct nk_workload;
struct nk_workload *nk_workload_new(const struct nk_workload_cfg *cfg, char *err, size_t errlen);
void nk_workload_free(struct nk_workload *wl);
const struct nk_rank_info *nk_workload_rank_table(const struct nk_workload *wl);
struct nk_alias_entry { uint32_t thresh; uint32_t alias; };
const struct nk_alias_entry *nk_workload_alias_table(const struct nk_workload *wl);
struct nk_workload *nk_workload_from_tables(const struct nk_workload_cfg *cfg,
                                            const struct nk_rank_info *ranks,
                                            const struct nk_alias_entry *alias, char *err,
                                            size_t errlen);
void nk_key_bytes(uint64_t id, unsigned key_size, uint8_t *out);
uint32_t nk_key_hash(uint64_t id, unsigned key_size);
uint32_t nk_djb2(const uint8_t *key, size_t len);

struct nk_sim_cfg {
    const char *protocol; const char *params;
    uint32_t n_servers; uint32_t n_clients; uint64_t seed;
    double offered_rps; double duration_s; double drain_s; double write_ratio;
    double link_latency_ns; double link_gbps; double switch_latency_ns; double recirc_gbps;
    uint32_t frame_overhead; uint32_t cpu_queue;
    uint32_t workers; uint32_t service; double service_ns; double per_byte_ns;
    double lognormal_sigma; const double *capacity; uint32_t queue_limit; uint32_t dispatch;
    double client_cpu_ns; double timeout_ns; uint32_t retries;
    double client_tx_ns; double client_key_ns; double client_rx_ns; double client_pair_ns;
    double per_key_ns; uint32_t mget_max; const double *mget_weights;
    uint32_t n_coords; uint32_t coord_cores;
    double loss; double duplicate; double reorder; double reorder_ns; double extra_delay_ns;
    uint32_t fault_links;
    uint32_t dyn_kind; double dyn_period_s; uint32_t dyn_count; uint32_t dyn_hot_pool;
    double window_s; uint32_t record_history;
    uint32_t hostile_clients; double hostile_rps;
    double client_max_rps; double switch_mpps; double tx_ns;
    uint32_t client_cores; uint32_t racks;
};

struct nk_sim_stats {
    double now_s; int finished; uint64_t events;
    uint64_t issued; uint64_t completed; uint64_t timeouts; uint64_t retries;
    uint64_t unfinished; uint64_t dup_replies; uint64_t switch_replies;
    uint64_t dropped; uint64_t drop_loss; uint64_t drop_queue; uint64_t drop_crash;
    uint64_t drop_switch; uint64_t drop_outage; uint64_t cpu_packets; uint64_t cpu_dropped;
    uint64_t dyn_changes;
    uint64_t hostile_sent; uint64_t forged_replies; uint64_t server_ignored;
    uint64_t client_packets; uint64_t req_keys; uint64_t recirculated; uint64_t switch_restarts;
    double mean_ns, p50_ns, p90_ns, p99_ns, p999_ns, max_ns;
    uint32_t n_windows; uint32_t hist_buckets;
    double server_p50_ns, server_p99_ns, switch_p50_ns, switch_p99_ns;
    uint64_t switch_packets;
    uint64_t completed_late;
};

struct nk_sim;
struct nk_sim *nk_sim_new(const struct nk_sim_cfg *cfg, const struct nk_workload *wl,
                          char *err, size_t errlen);
void nk_sim_free(struct nk_sim *sim);
int nk_sim_run_until(struct nk_sim *sim, double t_ns);
int nk_sim_extend(struct nk_sim *sim, double extra_ns);
void nk_sim_run(struct nk_sim *sim);
double nk_sim_now_ns(const struct nk_sim *sim);
double nk_sim_end_ns(const struct nk_sim *sim);
void nk_sim_stats(const struct nk_sim *sim, struct nk_sim_stats *out);
uint32_t nk_sim_hist(const struct nk_sim *sim, uint64_t *lower_ns, uint64_t *counts, uint32_t n);
void nk_sim_server_counts(const struct nk_sim *sim, uint64_t *out);
uint32_t nk_sim_link_bytes(const struct nk_sim *sim, uint64_t *up, uint64_t *down, uint32_t n);
uint32_t nk_sim_timeline(const struct nk_sim *sim, uint64_t *issued, uint64_t *completed,
                         uint64_t *lost, double *p50_ns, double *p99_ns, uint32_t n);
int nk_sim_reg_read(struct nk_sim *sim, const char *name, uint32_t idx, uint64_t *val);
int nk_sim_reg_read_range(struct nk_sim *sim, const char *name, uint32_t first, uint32_t count,
                          uint64_t *out);
int nk_sim_reg_write(struct nk_sim *sim, const char *name, uint32_t idx, uint64_t val);
int nk_sim_table_add(struct nk_sim *sim, const char *table, const uint64_t *key, unsigned nkey,
                     const uint64_t *args, unsigned nargs);
int nk_sim_table_del(struct nk_sim *sim, const char *table, const uint64_t *key, unsigned nkey);
int nk_sim_mcast_set(struct nk_sim *sim, uint32_t group, const uint16_t *ports, uint32_t n);
uint32_t nk_sim_cpu_recv(struct nk_sim *sim, struct nk_msg *out, uint16_t *src, uint32_t max);
int nk_sim_cpu_send(struct nk_sim *sim, const struct nk_msg *m, uint16_t dst);
int nk_sim_schedule_crash(struct nk_sim *sim, uint32_t server, double t_ns, double restart_ns);
int nk_sim_schedule_switch_outage(struct nk_sim *sim, double t_ns, double restart_ns);
uint32_t nk_sim_rank_keys(const struct nk_sim *sim, uint32_t *out, uint32_t n);
int nk_sim_server_up(const struct nk_sim *sim, uint32_t server);
int64_t nk_sim_store_merge(struct nk_sim *sim, uint32_t from, uint32_t to);
int64_t nk_sim_store_newest(const struct nk_sim *sim, uint32_t server);
int nk_sim_capture(struct nk_sim *sim, const char *dir, uint32_t snaplen, uint64_t max_bytes,
                   uint64_t max_packets, char *err, size_t errlen);
uint32_t nk_sim_capture_stats(struct nk_sim *sim, uint64_t *packets, uint64_t *missed,
                              uint64_t *busy_ns, uint32_t n);
uint32_t nk_sim_switches(const struct nk_sim *sim);
int nk_sim_select_switch(struct nk_sim *sim, uint32_t sw);
uint32_t nk_sim_switch_stats(const struct nk_sim *sim, uint64_t *packets, uint64_t *dropped,
                             uint64_t *up_bytes, uint64_t *down_bytes, uint32_t n);
uint32_t nk_sim_cpu_port(const struct nk_sim *sim);
uint32_t nk_sim_recirc_port(const struct nk_sim *sim);
size_t nk_sim_abi_sizeof(const char *name);
int nk_host_has_hostile(const char *name);
int nk_host_checks_client_id(const char *name);

struct nk_sim_op {
    uint64_t invoke_ns; uint64_t done_ns; uint64_t ver; uint32_t client; uint32_t key;
    uint32_t keyhash; uint8_t write; uint8_t outcome; uint8_t found; uint8_t rsvd;
};
uint64_t nk_sim_history(const struct nk_sim *sim, struct nk_sim_op *out, uint64_t n);
uint64_t nk_sim_version_owners(const struct nk_sim *sim, uint32_t *keyhash, uint64_t *ver,
                               uint64_t *owner, uint64_t n);
int nk_sim_server_ctl(struct nk_sim *sim, uint32_t server, const char *line, char *out,
                      size_t cap);
"""

CHECKED_STRUCTS = ("nk_msg", "nk_sim_cfg", "nk_sim_stats", "nk_workload_cfg", "nk_rank_info",
                   "nk_alias_entry", "nk_sim_op")

# enum values (workload.h, sim.h)
WL_KIND = {"zipf": 0, "uniform": 1, "ycsb": 2, "trace": 3}
RING_MODE = {"consistent": 0, "equal_ranges": 1, "hash_mod": 2}
DYN_KIND = {"none": 0, "hot-in": 1, "random": 2, "swap": 3}
SERVICE = {"deterministic": 0, "exponential": 1, "lognormal": 2}
DISPATCH = {"shared": 0, "by_key": 1}
FAULT_LINKS = {"all": 0, "clients": 1, "servers": 2}
OWNER_INITIAL = 2**64 - 1  # NK_SIM_OWNER_INITIAL: the preloaded value
OP_OPEN, OP_OK, OP_TIMEOUT = 0, 1, 2  # enum nk_sim_outcome


class AbiMismatch(RuntimeError):
    """The cffi declarations no longer match the C headers."""


@cache
def load() -> tuple[Any, Any]:
    """(ffi, lib) for libnetkv, with the struct layouts checked."""
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(library_path()))
    for name in CHECKED_STRUCTS:
        c_size = lib.nk_sim_abi_sizeof(name.encode())
        py_size = ffi.sizeof(f"struct {name}")
        if c_size != py_size:
            raise AbiMismatch(
                f"struct {name}: {py_size} bytes in netkv/sim/native.py, {c_size} in libnetkv "
                "(update the cdef to match the header)"
            )
    return ffi, lib
