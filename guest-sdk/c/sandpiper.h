/*
 * Sandpiper's C helper layer: the Rust SDK's friendly view of a call (hosts
 * by index, the VM, typed parameters, rejections grouped by reason) over the
 * bindings that `sandpiper-c-component bindings` generates from
 * `wit/0.2.0/policy.wit` (`sandpiper:policy@0.2.0`; always as `bindings.h`,
 * whatever the world).
 *
 * A unit implements the world's exported functions and, in each call, opens
 * a context over the request:
 *
 *     static const sp_unit_t UNIT = { "Example", "Says no to hosts that are down.",
 *                                     NULL, 0, SANDPIPER_POLICY_TYPES_SCORE_ORDER_LOWER_IS_BETTER,
 *                                     NULL, 0 };
 *
 *     void exports_sandpiper_policy_metadata_info(
 *         exports_sandpiper_policy_metadata_unit_info_t *ret) {
 *       sp_unit_info(&UNIT, ret);
 *     }
 *
 *     void exports_sandpiper_policy_filter_filter(
 *         exports_sandpiper_policy_filter_request_t *request,
 *         bindings_list_u32_t *candidates,
 *         exports_sandpiper_policy_filter_list_rejection_t *ret) {
 *       sp_context_t cx;
 *       sp_context_init(&cx, request, &UNIT);
 *       sp_rejections_t rejections;
 *       sp_rejections_init(&rejections);
 *       const sandpiper_policy_types_host_status_t *status = sp_host_statuses(&cx);
 *       for (size_t i = 0; i < candidates->len; i++) {
 *         uint32_t host = candidates->ptr[i];
 *         if (status[host] != SANDPIPER_POLICY_TYPES_HOST_STATUS_UP)
 *           sp_reject(&rejections, host, "not up");
 *       }
 *       sp_rejections_finish(&rejections, &ret->ptr, &ret->len);
 *       sp_context_free(&cx);
 *       exports_sandpiper_policy_filter_request_free(request);
 *       bindings_list_u32_free(candidates);
 *     }
 *
 * Columns are fetched from the host the first time the call reads them and
 * kept until `sp_context_free` (the snapshot never changes within a call).
 * Column pointers index hosts directly and have `sp_host_count` rows; the
 * host only sends candidate indices inside the snapshot. Allocation failure
 * aborts, which traps the call: the host reports it and drops the instance.
 */
#ifndef SANDPIPER_H
#define SANDPIPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bindings.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of cases of the WIT enums the context caches columns for. */
#define SP_HOST_METRIC_COUNT (SANDPIPER_POLICY_TYPES_HOST_METRIC_TSC_FREQUENCY_HZ + 1)
#define SP_HOST_FLAG_COUNT (SANDPIPER_POLICY_TYPES_HOST_FLAG_TSC_SCALING + 1)
#define SP_HOST_TEXT_COUNT (SANDPIPER_POLICY_TYPES_HOST_TEXT_CPU_MODEL + 1)
#define SP_HOST_LABEL_KIND_COUNT (SANDPIPER_POLICY_TYPES_HOST_LABEL_KIND_CLUSTER_LEVELS + 1)
#define SP_CELL_METRIC_COUNT (SANDPIPER_POLICY_TYPES_CELL_METRIC_SHARED_VCPUS_USED + 1)
#define SP_PCPU_FLAG_COUNT (SANDPIPER_POLICY_TYPES_PCPU_FLAG_PINNED + 1)

/* A string the unit borrows (from the request or a column); not terminated. */
typedef bindings_string_t sp_str_t;

/* One declared parameter (oVirt's unit properties). */
typedef struct sp_param_decl {
  const char *name;
  const char *description;
  /* Used when neither cluster nor policy sets a value. */
  const char *default_value;
  /* Regular expression the whole value must match (Rust `regex` syntax). */
  const char *pattern;
} sp_param_decl_t;

/* A request property a unit depends on (`types.request-property`): `tag`
 * is a SANDPIPER_POLICY_TYPES_REQUEST_PROPERTY_* case, `key` the hint key,
 * extra spec prefix or image property of the cases that carry one (else
 * NULL). */
typedef struct sp_property {
  uint8_t tag;
  const char *key;
} sp_property_t;

/* What the unit says about itself, as static data. */
typedef struct sp_unit {
  const char *name;
  const char *description;
  const sp_param_decl_t *params;
  size_t param_count;
  sandpiper_policy_types_score_order_t score_order;
  /* The requests the unit has something to say about (`types.applies-to`):
   * those with at least one of these properties; none (`NULL, 0`) means
   * every request. For any other request the unit promises its filter
   * rejects nothing and its score is the same for every candidate, so the
   * host skips the call. */
  const sp_property_t *applies_to;
  size_t applies_to_count;
  /* The unit judges each host on its own (`unit-info.per-host`): its answer
   * for a host depends only on that host and the request, apart from the
   * VM's id and name, so the host may reuse it while neither changes. */
  bool per_host;
} sp_unit_t;

