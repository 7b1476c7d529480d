/*
 * Sandpiper's C helper layer; see sandpiper.h for what it offers and why.
 */
#include "sandpiper.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host indices below this are remembered in a bitset (at most 128 KiB);
 * larger ones, which no real cluster has, are looked up in the groups, so a
 * wild index cannot make the builder allocate half a gigabyte. */
#define SP_DENSE_INDEX_LIMIT (1u << 20)

/* The largest value `sp_param_u32` accepts. */
#define SP_U32_MAX 4294967295ull

static void *sp_alloc(size_t size) {
  void *ptr = malloc(size == 0 ? 1 : size);
  if (ptr == NULL) abort();
  return ptr;
}

static void *sp_grow(void *ptr, size_t size) {
  void *grown = realloc(ptr, size == 0 ? 1 : size);
  if (grown == NULL) abort();
  return grown;
}

static void sp_string_copy(bindings_string_t *out, const char *text) {
  size_t len = strlen(text);
  out->ptr = sp_alloc(len);
  memcpy(out->ptr, text, len);
  out->len = len;
}

/* ---- unit info ---------------------------------------------------------- */

void sp_unit_info(const sp_unit_t *unit, sandpiper_policy_types_unit_info_t *ret) {
  sp_string_copy(&ret->name, unit->name);
  sp_string_copy(&ret->description, unit->description);
  ret->params.len = unit->param_count;
  ret->params.ptr = sp_alloc(unit->param_count * sizeof(sandpiper_policy_types_param_spec_t));
  for (size_t i = 0; i < unit->param_count; i++) {
    const sp_param_decl_t *decl = &unit->params[i];
    sandpiper_policy_types_param_spec_t *spec = &ret->params.ptr[i];
    sp_string_copy(&spec->name, decl->name);
    sp_string_copy(&spec->description, decl->description);
    sp_string_copy(&spec->default_value, decl->default_value);
    sp_string_copy(&spec->pattern, decl->pattern);
  }
  ret->score_order = unit->score_order;
  ret->per_host = unit->per_host;
  if (unit->applies_to_count == 0) {
    ret->applies_to.tag = SANDPIPER_POLICY_TYPES_APPLIES_TO_EVERY_REQUEST;
    return;
  }
  ret->applies_to.tag = SANDPIPER_POLICY_TYPES_APPLIES_TO_REQUESTS_WITH;
  sandpiper_policy_types_list_request_property_t *list = &ret->applies_to.val.requests_with;
  list->len = unit->applies_to_count;
  list->ptr = sp_alloc(unit->applies_to_count * sizeof(sandpiper_policy_types_request_property_t));
  for (size_t i = 0; i < unit->applies_to_count; i++) {
    const sp_property_t *property = &unit->applies_to[i];
    sandpiper_policy_types_request_property_t *out = &list->ptr[i];
    memset(out, 0, sizeof *out);
    out->tag = property->tag;
    const char *key = property->key == NULL ? "" : property->key;
    switch (property->tag) {
      case SANDPIPER_POLICY_TYPES_REQUEST_PROPERTY_HINT:
        sp_string_copy(&out->val.hint, key);
        break;
      case SANDPIPER_POLICY_TYPES_REQUEST_PROPERTY_EXTRA_SPEC:
        sp_string_copy(&out->val.extra_spec, key);
        break;
      case SANDPIPER_POLICY_TYPES_REQUEST_PROPERTY_IMAGE_PROPERTY:
        sp_string_copy(&out->val.image_property, key);
        break;
      default:
        break;
    }
  }
}

/* ---- strings ------------------------------------------------------------ */