/* Fills `ret` (owned by the caller, freed by the generated post-return). */
void sp_unit_info(const sp_unit_t *unit, sandpiper_policy_types_unit_info_t *ret);

/* Everything one filter or score call reads, with the columns it fetched. */
typedef struct sp_context {
  const sandpiper_policy_types_request_t *request;
  const sp_unit_t *unit;
  /* Filled on first use; `fetched_*` says which. */
  uint32_t host_count;
  bool fetched_host_count;
  bindings_list_f64_t host_metrics[SP_HOST_METRIC_COUNT];
  bool fetched_host_metrics[SP_HOST_METRIC_COUNT];
  sandpiper_policy_inventory_list_host_status_t host_statuses;
  bool fetched_host_statuses;
  bindings_list_u8_t host_flags[SP_HOST_FLAG_COUNT];
  bool fetched_host_flags[SP_HOST_FLAG_COUNT];
  sandpiper_policy_types_interned_t host_texts[SP_HOST_TEXT_COUNT];
  bool fetched_host_texts[SP_HOST_TEXT_COUNT];
  sandpiper_policy_types_labels_t host_labels[SP_HOST_LABEL_KIND_COUNT];
  bool fetched_host_labels[SP_HOST_LABEL_KIND_COUNT];
  /* Hardware (new in 0.2.0). */
  sandpiper_policy_types_numa_topology_t numa_cells;
  bool fetched_numa_cells;
  bindings_list_f64_t cell_metrics[SP_CELL_METRIC_COUNT];
  bool fetched_cell_metrics[SP_CELL_METRIC_COUNT];
  sandpiper_policy_types_cell_cpus_t cell_cpus;
  bool fetched_cell_cpus;
  bindings_list_u8_t pcpu_flags[SP_PCPU_FLAG_COUNT];
  bool fetched_pcpu_flags[SP_PCPU_FLAG_COUNT];
  sandpiper_policy_types_cell_pages_t cell_pages;
  bool fetched_cell_pages;
  sandpiper_policy_types_cell_distances_t cell_distances;
  bool fetched_cell_distances;
  sandpiper_policy_types_pci_pools_t device_pools;
  bool fetched_device_pools;
  sandpiper_policy_types_labels_t device_pool_labels;
  bool fetched_device_pool_labels;
  sandpiper_policy_types_mdev_offers_t mdev_offers;
  bool fetched_mdev_offers;
} sp_context_t;

/* Opens a context over `request` (which stays the caller's). */
void sp_context_init(sp_context_t *cx, const sandpiper_policy_types_request_t *request,
                     const sp_unit_t *unit);
/* Frees the columns the call fetched. */
void sp_context_free(sp_context_t *cx);

/* Strings. */
bool sp_str_eq(sp_str_t a, sp_str_t b);
bool sp_str_eq_c(sp_str_t a, const char *b);
sp_str_t sp_str(const char *text);
/* String `index` of a WIT `strings` table (one UTF-8 text plus offsets),
 * borrowed from it; false (and "") when out of range or malformed. */
bool sp_strings_get(const sandpiper_policy_types_strings_t *table, uint32_t index, sp_str_t *value);

/* Hosts: whole columns (each `sp_host_count` rows) ... */
uint32_t sp_host_count(sp_context_t *cx);
const double *sp_host_metric(sp_context_t *cx, sandpiper_policy_types_host_metric_t metric);
const sandpiper_policy_types_host_status_t *sp_host_statuses(sp_context_t *cx);
/* A yes/no column: 1 for yes, 0 for no, per host. */
const uint8_t *sp_host_flags(sp_context_t *cx, sandpiper_policy_types_host_flag_t flag);
const sandpiper_policy_types_interned_t *sp_host_texts(sp_context_t *cx,
                                                       sandpiper_policy_types_host_text_t text);
const sandpiper_policy_types_labels_t *sp_host_labels(sp_context_t *cx,
                                                      sandpiper_policy_types_host_label_kind_t kind);

/* ... and one host's row: NaN, false, "" or "absent" outside the snapshot. */
double sp_host_metric_at(sp_context_t *cx, uint32_t host, sandpiper_policy_types_host_metric_t metric);
bool sp_host_is_up(sp_context_t *cx, uint32_t host);
sp_str_t sp_host_text(sp_context_t *cx, uint32_t host, sandpiper_policy_types_host_text_t text);
/* The first value of `key` in the host's pairs of `kind`; false when absent. */
bool sp_host_label(sp_context_t *cx, uint32_t host, sandpiper_policy_types_host_label_kind_t kind,
                   sp_str_t key, sp_str_t *value);
/* The host's capability `key` (its first value if it repeats); false when absent. */
bool sp_host_capability(sp_context_t *cx, uint32_t host, sp_str_t key, sp_str_t *value);
/* Whether the host's CPU has feature flag `flag`. */
bool sp_host_has_cpu_flag(sp_context_t *cx, uint32_t host, sp_str_t flag);

/* Hardware (new in 0.2.0): flat columns in compressed rows over the
 * cluster's NUMA cells, their CPUs and the hosts' device pools, as the WIT
 * sends them (`types.numa-topology` and after). Cells, CPUs and pools are
 * numbered across the cluster; a row's range is `offsets[row]` up to
 * `offsets[row + 1]` (`sp_row`). */
const sandpiper_policy_types_numa_topology_t *sp_numa_cells(sp_context_t *cx);
/* One value per cell. */
const double *sp_cell_metric(sp_context_t *cx, sandpiper_policy_types_cell_metric_t metric);
const sandpiper_policy_types_cell_cpus_t *sp_cell_cpus(sp_context_t *cx);
/* 1 or 0 per entry of `sp_cell_cpus`. */
const uint8_t *sp_pcpu_flags(sp_context_t *cx, sandpiper_policy_types_pcpu_flag_t flag);
const sandpiper_policy_types_cell_pages_t *sp_cell_pages(sp_context_t *cx);
const sandpiper_policy_types_cell_distances_t *sp_cell_distances(sp_context_t *cx);
const sandpiper_policy_types_pci_pools_t *sp_device_pools(sp_context_t *cx);
/* Each pool's tags, one row per pool. */
const sandpiper_policy_types_labels_t *sp_device_pool_labels(sp_context_t *cx);
const sandpiper_policy_types_mdev_offers_t *sp_mdev_offers(sp_context_t *cx);
/* Row `row` of a compressed-row `offsets` list as [*start, *end); false
 * (and an empty range) when out of range or malformed. */
bool sp_row(const bindings_list_u32_t *offsets, uint32_t row, uint32_t *start, uint32_t *end);
/* The host's NUMA cells as cluster-wide cell indices [*start, *end). */
bool sp_host_cells(sp_context_t *cx, uint32_t host, uint32_t *start, uint32_t *end);

/* The VM's extra spec `key` (its first value); false when absent. */
bool sp_extra_spec(const sp_context_t *cx, sp_str_t key, sp_str_t *value);

/* Parameters: the request's value, else the declared default. The host has
 * already checked values against their patterns, so a failure is the unit's
 * own mistake; `sp_param_error` words it like the Rust SDK. */
typedef enum sp_param_status {
  SP_PARAM_OK = 0,
  /* Neither given nor declared. */
  SP_PARAM_MISSING,
  /* Does not parse as the type asked for. */
  SP_PARAM_INVALID,
} sp_param_status_t;

sp_param_status_t sp_param_str(const sp_context_t *cx, const char *name, sp_str_t *value);
sp_param_status_t sp_param_u32(const sp_context_t *cx, const char *name, uint32_t *value);
sp_param_status_t sp_param_f64(const sp_context_t *cx, const char *name, double *value);
sp_param_status_t sp_param_bool(const sp_context_t *cx, const char *name, bool *value);
/* Writes the message for a failed `sp_param_<type>` into `buffer` (always
 * terminated); `expected` is what the type reads as, e.g. "an unsigned
 * 32-bit integer". */
void sp_param_error(const sp_context_t *cx, const char *name, sp_param_status_t status,
                    const char *expected, char *buffer, size_t size);
#define SP_EXPECTED_U32 "an unsigned 32-bit integer"
#define SP_EXPECTED_F64 "a finite number"
#define SP_EXPECTED_BOOL "`true` or `false`"

/* A filter's answer: rejected hosts grouped by reason, reasons in the order
 * they first appeared; a host already rejected keeps its first reason. A
 * reason whose figures vary by host is best sent as a template and figures
 * (`sp_reject_with`): the host writes the sentences only when someone reads
 * them. */
typedef struct sp_rejections {
  sandpiper_policy_types_rejection_t *groups;
  size_t len;
  size_t capacity;
  /* Per group: whether it is a template (the same text is a plain sentence
   * without figures and a template with them), and its figures' capacity. */
  bool *is_template;
  size_t *figure_capacity;
  /* One bit per host index already rejected. */
  uint64_t *rejected;
  size_t rejected_words;
} sp_rejections_t;

void sp_rejections_init(sp_rejections_t *rejections);
/* Rejects `host` for `reason` (copied); false when it was already rejected. */
bool sp_reject(sp_rejections_t *rejections, uint32_t host, const char *reason);
/* Rejects `host` for `template` (copied) with its own `count` figures, one
 * per `{}` of the template (a doubled brace is a brace); false when it was
 * already rejected. */
bool sp_reject_with(sp_rejections_t *rejections, uint32_t host, const char *template_,
                    const double *figures, size_t count);
bool sp_is_rejected(const sp_rejections_t *rejections, uint32_t host);
/* Hands the groups to the export's return value and frees the rest. */
void sp_rejections_finish(sp_rejections_t *rejections, sandpiper_policy_types_rejection_t **ptr,
                          size_t *len);

/* A score unit's answer: `count` values to fill, no clamping. */
double *sp_scores_init(sandpiper_policy_types_scores_t *ret, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* SANDPIPER_H */