bool sp_str_eq(sp_str_t a, sp_str_t b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

bool sp_str_eq_c(sp_str_t a, const char *b) { return sp_str_eq(a, sp_str(b)); }

sp_str_t sp_str(const char *text) {
  sp_str_t s = {(uint8_t *)text, strlen(text)};
  return s;
}

static sp_str_t sp_empty(void) {
  sp_str_t s = {NULL, 0};
  return s;
}

bool sp_row(const bindings_list_u32_t *offsets, uint32_t row, uint32_t *start, uint32_t *end) {
  *start = 0;
  *end = 0;
  if ((size_t)row + 1 >= offsets->len) return false;
  uint32_t from = offsets->ptr[row], to = offsets->ptr[row + 1];
  if (from > to) return false;
  *start = from;
  *end = to;
  return true;
}

bool sp_strings_get(const sandpiper_policy_types_strings_t *table, uint32_t index, sp_str_t *value) {
  uint32_t start, end;
  *value = sp_empty();
  if (!sp_row(&table->offsets, index, &start, &end) || end > table->text.len) return false;
  value->ptr = table->text.ptr + start;
  value->len = end - start;
  return true;
}

/* ---- context ------------------------------------------------------------ */

void sp_context_init(sp_context_t *cx, const sandpiper_policy_types_request_t *request,
                     const sp_unit_t *unit) {
  memset(cx, 0, sizeof *cx);
  cx->request = request;
  cx->unit = unit;
}

void sp_context_free(sp_context_t *cx) {
  for (size_t i = 0; i < SP_HOST_METRIC_COUNT; i++)
    if (cx->fetched_host_metrics[i]) bindings_list_f64_free(&cx->host_metrics[i]);
  if (cx->fetched_host_statuses) sandpiper_policy_inventory_list_host_status_free(&cx->host_statuses);
  for (size_t i = 0; i < SP_HOST_FLAG_COUNT; i++)
    if (cx->fetched_host_flags[i]) bindings_list_u8_free(&cx->host_flags[i]);
  for (size_t i = 0; i < SP_HOST_TEXT_COUNT; i++)
    if (cx->fetched_host_texts[i]) sandpiper_policy_types_interned_free(&cx->host_texts[i]);
  for (size_t i = 0; i < SP_HOST_LABEL_KIND_COUNT; i++)
    if (cx->fetched_host_labels[i]) sandpiper_policy_types_labels_free(&cx->host_labels[i]);
  if (cx->fetched_numa_cells) sandpiper_policy_types_numa_topology_free(&cx->numa_cells);
  for (size_t i = 0; i < SP_CELL_METRIC_COUNT; i++)
    if (cx->fetched_cell_metrics[i]) bindings_list_f64_free(&cx->cell_metrics[i]);
  if (cx->fetched_cell_cpus) sandpiper_policy_types_cell_cpus_free(&cx->cell_cpus);
  for (size_t i = 0; i < SP_PCPU_FLAG_COUNT; i++)
    if (cx->fetched_pcpu_flags[i]) bindings_list_u8_free(&cx->pcpu_flags[i]);
  if (cx->fetched_cell_pages) sandpiper_policy_types_cell_pages_free(&cx->cell_pages);
  if (cx->fetched_cell_distances) sandpiper_policy_types_cell_distances_free(&cx->cell_distances);
  if (cx->fetched_device_pools) sandpiper_policy_types_pci_pools_free(&cx->device_pools);
  if (cx->fetched_device_pool_labels) sandpiper_policy_types_labels_free(&cx->device_pool_labels);
  if (cx->fetched_mdev_offers) sandpiper_policy_types_mdev_offers_free(&cx->mdev_offers);
  memset(cx, 0, sizeof *cx);
}

/* ---- hosts -------------------------------------------------------------- */

/* A WIT enum case beyond what this helper's caches hold means the bindings
 * are newer than the helper: trap (visibly) rather than index past a cache. */
static void sp_check_case(unsigned value, unsigned count) {
  if (value >= count) abort();
}

uint32_t sp_host_count(sp_context_t *cx) {
  if (!cx->fetched_host_count) {
    cx->host_count = sandpiper_policy_inventory_host_count();
    cx->fetched_host_count = true;
  }
  return cx->host_count;
}

const double *sp_host_metric(sp_context_t *cx, sandpiper_policy_types_host_metric_t metric) {
  sp_check_case(metric, SP_HOST_METRIC_COUNT);
  if (!cx->fetched_host_metrics[metric]) {
    sandpiper_policy_inventory_host_metrics(metric, &cx->host_metrics[metric]);
    cx->fetched_host_metrics[metric] = true;
  }
  return cx->host_metrics[metric].ptr;
}

const sandpiper_policy_types_host_status_t *sp_host_statuses(sp_context_t *cx) {
  if (!cx->fetched_host_statuses) {
    sandpiper_policy_inventory_host_statuses(&cx->host_statuses);
    cx->fetched_host_statuses = true;
  }
  return cx->host_statuses.ptr;
}

const uint8_t *sp_host_flags(sp_context_t *cx, sandpiper_policy_types_host_flag_t flag) {
  sp_check_case(flag, SP_HOST_FLAG_COUNT);
  if (!cx->fetched_host_flags[flag]) {
    sandpiper_policy_inventory_host_flags(flag, &cx->host_flags[flag]);
    cx->fetched_host_flags[flag] = true;
  }
  return cx->host_flags[flag].ptr;
}

const sandpiper_policy_types_interned_t *sp_host_texts(sp_context_t *cx,
                                                       sandpiper_policy_types_host_text_t text) {
  sp_check_case(text, SP_HOST_TEXT_COUNT);
  if (!cx->fetched_host_texts[text]) {
    sandpiper_policy_inventory_host_texts(text, &cx->host_texts[text]);
    cx->fetched_host_texts[text] = true;
  }
  return &cx->host_texts[text];
}

const sandpiper_policy_types_labels_t *sp_host_labels(sp_context_t *cx,
                                                      sandpiper_policy_types_host_label_kind_t kind) {
  sp_check_case(kind, SP_HOST_LABEL_KIND_COUNT);
  if (!cx->fetched_host_labels[kind]) {
    sandpiper_policy_inventory_host_labels(kind, &cx->host_labels[kind]);
    cx->fetched_host_labels[kind] = true;
  }
  return &cx->host_labels[kind];
}

double sp_host_metric_at(sp_context_t *cx, uint32_t host, sandpiper_policy_types_host_metric_t metric) {
  const double *column = sp_host_metric(cx, metric);
  return host < cx->host_metrics[metric].len ? column[host] : NAN;
}

bool sp_host_is_up(sp_context_t *cx, uint32_t host) {
  const sandpiper_policy_types_host_status_t *status = sp_host_statuses(cx);
  return host < cx->host_statuses.len && status[host] == SANDPIPER_POLICY_TYPES_HOST_STATUS_UP;
}

sp_str_t sp_host_text(sp_context_t *cx, uint32_t host, sandpiper_policy_types_host_text_t text) {
  const sandpiper_policy_types_interned_t *column = sp_host_texts(cx, text);
  sp_str_t value = sp_empty();
  if (host < column->indices.len) sp_strings_get(&column->values, column->indices.ptr[host], &value);
  return value;
}

bool sp_host_label(sp_context_t *cx, uint32_t host, sandpiper_policy_types_host_label_kind_t kind,
                   sp_str_t key, sp_str_t *value) {
  const sandpiper_policy_types_labels_t *labels = sp_host_labels(cx, kind);
  uint32_t start, end;
  if (!sp_row(&labels->offsets, host, &start, &end)) return false;
  if (end > labels->keys.len || end > labels->values.len) return false;
  for (uint32_t j = start; j < end; j++) {
    sp_str_t k;
    if (sp_strings_get(&labels->strings, labels->keys.ptr[j], &k) && sp_str_eq(k, key)) {
      return sp_strings_get(&labels->strings, labels->values.ptr[j], value);
    }
  }
  return false;
}

bool sp_host_capability(sp_context_t *cx, uint32_t host, sp_str_t key, sp_str_t *value) {
  return sp_host_label(cx, host, SANDPIPER_POLICY_TYPES_HOST_LABEL_KIND_CAPABILITIES, key, value);
}

bool sp_host_has_cpu_flag(sp_context_t *cx, uint32_t host, sp_str_t flag) {
  sp_str_t ignored;
  return sp_host_label(cx, host, SANDPIPER_POLICY_TYPES_HOST_LABEL_KIND_CPU_FLAGS, flag, &ignored);
}

/* ---- hardware ----------------------------------------------------------- */

/* Fetches a whole-cluster part once per call: `FETCH(&cx->FIELD)`. */
#define SP_FETCH_ONCE(cx, field, fetch)  \
  do {                                   \
    if (!(cx)->fetched_##field) {        \
      fetch(&(cx)->field);               \
      (cx)->fetched_##field = true;      \
    }                                    \
  } while (0)

const sandpiper_policy_types_numa_topology_t *sp_numa_cells(sp_context_t *cx) {
  SP_FETCH_ONCE(cx, numa_cells, sandpiper_policy_inventory_numa_cells);
  return &cx->numa_cells;
}

const double *sp_cell_metric(sp_context_t *cx, sandpiper_policy_types_cell_metric_t metric) {
  sp_check_case(metric, SP_CELL_METRIC_COUNT);
  if (!cx->fetched_cell_metrics[metric]) {
    sandpiper_policy_inventory_numa_cell_metrics(metric, &cx->cell_metrics[metric]);
    cx->fetched_cell_metrics[metric] = true;
  }
  return cx->cell_metrics[metric].ptr;
}

const sandpiper_policy_types_cell_cpus_t *sp_cell_cpus(sp_context_t *cx) {
  SP_FETCH_ONCE(cx, cell_cpus, sandpiper_policy_inventory_numa_cell_cpus);
  return &cx->cell_cpus;
}

const uint8_t *sp_pcpu_flags(sp_context_t *cx, sandpiper_policy_types_pcpu_flag_t flag) {
  sp_check_case(flag, SP_PCPU_FLAG_COUNT);
  if (!cx->fetched_pcpu_flags[flag]) {
    sandpiper_policy_inventory_numa_pcpu_flags(flag, &cx->pcpu_flags[flag]);
    cx->fetched_pcpu_flags[flag] = true;
  }
  return cx->pcpu_flags[flag].ptr;
}

const sandpiper_policy_types_cell_pages_t *sp_cell_pages(sp_context_t *cx) {
  SP_FETCH_ONCE(cx, cell_pages, sandpiper_policy_inventory_numa_cell_pages);
  return &cx->cell_pages;
}

const sandpiper_policy_types_cell_distances_t *sp_cell_distances(sp_context_t *cx) {
  SP_FETCH_ONCE(cx, cell_distances, sandpiper_policy_inventory_numa_cell_distances);
  return &cx->cell_distances;
}

const sandpiper_policy_types_pci_pools_t *sp_device_pools(sp_context_t *cx) {
  SP_FETCH_ONCE(cx, device_pools, sandpiper_policy_inventory_device_pools);
  return &cx->device_pools;
}

const sandpiper_policy_types_labels_t *sp_device_pool_labels(sp_context_t *cx) {
  SP_FETCH_ONCE(cx, device_pool_labels, sandpiper_policy_inventory_device_pool_labels);
  return &cx->device_pool_labels;
}

const sandpiper_policy_types_mdev_offers_t *sp_mdev_offers(sp_context_t *cx) {
  SP_FETCH_ONCE(cx, mdev_offers, sandpiper_policy_inventory_mdev_types);
  return &cx->mdev_offers;
}

bool sp_host_cells(sp_context_t *cx, uint32_t host, uint32_t *start, uint32_t *end) {
  return sp_row(&sp_numa_cells(cx)->offsets, host, start, end);
}

/* ---- the VM ------------------------------------------------------------- */

static bool sp_find_pair(const sandpiper_policy_types_list_key_value_t *pairs, sp_str_t key,
                         sp_str_t *value) {
  for (size_t i = 0; i < pairs->len; i++) {
    if (sp_str_eq(pairs->ptr[i].key, key)) {
      *value = pairs->ptr[i].value;
      return true;
    }
  }
  return false;
}

bool sp_extra_spec(const sp_context_t *cx, sp_str_t key, sp_str_t *value) {
  return sp_find_pair(&cx->request->vm.extra_specs, key, value);
}

/* ---- parameters --------------------------------------------------------- */

sp_param_status_t sp_param_str(const sp_context_t *cx, const char *name, sp_str_t *value) {
  sp_str_t key = sp_str(name);
  if (sp_find_pair(&cx->request->params, key, value)) return SP_PARAM_OK;
  for (size_t i = 0; i < cx->unit->param_count; i++) {
    if (strcmp(cx->unit->params[i].name, name) == 0) {
      *value = sp_str(cx->unit->params[i].default_value);
      return SP_PARAM_OK;
    }
  }
  return SP_PARAM_MISSING;
}

static bool sp_is_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The value without leading and trailing ASCII white space. */
static sp_str_t sp_trim(sp_str_t s) {
  while (s.len > 0 && sp_is_space(s.ptr[0])) {
    s.ptr++;
    s.len--;
  }
  while (s.len > 0 && sp_is_space(s.ptr[s.len - 1])) s.len--;
  return s;
}

sp_param_status_t sp_param_u32(const sp_context_t *cx, const char *name, uint32_t *value) {
  sp_str_t text;
  sp_param_status_t status = sp_param_str(cx, name, &text);
  if (status != SP_PARAM_OK) return status;
  text = sp_trim(text);
  /* Rust's `u32` syntax: an optional `+`, then digits. */
  if (text.len > 0 && text.ptr[0] == '+') {
    text.ptr++;
    text.len--;
  }
  if (text.len == 0) return SP_PARAM_INVALID;
  uint64_t number = 0;
  for (size_t i = 0; i < text.len; i++) {
    if (text.ptr[i] < '0' || text.ptr[i] > '9') return SP_PARAM_INVALID;
    number = number * 10 + (uint64_t)(text.ptr[i] - '0');
    if (number > SP_U32_MAX) return SP_PARAM_INVALID;
  }
  *value = (uint32_t)number;
  return SP_PARAM_OK;
}

static bool sp_is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Whether `s` is a finite decimal as Rust's `f64` reads it: sign, digits
 * with an optional point (at least one digit), optional exponent. strtod
 * alone would also take `0x10`, `inf` and `nan`. */
static bool sp_is_decimal(sp_str_t s) {
  size_t i = 0, digits = 0;
  if (i < s.len && (s.ptr[i] == '+' || s.ptr[i] == '-')) i++;
  while (i < s.len && sp_is_digit(s.ptr[i])) i++, digits++;
  if (i < s.len && s.ptr[i] == '.') {
    i++;
    while (i < s.len && sp_is_digit(s.ptr[i])) i++, digits++;
  }
  if (digits == 0) return false;
  if (i < s.len && (s.ptr[i] == 'e' || s.ptr[i] == 'E')) {
    i++;
    if (i < s.len && (s.ptr[i] == '+' || s.ptr[i] == '-')) i++;
    size_t exponent_digits = 0;
    while (i < s.len && sp_is_digit(s.ptr[i])) i++, exponent_digits++;
    if (exponent_digits == 0) return false;
  }
  return i == s.len;
}

sp_param_status_t sp_param_f64(const sp_context_t *cx, const char *name, double *value) {
  sp_str_t text;
  sp_param_status_t status = sp_param_str(cx, name, &text);
  if (status != SP_PARAM_OK) return status;
  text = sp_trim(text);
  if (!sp_is_decimal(text)) return SP_PARAM_INVALID;
  char buffer[64];
  if (text.len == 0 || text.len >= sizeof buffer) return SP_PARAM_INVALID;
  memcpy(buffer, text.ptr, text.len);
  buffer[text.len] = '\0';
  char *end = NULL;
  double number = strtod(buffer, &end);
  if (end != buffer + text.len || !isfinite(number)) return SP_PARAM_INVALID;
  *value = number;
  return SP_PARAM_OK;
}

sp_param_status_t sp_param_bool(const sp_context_t *cx, const char *name, bool *value) {
  sp_str_t text;
  sp_param_status_t status = sp_param_str(cx, name, &text);
  if (status != SP_PARAM_OK) return status;
  text = sp_trim(text);
  if (sp_str_eq_c(text, "true")) {
    *value = true;
  } else if (sp_str_eq_c(text, "false")) {
    *value = false;
  } else {
    return SP_PARAM_INVALID;
  }
  return SP_PARAM_OK;
}

void sp_param_error(const sp_context_t *cx, const char *name, sp_param_status_t status,
                    const char *expected, char *buffer, size_t size) {
  if (size == 0) return;
  sp_str_t value;
  if (status == SP_PARAM_MISSING || sp_param_str(cx, name, &value) != SP_PARAM_OK) {
    snprintf(buffer, size, "parameter `%s` is neither given nor declared", name);
  } else {
    snprintf(buffer, size, "parameter `%s` is \"%.*s\", not %s", name, (int)value.len,
             (const char *)value.ptr, expected);
  }
}

/* ---- rejections --------------------------------------------------------- */

void sp_rejections_init(sp_rejections_t *rejections) { memset(rejections, 0, sizeof *rejections); }

static bool sp_in_groups(const sp_rejections_t *rejections, uint32_t host) {
  for (size_t g = 0; g < rejections->len; g++) {
    const bindings_list_u32_t *hosts = &rejections->groups[g].hosts;
    for (size_t i = 0; i < hosts->len; i++)
      if (hosts->ptr[i] == host) return true;
  }
  return false;
}

bool sp_is_rejected(const sp_rejections_t *rejections, uint32_t host) {
  if (host >= SP_DENSE_INDEX_LIMIT) return sp_in_groups(rejections, host);
  size_t word = host / 64;
  return word < rejections->rejected_words && (rejections->rejected[word] >> (host % 64)) & 1;
}

static void sp_mark(sp_rejections_t *rejections, uint32_t host) {
  if (host >= SP_DENSE_INDEX_LIMIT) return;
  size_t word = host / 64;
  if (word >= rejections->rejected_words) {
    size_t words = word + 1;
    if (words < 2 * rejections->rejected_words) words = 2 * rejections->rejected_words;
    if (words > SP_DENSE_INDEX_LIMIT / 64) words = SP_DENSE_INDEX_LIMIT / 64;
    rejections->rejected = sp_grow(rejections->rejected, words * sizeof(uint64_t));
    memset(rejections->rejected + rejections->rejected_words, 0,
           (words - rejections->rejected_words) * sizeof(uint64_t));
    rejections->rejected_words = words;
  }
  rejections->rejected[word] |= (uint64_t)1 << (host % 64);
}

static void sp_push_host(bindings_list_u32_t *hosts, uint32_t host) {
  /* Capacity is the next power of two at or above `len` (rounded to 8). */
  size_t len = hosts->len;
  if (len >= 8 && (len & (len - 1)) == 0) {
    hosts->ptr = sp_grow(hosts->ptr, 2 * len * sizeof(uint32_t));
  } else if (len == 0) {
    hosts->ptr = sp_alloc(8 * sizeof(uint32_t));
  }
  hosts->ptr[hosts->len++] = host;
}

/* The group for `reason` of the given kind, added when new. */
static size_t sp_group(sp_rejections_t *rejections, const char *reason, bool is_template) {
  sp_str_t wanted = sp_str(reason);
  /* Consecutive rejections usually share a reason: check the latest first. */
  size_t last = rejections->len;
  if (last > 0 && rejections->is_template[last - 1] == is_template &&
      sp_str_eq(rejections->groups[last - 1].reason, wanted))
    return last - 1;
  for (size_t g = 0; g < rejections->len; g++) {
    if (rejections->is_template[g] == is_template && sp_str_eq(rejections->groups[g].reason, wanted))
      return g;
  }
  if (rejections->len == rejections->capacity) {
    rejections->capacity = rejections->capacity == 0 ? 4 : 2 * rejections->capacity;
    rejections->groups = sp_grow(rejections->groups,
                                 rejections->capacity * sizeof(sandpiper_policy_types_rejection_t));
    rejections->is_template = sp_grow(rejections->is_template, rejections->capacity * sizeof(bool));
    rejections->figure_capacity =
        sp_grow(rejections->figure_capacity, rejections->capacity * sizeof(size_t));
  }
  size_t group = rejections->len++;
  sandpiper_policy_types_rejection_t *added = &rejections->groups[group];
  sp_string_copy(&added->reason, reason);
  added->hosts.ptr = NULL;
  added->hosts.len = 0;
  added->figures.ptr = NULL;
  added->figures.len = 0;
  rejections->is_template[group] = is_template;
  rejections->figure_capacity[group] = 0;
  return group;
}

bool sp_reject(sp_rejections_t *rejections, uint32_t host, const char *reason) {
  if (sp_is_rejected(rejections, host)) return false;
  sp_mark(rejections, host);
  /* Found first: adding a group may move `groups`. */
  size_t group = sp_group(rejections, reason, false);
  sp_push_host(&rejections->groups[group].hosts, host);
  return true;
}

bool sp_reject_with(sp_rejections_t *rejections, uint32_t host, const char *template_,
                    const double *figures, size_t count) {
  if (sp_is_rejected(rejections, host)) return false;
  sp_mark(rejections, host);
  size_t group = sp_group(rejections, template_, true);
  sp_push_host(&rejections->groups[group].hosts, host);
  bindings_list_f64_t *list = &rejections->groups[group].figures;
  size_t *capacity = &rejections->figure_capacity[group];
  if (list->len + count > *capacity) {
    size_t grown = *capacity == 0 ? 8 : 2 * *capacity;
    if (grown < list->len + count) grown = list->len + count;
    list->ptr = sp_grow(list->ptr, grown * sizeof(double));
    *capacity = grown;
  }
  if (count > 0) memcpy(list->ptr + list->len, figures, count * sizeof(double));
  list->len += count;
  return true;
}

void sp_rejections_finish(sp_rejections_t *rejections, sandpiper_policy_types_rejection_t **ptr,
                          size_t *len) {
  *ptr = rejections->groups;
  *len = rejections->len;
  free(rejections->rejected);
  free(rejections->is_template);
  free(rejections->figure_capacity);
  memset(rejections, 0, sizeof *rejections);
}

/* ---- scores ------------------------------------------------------------- */

double *sp_scores_init(sandpiper_policy_types_scores_t *ret, size_t count) {
  ret->values.ptr = sp_alloc(count * sizeof(double));
  ret->values.len = count;
  ret->floor.is_some = false;
  ret->ceiling.is_some = false;
  return ret->values.ptr;
}
